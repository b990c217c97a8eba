package main

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/hadar-sched/hadar/internal/manpage"
)

// The committed man page hadar-slurmd.8 is what the daemon's flags
// generate (`make man` rewrites it).
func TestManPage(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "") // the --config default must be the built-in path
	page, err := manpage.HadarSlurmd(newFlagSet(&options{}, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	manpage.Lint(t, manpage.HadarSlurmdFile, page)
	manpage.CheckGolden(t, filepath.Join("..", "..", "man", manpage.HadarSlurmdFile), page)
}
