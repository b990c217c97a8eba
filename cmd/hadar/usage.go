package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// Exit statuses, as hadar(1) documents them: usage errors exit 2, as
// Slurm's tools and urfave/cli's conventions do, everything else 1.
const (
	exitRuntime = 1
	exitUsage   = 2
)

// usageError is a mistake in how a command was called (unknown command or
// flag, missing flag, wrong number of arguments, conflicting or
// out-of-range flag values): reported in one line, naming --help, exit 2.
type usageError struct {
	// command is the command path ("hadar profiles set").
	command string
	msg     string
}

func (e *usageError) Error() string { return e.command + ": " + e.msg }

// usageErrorf is a usageError of c's command.
func usageErrorf(c *cli.Context, format string, args ...any) error {
	return &usageError{command: commandPath(c), msg: fmt.Sprintf(format, args...)}
}

// commandPath is "hadar simulate", "hadar profiles set", ...
func commandPath(c *cli.Context) string {
	if c == nil {
		return "hadar"
	}
	if c.Command != nil && c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	if c.App != nil && c.App.HelpName != "" {
		return c.App.HelpName
	}
	return "hadar"
}

// runApp runs app on args (args[0] is the program name) and returns the
// exit status, printing an error on stderr: a usage error in two short
// lines (the problem, then where the usage is), any other in one.
func runApp(app *cli.App, args []string, stderr io.Writer) int {
	err := app.Run(permuteArgs(app, args))
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s\nRun '%s --help' for usage.\n", err, ue.command)
		return exitUsage
	}
	// `hadar help NAME` of an unknown NAME: urfave/cli's "No help topic",
	// exit 3.
	var ec cli.ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() == 3 {
		fmt.Fprintf(stderr, "hadar: %s\nRun 'hadar --help' for usage.\n", err)
		return exitUsage
	}
	fmt.Fprintln(stderr, "hadar:", err)
	return exitRuntime
}

// strictUsage makes every command of app report usage errors as
// usageError rather than urfave/cli's "Incorrect Usage" followed by the
// whole help on stdout or "No help topic" with exit 3: an unknown command
// or flag, a missing required flag, and positional arguments given to a
// command that takes none (one with no ArgsUsage).
func strictUsage(app *cli.App) {
	app.OnUsageError = onUsageError
	app.ExitErrHandler = func(*cli.Context, error) {} // runApp picks the status
	app.Action = parentAction
	for _, cmd := range app.Commands {
		strictCommand(cmd)
	}
}

func strictCommand(cmd *cli.Command) {
	cmd.OnUsageError = onUsageError
	if len(cmd.Subcommands) > 0 {
		if cmd.Action == nil {
			cmd.Action = parentAction
		}
		for _, sub := range cmd.Subcommands {
			strictCommand(sub)
		}
		return
	}
	required := takeRequired(cmd.Flags)
	takesArgs := strings.TrimSpace(cmd.ArgsUsage) != ""
	action := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		for _, name := range required {
			if !c.IsSet(name) {
				return usageErrorf(c, "missing --%s", name)
			}
		}
		if !takesArgs && c.NArg() > 0 {
			return usageErrorf(c, "unexpected argument %q (it takes flags only)", c.Args().First())
		}
		if action == nil {
			return nil
		}
		return action(c)
	}
}

// takeRequired clears Required on flags and returns their names: urfave/cli
// prints the command's whole help before a missing required flag's error,
// so the command's action checks them instead.
func takeRequired(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			if f.Required {
				f.Required = false
				names = append(names, f.Name)
			}
		case *cli.Float64Flag:
			if f.Required {
				f.Required = false
				names = append(names, f.Name)
			}
		case *cli.IntFlag:
			if f.Required {
				f.Required = false
				names = append(names, f.Name)
			}
		case *cli.DurationFlag:
			if f.Required {
				f.Required = false
				names = append(names, f.Name)
			}
		}
	}
	return names
}

// parentAction runs for hadar or a command with subcommands when no
// subcommand matched: help when there are no arguments, a usage error for
// an unknown subcommand.
func parentAction(c *cli.Context) error {
	if c.NArg() == 0 {
		if c.Command == nil || c.Command.Name == "" {
			return cli.ShowAppHelp(c)
		}
		return cli.ShowSubcommandHelp(c)
	}
	var names []string
	subs := c.App.Commands
	if c.Command != nil && len(c.Command.Subcommands) > 0 {
		subs = c.Command.Subcommands
	}
	for _, s := range subs {
		if !s.Hidden && s.Name != "help" {
			names = append(names, s.Name)
		}
	}
	return usageErrorf(c, "unknown command %q (commands: %s)", c.Args().First(), strings.Join(names, ", "))
}

func onUsageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		dashes := "--"
		if len(name) == 1 {
			dashes = "-"
		}
		msg = "unknown flag " + dashes + name
	}
	return &usageError{command: commandPath(c), msg: msg}
}

// permuteArgs moves the flags given after positional arguments of the
// command args name to before them, so `hadar trace show t.trace
// --throughputs lambda` parses as written (urfave/cli stops parsing flags
// at the first argument). "--" ends the flags; everything after it stays an
// argument.
func permuteArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	flags, cmds := app.Flags, app.Commands
	var leaf *cli.Command
	i := 1
	for i < len(args) {
		a := args[i]
		if a == "--" {
			break
		}
		if isFlagArg(a) {
			out = append(out, a)
			if flagTakesValue(flags, a) && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			i++
			continue
		}
		cmd := findCommand(cmds, a)
		if cmd == nil {
			break
		}
		out = append(out, a)
		i++
		leaf, flags, cmds = cmd, cmd.Flags, cmd.Subcommands
		if len(cmds) == 0 {
			break
		}
	}
	if leaf == nil || len(leaf.Subcommands) > 0 {
		return append(out, args[i:]...)
	}
	var positional []string
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i:]...)
			break
		}
		if !isFlagArg(a) {
			positional = append(positional, a)
			continue
		}
		out = append(out, a)
		if flagTakesValue(flags, a) && i+1 < len(args) {
			out = append(out, args[i+1])
			i++
		}
	}
	return append(out, positional...)
}

func isFlagArg(a string) bool { return len(a) > 1 && a[0] == '-' }

// flagTakesValue reports whether a ("--name" or "-n", without "=") is a
// flag of flags that takes the next argument as its value.
func flagTakesValue(flags []cli.Flag, a string) bool {
	name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
	if hasValue {
		return false
	}
	f := findFlag(flags, name)
	if f == nil {
		return false
	}
	dg, ok := f.(cli.DocGenerationFlag)
	return ok && dg.TakesValue()
}

// findFlag is the flag of flags called name (or one of its aliases).
func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// findCommand is the command of cmds called name (or one of its aliases).
func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}
