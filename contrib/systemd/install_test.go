// Package systemd holds the tests of the systemd unit and of `make
// install` (there is no Go code here).
package systemd

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/jobproto"
)

const unitFile = "hadar-slurmd.service"

// readUnit parses a unit file into section.key -> values (in order).
func readUnit(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = strings.Trim(l, "[]")
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a unit line: %q", path, n, l)
			}
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

// The unit starts after munge and slurmctld, restarts on failure, logs to
// the journal, reloads with SIGHUP, and gives the fail-open release on
// SIGTERM its time; its hardening leaves scontrol able to work.
func TestUnit(t *testing.T) {
	u := readUnit(t, unitFile)
	one := func(key string) string {
		v := u[key]
		if len(v) != 1 {
			t.Errorf("%s: %d values %q, want one", key, len(v), v)
			return ""
		}
		return v[0]
	}
	after := strings.Fields(strings.Join(u["Unit.After"], " "))
	for _, want := range []string{"munge.service", "slurmctld.service", "network-online.target"} {
		if !contains(after, want) {
			t.Errorf("After= lacks %s: %v", want, after)
		}
	}
	for key, want := range map[string]string{
		"Service.Type":                     "notify",
		"Service.NotifyAccess":             "main",
		"Service.ExecStopPost":             "-/usr/local/sbin/hadar-slurmd --release-all",
		"Service.Restart":                  "on-failure",
		"Service.KillSignal":               "SIGTERM",
		"Service.KillMode":                 "mixed",
		"Service.ExecReload":               "/bin/kill -HUP $MAINPID",
		"Service.StandardError":            "journal",
		"Service.StandardOutput":           "journal",
		"Service.RestartPreventExitStatus": "2",
		"Service.StateDirectory":           "hadar",
		"Service.NoNewPrivileges":          "yes",
		"Service.ProtectSystem":            "strict",
		"Install.WantedBy":                 "multi-user.target",
	} {
		if got := one(key); got != want {
			t.Errorf("%s=%q, want %q", key, got, want)
		}
	}
	if got := one("Service.ExecStart"); !strings.HasPrefix(got, "/usr/local/sbin/hadar-slurmd") {
		t.Errorf("ExecStart=%q (make install rewrites /usr/local/sbin/hadar-slurmd)", got)
	}
	if d, err := time.ParseDuration(one("Service.WatchdogSec")); err != nil || d < 5*time.Minute {
		t.Errorf("WatchdogSec=%v (%v): want at least 5min (a round's commands are bounded by slurm.command_timeout)", d, err)
	}
	// The stop timeout covers the daemon's release on exit (30 s of
	// tries, see releaseOnExit in cmd/hadar-slurmd) with margin.
	if d, err := time.ParseDuration(one("Service.TimeoutStopSec")); err != nil || d < 60*time.Second {
		t.Errorf("TimeoutStopSec=%v (%v): want at least 60s", d, err)
	}
	// What would break scontrol/squeue: no network, no Unix sockets (munge),
	// another user than root, no access to slurm.conf.
	for _, bad := range []string{"Service.PrivateNetwork", "Service.IPAddressDeny", "Service.User", "Service.DynamicUser",
		"Service.PrivateUsers", "Service.InaccessiblePaths", "Service.ProtectProc"} {
		if v, ok := u[bad]; ok {
			t.Errorf("%s=%v would keep the daemon from running scontrol as root", bad, v)
		}
	}
	fams := strings.Fields(one("Service.RestrictAddressFamilies"))
	for _, want := range []string{"AF_UNIX", "AF_INET", "AF_INET6"} {
		if !contains(fams, want) {
			t.Errorf("RestrictAddressFamilies lacks %s (munge socket, slurmctld)", want)
		}
	}
	if rw := one("Service.ReadWritePaths"); !strings.Contains(rw, jobproto.DefaultSpoolDir) {
		t.Errorf("ReadWritePaths=%q lacks the default spool_dir %s", rw, jobproto.DefaultSpoolDir)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// `make install DESTDIR=...` lays out the files at conventional paths with
// the right modes; the installed unit, config example and binaries work.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	install := func(args ...string) {
		t.Helper()
		cmd := exec.Command(mk, append([]string{"-s", "-C", repo, "install"}, args...)...)
		cmd.Env = append(os.Environ(), "MAKEFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make install %v: %v\n%s", args, err, out)
		}
	}
	install("DESTDIR=" + dest)

	want := map[string]fs.FileMode{
		"usr/local/bin/hadar":                               0o755,
		"usr/local/sbin/hadar-slurmd":                       0o755,
		"usr/local/lib/systemd/system/hadar-slurmd.service": 0o644,
		"etc/hadar/hadar.toml.example":                      0o640,
		"usr/local/share/hadar/job_submit.lua":              0o644,
		"usr/local/share/man/man1/hadar.1":                  0o644,
		"usr/local/share/man/man5/hadar.toml.5":             0o644,
		"usr/local/share/man/man8/hadar-slurmd.8":           0o644,
		"usr/local/lib/tmpfiles.d/hadar.conf":               0o644,
		"etc/default/hadar-slurmd":                          0o644,
	}
	var got []string
	err = filepath.WalkDir(dest, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dest, path)
		got = append(got, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if mode, ok := want[rel]; !ok {
			t.Errorf("unexpected file %s", rel)
		} else if info.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", rel, info.Mode().Perm(), mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if len(got) != len(want) {
		t.Errorf("installed %v", got)
	}
	if u := readUnit(t, filepath.Join(dest, "usr/local/lib/systemd/system", unitFile)); u["Service.ExecStart"][0] != "/usr/local/sbin/hadar-slurmd $HADAR_SLURMD_OPTS" {
		t.Errorf("installed ExecStart=%q", u["Service.ExecStart"])
	}
	if _, err := config.Load(filepath.Join(dest, "etc/hadar/hadar.toml.example")); err != nil {
		t.Errorf("installed example config: %v", err)
	}
	for _, c := range [][]string{{"usr/local/bin/hadar", "--version"}, {"usr/local/sbin/hadar-slurmd", "--version"}} {
		out, err := exec.Command(filepath.Join(dest, c[0]), c[1:]...).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), filepath.Base(c[0])+" ") {
			t.Errorf("%s %v: %v %q", c[0], c[1:], err, out)
		}
	}
	for _, page := range []string{"man1/hadar.1", "man5/hadar.toml.5", "man8/hadar-slurmd.8"} {
		a, _ := os.ReadFile(filepath.Join(dest, "usr/local/share/man", page))
		b, _ := os.ReadFile(filepath.Join(repo, "man", filepath.Base(page)))
		if len(a) == 0 || string(a) != string(b) {
			t.Errorf("installed %s differs from man/%s", page, filepath.Base(page))
		}
	}

	// PREFIX moves everything but the config, and the unit follows it.
	// Installed without DESTDIR into a scratch prefix, the unit passes
	// systemd-analyze verify (its binary and man pages exist there).
	root := t.TempDir()
	install("PREFIX="+root+"/usr", "SYSCONFDIR="+root+"/etc")
	unit := filepath.Join(root, "usr/lib/systemd/system", unitFile)
	if u := readUnit(t, unit); u["Service.ExecStart"][0] != root+"/usr/sbin/hadar-slurmd $HADAR_SLURMD_OPTS" {
		t.Errorf("PREFIX=%s/usr: ExecStart=%q", root, u["Service.ExecStart"])
	}
	for _, f := range []string{"usr/bin/hadar", "usr/share/hadar/job_submit.lua", "usr/share/man/man8/hadar-slurmd.8", "etc/hadar/hadar.toml.example"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("PREFIX install: %v", err)
		}
	}
	if sa, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("no systemd-analyze: unit not verified")
	} else {
		cmd := exec.Command(sa, "verify", unit)
		cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(root, "usr/share/man"))
		if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
	}
}

