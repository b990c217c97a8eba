package jobproto

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProgressRoundTrip(t *testing.T) {
	spool := t.TempDir()
	at := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	if err := WriteProgress(spool, "42", 1200, at); err != nil {
		t.Fatal(err)
	}
	if err := WriteProgress(spool, "42", 1500, at.Add(time.Minute)); err != nil { // replaces
		t.Fatal(err)
	}
	if err := WriteProgress(spool, "7_3", 10, at); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../x", "42;rm", "", "1_2_3"} {
		if err := WriteProgress(spool, bad, 1, at); err == nil {
			t.Errorf("WriteProgress(%q) accepted a bad id", bad)
		}
	}
	if err := WriteProgress(spool, "1", -1, at); err == nil {
		t.Error("negative steps accepted")
	}
	got, errs := ReadProgress(spool)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if p := got["42"]; p.Steps != 1500 || !p.At.Equal(at.Add(time.Minute)) || p.UID != os.Getuid() {
		t.Errorf("report 42 = %+v", p)
	}
	if p := got["7_3"]; p.Steps != 10 {
		t.Errorf("report 7_3 = %+v", p)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Join(spool, ProgressSubdir))
	if len(entries) != 2 {
		t.Errorf("progress dir has %d entries, want 2", len(entries))
	}
}

func TestReadProgressSkipsBadFiles(t *testing.T) {
	spool := t.TempDir()
	dir := filepath.Join(spool, ProgressSubdir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(spool, "secret")
	if err := os.WriteFile(secret, []byte(`{"job_id":"9","steps":5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	write("1.json", `{"job_id":"1","steps":10,"at":"2026-01-01T00:00:00Z"}`)
	write("2.json", `not json SECRET-CONTENT`)
	write("3.json", `{"job_id":"4","steps":10}`)
	write("5.json", `{"job_id":"5","steps":-3}`)
	write("6.json", strings.Repeat(" ", 5000))
	write("evil name.json", `{}`)
	if err := os.Symlink(secret, filepath.Join(dir, "9.json")); err != nil {
		t.Fatal(err)
	}
	got, errs := ReadProgress(spool)
	if len(got) != 1 || got["1"].Steps != 10 {
		t.Errorf("ReadProgress = %+v", got)
	}
	if len(errs) != 6 {
		t.Errorf("got %d errors, want 6: %v", len(errs), errs)
	}
	for _, err := range errs {
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error leaks file contents: %v", err)
		}
	}
	if got, errs := ReadProgress(filepath.Join(spool, "missing")); len(got) != 0 || len(errs) != 0 {
		t.Errorf("missing dir: %v %v", got, errs)
	}
}

func TestProgressTotal(t *testing.T) {
	spool := t.TempDir()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := WriteReport(spool, Progress{JobID: "28_0", Steps: 450, Total: 1000, At: at}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if err := WriteReport(spool, Progress{JobID: "5", Steps: 1, Total: bad, At: at}); err == nil {
			t.Errorf("total %v accepted", bad)
		}
	}
	b, err := os.ReadFile(ProgressPath(spool, "28_0"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"job_id":"28_0","steps":450,"total":1000,"at":"2026-12-01T10:00:00Z"}` + "\n"; string(b) != want {
		t.Errorf("file = %q, want %q", b, want)
	}
	// Without a total the file is what older versions wrote.
	if err := WriteProgress(spool, "7", 3, at); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(ProgressPath(spool, "7")); strings.Contains(string(b), "total") {
		t.Errorf("report without a total has one: %s", b)
	}
	// A bad total from another writer keeps the steps.
	dir := filepath.Join(spool, ProgressSubdir)
	if err := os.WriteFile(filepath.Join(dir, "9.json"), []byte(`{"job_id":"9","steps":5,"total":-4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, errs := ReadProgress(spool)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if p := got["28_0"]; p.Steps != 450 || p.Total != 1000 {
		t.Errorf("28_0 = %+v", p)
	}
	if p := got["9"]; p.Steps != 5 || p.Total != 0 {
		t.Errorf("9 = %+v", p)
	}
}
