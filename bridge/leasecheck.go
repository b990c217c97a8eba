package bridge

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// reLeaseSeconds finds job_submit.lua's lease: a line
// `HADAR_LEASE_SECONDS = 120` (a Lua comment before it does not count).
var reLeaseSeconds = regexp.MustCompile(`(?m)^\s*HADAR_LEASE_SECONDS\s*=\s*([0-9]+)\s*(?:--.*)?$`)

// ScriptLease reads the lease job_submit.lua gives tagged jobs
// (HADAR_LEASE_SECONDS) from the script's text; false if it sets none.
func ScriptLease(script string) (time.Duration, bool) {
	m := reLeaseSeconds.FindStringSubmatch(script)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// CheckScriptLease compares the lease of the job_submit.lua next to
// slurmConf with hadar.toml's lease: if they differ, hadar reads every
// job's begin time wrong (a job's own --begin is its begin time minus the
// lease). It returns "" when they agree or the script cannot be read (it
// may live only on the controller), else what is wrong.
func CheckScriptLease(slurmConf string, lease time.Duration) string {
	if slurmConf == "" {
		slurmConf = "/etc/slurm/slurm.conf"
	}
	path := filepath.Join(filepath.Dir(slurmConf), "job_submit.lua")
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	got, ok := ScriptLease(string(b))
	switch {
	case !ok:
		return fmt.Sprintf("%s sets no HADAR_LEASE_SECONDS: is it hadar's job_submit.lua (contrib/slurm/job_submit.lua)?", path)
	case got != lease:
		return fmt.Sprintf("%s gives tagged jobs a lease of %s, hadar.toml's lease is %s: set both to the same value", path, got, lease)
	}
	return ""
}