// TestTmpfiles: the spool the unit cannot create (ProtectSystem=strict) is
// created by tmpfiles.d, with the modes the daemon and the jobs need.
func TestTmpfiles(t *testing.T) {
	b, err := os.ReadFile("hadar.tmpfiles")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		jobproto.DefaultSpoolDir: "0755",
		filepath.Join(jobproto.DefaultSpoolDir, jobproto.ProgressSubdir): "1777",
		filepath.Join(jobproto.DefaultSpoolDir, jobproto.CopiesSubdir):   "1777",
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "d" {
			if mode, ok := want[f[1]]; ok && mode == f[2] {
				delete(want, f[1])
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("hadar.tmpfiles lacks %v", want)
	}
}

// capabilityUses are the privileged operations of the daemon's code (a
// call, matched in its non-test Go source) and the capability each needs
// of the unit's CapabilityBoundingSet when the file or directory is not
// root's own.
var capabilityUses = []struct {
	call, capability, why string
}{
	{"Lchown(", "CAP_CHOWN", "a copies job's directory is given to the job's user (jobproto.WriteCopyPlan)"},
	{"Chown(", "CAP_CHOWN", "a file is given to another user"},
	{"ReadProgress(", "CAP_DAC_READ_SEARCH", "the jobs' progress files are their users', whatever their modes"},
	{"RemoveStaleProgress(", "CAP_FOWNER", "stale progress files are other users' files in a sticky directory"},
}

// daemonPackages are the packages hadar-slurmd links that touch files.
var daemonPackages = []string{"cmd/hadar-slurmd", "bridge", "jobproto", "config", "profiles", "internal/statedb"}

// The unit's capability bounding set covers every privileged operation
// the daemon's code performs: a call added without its capability would
// fail only under systemd, with EPERM.
func TestUnitCapabilitiesCoverTheCode(t *testing.T) {
	u := readUnit(t, unitFile)
	bounding := strings.Fields(strings.Join(u["Service.CapabilityBoundingSet"], " "))
	root := filepath.Join("..", "..")
	for _, pkg := range daemonPackages {
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, use := range capabilityUses {
				if strings.Contains(string(src), "."+use.call) && !contains(bounding, use.capability) {
					t.Errorf("%s calls %s but CapabilityBoundingSet=%v lacks %s: %s",
						filepath.ToSlash(f), strings.TrimSuffix(use.call, "("), bounding, use.capability, use.why)
				}
			}
		}
	}
}
