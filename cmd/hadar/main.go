// Command hadar is the command-line interface of hadar, the
// heterogeneity-aware GPU scheduler for Slurm: simulate policies over traces,
// generate traces, manage the heterogeneity matrix, benchmark the optimizer.
package main

import (
	"os"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newApp() *cli.App {
	app := &cli.App{
		Name:    "hadar",
		Usage:   "heterogeneity-aware GPU scheduling for Slurm clusters",
		Version: version,
		Description: "hadar places deep-learning jobs on the GPU types where they run fastest for the\n" +
			"cluster as a whole. `hadar simulate` runs its policies over traces; hadar-slurmd\n" +
			"applies them to a live Slurm cluster.",
		Commands: []*cli.Command{
			simulateCommand(),
			benchCommand(),
			traceCommand(),
			profilesCommand(),
			policiesCommand(),
			statusCommand(),
			planCommand(),
			explainCommand(),
			reportCommand(),
			configCommand(),
			historyCommand(),
		},
		EnableBashCompletion: true,
	}
	strictUsage(app)
	return app
}

func main() {
	os.Exit(runApp(newApp(), os.Args, os.Stderr))
}
