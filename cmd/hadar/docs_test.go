package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/internal/doccheck"
)

// Every `hadar ...` command line in docs/*.md and the README names
// commands and flags that exist, where they exist.
func TestDocsCommandsExist(t *testing.T) {
	files, err := doccheck.DocFiles("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := doccheck.Commands(files, "hadar")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 20 {
		t.Fatalf("only %d hadar commands found in %v", len(cmds), files)
	}
	app := newApp()
	for _, c := range cmds {
		if err := checkArgs(app, c.Args[1:]); err != nil {
			t.Errorf("%s\n\t%v", c, err)
		}
	}
}

// checkArgs follows args down the command tree as hadar parses them:
// subcommands until the first positional argument, and every flag defined
// on the command it is given to, before or after its arguments (runApp's
// permuteArgs).
func checkArgs(app *cli.App, args []string) error {
	flags := app.Flags
	cmds := app.Commands
	path := "hadar"
	var cur *cli.Command
	positional := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if name == "help" || name == "h" || cur == nil && (name == "version" || name == "v") {
				continue
			}
			f := findFlag(flags, name)
			if f == nil {
				return fmt.Errorf("%s has no flag %s", path, a)
			}
			if dg, ok := f.(cli.DocGenerationFlag); ok && dg.TakesValue() && !hasValue {
				if i+1 >= len(args) {
					return fmt.Errorf("%s: flag %s needs a value", path, a)
				}
				i++
			}
			continue
		}
		if !positional {
			if sub := findCommand(cmds, a); sub != nil {
				cur, flags, cmds = sub, sub.Flags, sub.Subcommands
				path += " " + sub.Name
				continue
			}
			if len(cmds) > 0 {
				return fmt.Errorf("%s has no command %q", path, a)
			}
			positional = true
		}
	}
	return nil
}

func TestCheckArgs(t *testing.T) {
	app := newApp()
	for args, ok := range map[string]bool{
		"profiles alias set a b":         true,
		"profiles list --gpu-type v100":  true,
		"profiles list --nope":           false,
		"profiles frobnicate":            false,
		"config check -q":                true,
		"config check FILE --quiet":      true, // after a positional
		"config check FILE --nope":       false,
		"history --since 24h --plot dir": true,
		"history --since":                false,
		"--version":                      true,
		"simulate --json --help":         true,
		"nope":                           false,
	} {
		if err := checkArgs(app, strings.Fields(args)); (err == nil) != ok {
			t.Errorf("%q: %v", args, err)
		}
	}
}
