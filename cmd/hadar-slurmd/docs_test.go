package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/hadar-sched/hadar/internal/doccheck"
)

// Every `hadar-slurmd ...` command line in docs/*.md and the README uses
// flags the daemon has.
func TestDocsCommandsExist(t *testing.T) {
	files, err := doccheck.DocFiles("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := doccheck.Commands(files, "hadar-slurmd")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 3 {
		t.Fatalf("only %d hadar-slurmd commands found", len(cmds))
	}
	for _, c := range cmds {
		fs := newFlagSet(&options{}, io.Discard)
		args := c.Args[1:]
		for i := 0; i < len(args); i++ {
			a := args[i]
			if !strings.HasPrefix(a, "-") {
				t.Errorf("%s\n\thadar-slurmd takes no argument %q", c, a)
				continue
			}
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if name == "h" || name == "help" {
				continue
			}
			f := fs.Lookup(name)
			if f == nil {
				t.Errorf("%s\n\thadar-slurmd has no flag %s", c, a)
				continue
			}
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !(ok && b.IsBoolFlag()) && !hasValue {
				i++
			}
		}
		// And the whole line parses (values included).
		if err := newFlagSet(&options{}, io.Discard).Parse(args); err != nil && err != flag.ErrHelp {
			t.Errorf("%s\n\t%v", c, err)
		}
	}
}
