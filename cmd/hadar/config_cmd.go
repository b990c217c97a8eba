package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/profiles"
)

// configFlag is hadar-slurmd's config file, found as the daemon finds it.
func configFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "config",
		EnvVars: []string{"HADAR_CONFIG"},
		Value:   config.DefaultPath,
		Usage:   "hadar-slurmd's config `FILE`",
	}
}

// configPath returns the config file to read and whether it was named
// (argument, --config or $HADAR_CONFIG): a named file must exist, the
// default one may be missing (hadar-slurmd then runs on the defaults).
func configPath(c *cli.Context, arg string) (string, bool) {
	if arg != "" {
		return arg, true
	}
	for _, cc := range c.Lineage() {
		for _, name := range cc.LocalFlagNames() {
			if p := cc.String("config"); name == "config" && p != "" {
				return p, true
			}
		}
	}
	return config.DefaultPath, false
}

// loadDaemonConfig reads hadar-slurmd's config the way the daemon does.
func loadDaemonConfig(c *cli.Context, arg string) (config.Config, string, bool, error) {
	path, named := configPath(c, arg)
	cfg, found, err := config.LoadOrDefault(path, !named)
	return cfg, path, found, err
}

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "check hadar-slurmd's configuration file",
		Description: "hadar-slurmd reads /etc/hadar/hadar.toml, or the file named by --config or\n" +
			"$HADAR_CONFIG (see hadar.toml(5) and the commented example\n" +
			"/etc/hadar/hadar.toml.example).",
		Flags: []cli.Flag{configFlag()},
		Subcommands: []*cli.Command{
			{
				Name:      "check",
				Usage:     "validate a config file and print the configuration in effect (every key, defaults included)",
				ArgsUsage: "[FILE]",
				Description: "Reads FILE (default: --config, $HADAR_CONFIG or /etc/hadar/hadar.toml) as\n" +
					"hadar-slurmd does: strictly, so an unknown key, a value of the wrong type, a\n" +
					"duration without a unit or an unknown policy is an error naming the key and\n" +
					"the line, and the exit status is 1. Otherwise it prints the effective\n" +
					"configuration as TOML (a file hadar-slurmd accepts). Without FILE, a missing\n" +
					"/etc/hadar/hadar.toml is not an error: the daemon runs on the defaults, which\n" +
					"are printed. Run it before `systemctl reload hadar-slurmd`.",
				Flags: []cli.Flag{
					configFlag(),
					&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing when the file is valid"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() > 1 {
						return usageErrorf(c, "want at most one FILE, got %d arguments", c.NArg())
					}
					cfg, path, found, err := loadDaemonConfig(c, c.Args().First())
					if err != nil {
						return err
					}
					if c.Bool("quiet") {
						return nil
					}
					w := c.App.Writer
					if found {
						fmt.Fprintf(w, "# %s is valid. The configuration in effect:\n", path)
					} else {
						fmt.Fprintf(w, "# %s does not exist: hadar-slurmd runs on the defaults:\n", path)
					}
					if os.Geteuid() != 0 && cfg.DataDir != profiles.SystemDir {
						fmt.Fprintf(w, "# (data_dir's default depends on the user; as root it is /var/lib/hadar.)\n")
					}
					_, err = w.Write(config.Format(cfg))
					return err
				},
			},
		},
	}
}
