package e2eutil

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

// TestCluster is a test cluster (contrib/testcluster) that a suite starts
// for itself, in a state directory and on a slurmctld port of its own so
// that it runs beside the clusters of other suites and people.
type TestCluster struct {
	Repo   string // the repository, whose contrib/testcluster runs it
	Dir    string // state directory (HADAR_CLUSTER_DIR)
	Port   string // slurmctld's port (HADAR_CLUSTER_PORT)
	Layout string // layout name (HADAR_CLUSTER_LAYOUT)
}

func (c TestCluster) env() []string {
	return []string{"HADAR_CLUSTER_DIR=" + c.Dir, "HADAR_CLUSTER_PORT=" + c.Port, "HADAR_CLUSTER_LAYOUT=" + c.Layout}
}

func (c TestCluster) script(name string) string {
	return filepath.Join(c.Repo, "contrib", "testcluster", name)
}

// Up starts the cluster (up only prints its environment when it already
// runs) and returns its slurm.conf and what up logged on stderr.
func (c TestCluster) Up(timeout time.Duration) (conf, log string, err error) {
	r := Run(timeout, c.env(), c.script("up"))
	if r.Err != nil {
		return "", r.Stderr, fmt.Errorf("test cluster up: %w", r.Err)
	}
	conf, err = ParseUpOutput(r.Stdout)
	if err != nil {
		return "", r.Stderr, err
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return "", r.Stderr, fmt.Errorf("test cluster up: %w", err)
	}
	if conf != filepath.Join(dir, "slurm.conf") {
		return "", r.Stderr, fmt.Errorf("test cluster up in %s printed the cluster of %s", c.Dir, conf)
	}
	return conf, r.Stderr, nil
}

// Down stops the cluster.
func (c TestCluster) Down(timeout time.Duration) error {
	if r := Run(timeout, c.env(), c.script("down")); r.Err != nil {
		return fmt.Errorf("test cluster down: %w", r.Err)
	}
	return nil
}

// ParseUpOutput reads the slurm.conf of the cluster from what
// contrib/testcluster/up prints on stdout: "export SLURM_CONF=PATH".
func ParseUpOutput(stdout string) (string, error) {
	for _, line := range strings.Split(stdout, "\n") {
		if conf, ok := strings.CutPrefix(strings.TrimSpace(line), "export SLURM_CONF="); ok && conf != "" {
			return conf, nil
		}
	}
	return "", fmt.Errorf("test cluster up printed no SLURM_CONF: %q", stdout)
}

// Layout is a test cluster's layout (contrib/testcluster/layouts): its
// nodes in order and each node's GPUs by type (none for a CPU-only node).
type Layout struct {
	Nodes []string
	GPUs  map[string]map[string]int
}

// ReadLayout reads the copy of its layout that a running test cluster
// keeps in its state directory.
func ReadLayout(clusterDir string) (Layout, error) {
	b, err := os.ReadFile(filepath.Join(clusterDir, "layout"))
	if err != nil {
		return Layout{}, fmt.Errorf("test cluster layout: %w", err)
	}
	return ParseLayout(string(b))
}

// ParseLayout reads a layout: a node a line, "NODE [TYPE COUNT]...", and
// '#' starts a comment (slurmsim.ParseLayout, the one parser of layouts).
func ParseLayout(text string) (Layout, error) {
	nodes, err := slurmsim.ParseLayout(strings.NewReader(text), "layout")
	if err != nil {
		return Layout{}, err
	}
	l := Layout{GPUs: map[string]map[string]int{}}
	for _, n := range nodes {
		l.Nodes = append(l.Nodes, n.Name)
		l.GPUs[n.Name] = map[string]int{}
		for _, g := range n.GPUs {
			l.GPUs[n.Name][g.Type] += g.Count
		}
	}
	return l, nil
}

// CheckLayout returns an error unless the running test cluster in
// clusterDir is of the repository's layout name ("demo", "site").
func CheckLayout(repo, clusterDir, name string) error {
	want, err := os.ReadFile(filepath.Join(repo, "contrib", "testcluster", "layouts", name+".layout"))
	if err != nil {
		return fmt.Errorf("layout %s: %w", name, err)
	}
	have, err := os.ReadFile(filepath.Join(clusterDir, "layout"))
	if err != nil {
		return fmt.Errorf("the cluster in %s is not of the %s layout: %w", clusterDir, name, err)
	}
	if !bytes.Equal(want, have) {
		return fmt.Errorf("the cluster in %s is not of the %s layout", clusterDir, name)
	}
	return nil
}
