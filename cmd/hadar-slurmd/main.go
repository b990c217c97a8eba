// Command hadar-slurmd is the hadar daemon that runs beside slurmctld.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "hadar-slurmd: the Slurm bridge is not built yet")
	os.Exit(1)
}
