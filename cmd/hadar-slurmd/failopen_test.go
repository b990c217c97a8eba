package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/profiles"
)

// heldTaggedRow is one squeue row in hadar's format (slurm.JobFormat):
// job 777, tagged and on hadar's lease (a begin time a minute from now).
// Hand-written in that layout, not captured from Slurm.
var heldTaggedRow = fmt.Sprintf("777|777|N/A|bob|PENDING|1|%s|%s|0:00|gres/gpu:1||BeginTime|1000|(null)|%-64.64s|%-512.512s\n",
	time.Now().Add(-time.Minute).Format("2006-01-02T15:04:05"), time.Now().Add(time.Minute).Format("2006-01-02T15:04:05"),
	"train", "hadar model=resnet50-bs64")

// shimSlurm writes squeue and scontrol scripts into a new bin_dir: squeue
// prints rows, scontrol appends its arguments to the returned log.
func shimSlurm(t *testing.T, rows string) (binDir, calls string) {
	t.Helper()
	binDir = t.TempDir()
	calls = filepath.Join(binDir, "calls.log")
	out := filepath.Join(binDir, "squeue.out")
	if err := os.WriteFile(out, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{
		"squeue":   "#!/bin/sh\ncat " + out + "\n",
		"scontrol": "#!/bin/sh\necho \"$@\" >> " + calls + "\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(binDir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return binDir, calls
}

// Fail-open (--release-all, which the guardian and ExecStopPost run)
// releases the held jobs whatever state the throughput database is in: it
// never opens it, nor reads the throughputs file.
func TestReleaseAllWithoutThroughputDatabase(t *testing.T) {
	cases := []struct {
		name string
		// spoil breaks the throughput database at path (nil: leave it).
		spoil       func(t *testing.T, path string)
		throughputs string
	}{
		{name: "corrupt hadar.db", spoil: func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("not a database "), 512), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "hadar.db of a newer schema", spoil: func(t *testing.T, path string) {
			s, err := profiles.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			db, err := sql.Open("sqlite3", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (101, 'future', '2030-01-01T00:00:00Z')`); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "missing throughputs file", throughputs: "missing-matrix.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HADAR_CONFIG", "")
			dir := t.TempDir()
			dbPath := filepath.Join(dir, "hadar.db")
			t.Setenv("HADAR_DB", dbPath)
			if tc.spoil != nil {
				tc.spoil(t, dbPath)
			}
			binDir, calls := shimSlurm(t, heldTaggedRow)
			conf := fmt.Sprintf("data_dir = %q\nspool_dir = %q\n[slurm]\nbin_dir = %q\n",
				filepath.Join(dir, "data"), filepath.Join(dir, "spool"), binDir)
			if tc.throughputs != "" {
				conf = fmt.Sprintf("throughputs = %q\n", filepath.Join(dir, tc.throughputs)) + conf
			}
			cfgPath := filepath.Join(dir, "hadar.toml")
			if err := os.WriteFile(cfgPath, []byte(conf), 0o640); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			code := run([]string{"--config", cfgPath, "--release-all"}, &bytes.Buffer{}, &stderr)
			got, _ := os.ReadFile(calls)
			if code != 0 || strings.TrimSpace(string(got)) != "update JobId=777 StartTime=now" {
				t.Errorf("--release-all: exit %d, scontrol calls %q, want exit 0 and the end of job 777's lease; stderr:\n%s", code, got, stderr.String())
			}
		})
	}
}

// The guardian fails open the same way when the daemon dies: a corrupt
// hadar.db does not keep it from releasing the held jobs.
func TestGuardianWithCorruptThroughputDatabase(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hadar.db")
	t.Setenv("HADAR_DB", dbPath)
	if err := os.WriteFile(dbPath, bytes.Repeat([]byte("not a database "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	binDir, calls := shimSlurm(t, heldTaggedRow)
	cfgPath := filepath.Join(dir, "hadar.toml")
	conf := fmt.Sprintf("data_dir = %q\nspool_dir = %q\n[slurm]\nbin_dir = %q\n", filepath.Join(dir, "data"), filepath.Join(dir, "spool"), binDir)
	if err := os.WriteFile(cfgPath, []byte(conf), 0o640); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"--config", cfgPath}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	// An empty stdin: the daemon's end of the pipe closed without a clean stop.
	code := guard(o, strings.NewReader(""), &stderr)
	got, _ := os.ReadFile(calls)
	if code != 0 || strings.TrimSpace(string(got)) != "update JobId=777 StartTime=now" {
		t.Errorf("guardian: exit %d, scontrol calls %q, want exit 0 and the end of job 777's lease; stderr:\n%s", code, got, stderr.String())
	}
}
