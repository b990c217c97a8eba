package jobproto

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFollower(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "train.log")
	fl := NewLogFollower(path)
	defer fl.Close()
	step := func(name string, want ...string) {
		t.Helper()
		got, err := fl.Lines(false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: lines (-want +got):\n%s", name, diff)
		}
	}
	appendTo := func(p, s string) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}

	step("missing file")
	appendTo(path, "step 1/10\nstep 2/")
	step("first lines", "step 1/10")
	step("stable partial line", "step 2/")
	step("nothing new")
	appendTo(path, "10\n")
	step("partial completed", "step 2/10")
	// tqdm: redraws after "\r", the bar itself unterminated.
	appendTo(path, "\r 30%|███ | 3/10 [00:01<00:02]\r 40%|████ | 4/10 [00:01<00:01]")
	step("tqdm redraws", " 30%|███ | 3/10 [00:01<00:02]")
	step("tqdm bar between redraws", " 40%|████ | 4/10 [00:01<00:01]")
	// Truncated (a restarted job writing `> train.log`).
	if err := os.WriteFile(path, []byte("step 1/"), 0o644); err != nil {
		t.Fatal(err)
	}
	step("after truncation, growing line")
	appendTo(path, "5\n")
	step("after truncation", "step 1/5")
	// Rotated: renamed away, a new file in its place; the old one's tail is read first.
	appendTo(path, "step 2/5\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(path+".1", "step 3/5\n")
	step("rotated, new file not there yet", "step 2/5", "step 3/5")
	appendTo(path, "step 4/5\n")
	step("new file", "step 4/5")
	appendTo(path, "step 5/5")
	got, err := fl.Lines(true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"step 5/5"}, got); diff != "" {
		t.Errorf("final: (-want +got):\n%s", diff)
	}
}

func TestFollowerLongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	long := make([]byte, MaxLogLine+100)
	for i := range long {
		long[i] = 'x'
	}
	if err := os.WriteFile(path, append(append([]byte("step 1/2 "), long...), "\nstep 2/2\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	fl := NewLogFollower(path)
	defer fl.Close()
	got, err := fl.Lines(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[0]) != MaxLogLine || got[1] != "step 2/2" {
		t.Fatalf("got %d lines, first %d bytes", len(got), len(got[0]))
	}
	if s, _, ok := ParseLogLine(got[0]); !ok || s != 1 {
		t.Errorf("the kept start of a long line does not parse: %v %v", s, ok)
	}
}

func TestFollowerNotRegular(t *testing.T) {
	fl := NewLogFollower(t.TempDir())
	defer fl.Close()
	if _, err := fl.Lines(false); err == nil {
		t.Error("following a directory: no error")
	}
}
