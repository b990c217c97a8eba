package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/optimizer"
)

func policiesCommand() *cli.Command {
	return &cli.Command{
		Name:  "policies",
		Usage: "list the scheduling policies",
		Action: func(c *cli.Context) error {
			for _, n := range optimizer.Names() {
				fmt.Fprintf(c.App.Writer, "%-15s %s\n", n, optimizer.Summary(n))
			}
			return nil
		},
	}
}
