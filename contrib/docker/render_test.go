// Package docker holds the static tests of the container test cluster
// (there is no Go code here; the cluster itself is exercised by make
// e2e-containers: e2e/containers and docs/docker.md). They need no Docker
// engine: both clusters are rendered from the same templates for both
// Slurm versions and agree on every node and GPU, the compose file's nodes
// are the layout's, and the scripts parse (and pass shellcheck where it is
// installed). `docker-compose config` runs where Compose is installed.
package docker

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testcluster = "../testcluster"

// slurmVersions are the Slurm versions the cluster is rendered for:
// Debian 12's and Debian 13's.
var slurmVersions = []string{"22.05", "24.11"}

// render renders a layout for a Slurm version; cgroupConf is "" when no
// cgroup.conf was written.
func render(t *testing.T, layout, mode, version string) (slurmConf, gresConf, cgroupConf string) {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(testcluster, "render"), "--layout", layout, "--mode", mode,
		"--dir", "/var/lib/hadar-cluster", "--out", out, "--slurm-version", version)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("render --layout %s --mode %s --slurm-version %s: %v\n%s", layout, mode, version, err, b)
	}
	if c, err := os.ReadFile(filepath.Join(out, "cgroup.conf")); err == nil {
		cgroupConf = string(c)
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s, err := os.ReadFile(filepath.Join(out, "slurm.conf"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(filepath.Join(out, "gres.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return string(s), string(g), cgroupConf
}

// hostWords are the words of a NodeName line that say where the node
// runs, which is what the modes differ in.
var hostWords = regexp.MustCompile(`^(NodeHostname|NodeAddr|Port)=`)

// normalize drops what legitimately differs between the modes: where the
// nodes and slurmctld run.
func normalize(slurmConf string) []string {
	var out []string
	for _, l := range strings.Split(slurmConf, "\n") {
		switch {
		case strings.HasPrefix(l, "SlurmctldHost="):
			continue
		case strings.HasPrefix(l, "NodeName="):
			var keep []string
			for _, w := range strings.Fields(l) {
				if !hostWords.MatchString(w) {
					keep = append(keep, w)
				}
			}
			l = strings.Join(keep, " ")
		}
		out = append(out, l)
	}
	return out
}

func layouts(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testcluster, "layouts", "*.layout"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no layouts: %v", err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".layout"))
	}
	return names
}

// layoutNodes reads a layout: node -> "type count ..." words.
func layoutNodes(t *testing.T, name string) (order []string, gpus map[string][]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testcluster, "layouts", name+".layout"))
	if err != nil {
		t.Fatal(err)
	}
	gpus = map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		l, _, _ = strings.Cut(l, "#")
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		order = append(order, f[0])
		gpus[f[0]] = f[1:]
	}
	return order, gpus
}

// The native (local) and docker renders of every layout agree on
// everything but where the daemons run: nodes, CPUs, GRES, features,
// partition, gres.conf, every other setting.
func TestRenderModesAgree(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, version := range slurmVersions {
		for _, layout := range layouts(t) {
			t.Run(version+"/"+layout, func(t *testing.T) { checkModesAgree(t, layout, version) })
		}
	}
}

func checkModesAgree(t *testing.T, layout, version string) {
	t.Helper()
	localConf, localGres, localCgroup := render(t, layout, "local", version)
	dockerConf, dockerGres, dockerCgroup := render(t, layout, "docker", version)
	// Slurm 24+ needs CgroupPlugin=disabled (slurmd fails without a
	// usable cgroup plugin); 22.05 rejects that value: no file.
	for mode, cg := range map[string]string{"local": localCgroup, "docker": dockerCgroup} {
		if wantCg := version >= "24"; wantCg != regexp.MustCompile(`(?m)^CgroupPlugin=disabled$`).MatchString(cg) || !wantCg && cg != "" {
			t.Errorf("%s mode, Slurm %s: cgroup.conf %q; want CgroupPlugin=disabled exactly for 24+", mode, version, cg)
		}
	}
	if !strings.Contains(localConf, "rendered for "+version) {
		t.Errorf("slurm.conf does not name Slurm %s", version)
	}
	if diff := cmp.Diff(normalize(localConf), normalize(dockerConf)); diff != "" {
		t.Errorf("slurm.conf differs beyond host placement (-local +docker):\n%s", diff)
	}
	if localGres != dockerGres {
		t.Errorf("gres.conf differs:\n%s\n---\n%s", localGres, dockerGres)
	}
	// Every node of the layout, with its GPUs, is in both.
	order, gpus := layoutNodes(t, layout)
	for _, conf := range []string{localConf, dockerConf} {
		var names []string
		for _, l := range strings.Split(conf, "\n") {
			if !strings.HasPrefix(l, "NodeName=") {
				continue
			}
			name := strings.TrimPrefix(strings.Fields(l)[0], "NodeName=")
			names = append(names, name)
			var want []string
			g := gpus[name]
			for i := 0; i+1 < len(g); i += 2 {
				want = append(want, "gpu:"+g[i]+":"+g[i+1])
			}
			if len(want) > 0 && !strings.Contains(l, " Gres="+strings.Join(want, ",")+" ") {
				t.Errorf("%s: node line %q lacks Gres=%s", layout, l, strings.Join(want, ","))
			}
		}
		if !cmp.Equal(names, order) {
			t.Errorf("%s: nodes %v, layout %v", layout, names, order)
		}
	}
	// In docker mode each node is the host of its own name.
	for _, l := range strings.Split(dockerConf, "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[0], "NodeName=") && f[1] != "NodeHostname="+strings.TrimPrefix(f[0], "NodeName=") {
			t.Errorf("docker node line %q", l)
		}
	}
	if !strings.Contains(dockerConf, "\nSlurmctldHost=slurmctld(slurmctld)\n") {
		t.Error("docker mode: slurmctld is not the host slurmctld (the compose service)")
	}
}

// composeServices reads the services of compose.yaml: name -> key -> value
// (the subset of YAML this file uses: two-space indents, scalars, flow
// lists, merge keys of anchors).
func composeServices(t *testing.T) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]string{}
	services := map[string]map[string]string{}
	var cur map[string]string // the anchor or service being read
	section, keyIndent := "", 0
	for _, raw := range strings.Split(string(b), "\n") {
		l := strings.TrimRight(raw, " ")
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		key, val, _ := strings.Cut(strings.TrimSpace(l), ":")
		val = strings.TrimSpace(val)
		switch {
		case indent == 0:
			section, cur = key, nil
			if m := regexp.MustCompile(`^&(\S+)$`).FindStringSubmatch(val); m != nil {
				cur, keyIndent = map[string]string{}, 2
				anchors[m[1]] = cur
			}
		case section == "services" && indent == 2:
			cur, keyIndent = map[string]string{}, 4
			services[key] = cur
		case cur == nil || indent != keyIndent:
			// nested values (lists, maps) are not needed
		case key == "<<":
			for k, v := range anchors[strings.TrimPrefix(val, "*")] {
				if _, set := cur[k]; !set {
					cur[k] = v
				}
			}
		default:
			cur[key] = val
		}
	}
	return services
}

// The compose file runs slurmctld, one slurmd per node of the layout it
// names (hostnames = node names, as render --mode docker expects), and
// hadar-slurmd, all from the one image.
func TestComposeMatchesLayout(t *testing.T) {
	svc := composeServices(t)
	env, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\n\s+HADAR_CLUSTER_LAYOUT: (\S+)\n`).FindSubmatch(env)
	if m == nil {
		t.Fatal("compose.yaml sets no HADAR_CLUSTER_LAYOUT")
	}
	order, _ := layoutNodes(t, string(m[1]))
	var nodes []string
	for name, s := range svc {
		if s["image"] != "hadar-slurm:trixie" {
			t.Errorf("service %s: image %q", name, s["image"])
		}
		switch s["command"] {
		case `["slurmd"]`:
			if s["hostname"] != name {
				t.Errorf("node service %s has hostname %q", name, s["hostname"])
			}
			nodes = append(nodes, s["hostname"])
		case `["slurmctld"]`:
			if name != "slurmctld" || s["hostname"] != "slurmctld" {
				t.Errorf("slurmctld service %s, hostname %q", name, s["hostname"])
			}
		case `["hadar-slurmd"]`, `["client"]`:
			if !strings.Contains(s["depends_on"], "slurmctld") {
				t.Errorf("service %s depends on %q", name, s["depends_on"])
			}
		default:
			t.Errorf("service %s runs %q", name, s["command"])
		}
	}
	sort.Strings(nodes)
	want := append([]string(nil), order...)
	sort.Strings(want)
	if !cmp.Equal(nodes, want) {
		t.Errorf("compose node services %v, layout %s has %v", nodes, m[1], want)
	}
	if len(svc) != len(order)+3 {
		t.Errorf("%d services: %v", len(svc), svc)
	}

	// Validate with Compose where it is installed (docker-compose here).
	if dc, err := exec.LookPath("docker-compose"); err == nil {
		if out, err := exec.Command(dc, "-f", "compose.yaml", "config", "-q").CombinedOutput(); err != nil {
			t.Errorf("docker-compose config: %v\n%s", err, out)
		}
	} else {
		t.Log("docker-compose not installed: compose.yaml not validated by it")
	}
}

// Every container renders with the native cluster's script and templates;
// the scripts parse (and pass shellcheck where installed).
func TestScriptsUseTheTemplates(t *testing.T) {
	ep, err := os.ReadFile("entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ep), `"$repo/contrib/testcluster/render" --mode docker`) {
		t.Error("entrypoint.sh does not render with contrib/testcluster/render --mode docker")
	}
	for _, script := range []string{"entrypoint.sh", "cluster", "image", "../ci/e2e-containers"} {
		if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", script, err, out)
		}
		if sc, err := exec.LookPath("shellcheck"); err == nil {
			if out, err := exec.Command(sc, script).CombinedOutput(); err != nil {
				t.Errorf("shellcheck %s: %v\n%s", script, err, out)
			}
		}
	}
	// What the hadar container runs with must be a valid config: the
	// example with the metrics endpoint opened.
	ex, err := os.ReadFile("../hadar.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^listen = "127\.0\.0\.1:9788"$`).Match(ex) {
		t.Error(`contrib/hadar.toml has no line listen = "127.0.0.1:9788" for entrypoint.sh's sed to open`)
	}
}

// renderFiles renders a layout with extra render arguments and returns
// every file written, by name, and each file's mode.
func renderFiles(t *testing.T, layout, mode, version string, args ...string) (map[string]string, map[string]os.FileMode) {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(testcluster, "render"), append([]string{"--layout", layout, "--mode", mode,
		"--dir", "/var/lib/hadar-cluster", "--out", out, "--slurm-version", version}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("render --layout %s --mode %s --slurm-version %s %v: %v\n%s", layout, mode, version, args, err, b)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	files, modes := map[string]string{}, map[string]os.FileMode{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()], modes[e.Name()] = string(b), info.Mode().Perm()
	}
	return files, modes
}

// setting is the value of KEY= in a rendered file ("" when absent).
func setting(conf, key string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `=(.*)$`).FindStringSubmatch(conf)
	if m == nil {
		return ""
	}
	return m[1]
}

// The cluster with accounting renders in docker mode too (contrib/docker/
// cluster up --accounting): the same slurm.conf as the host kit's but for
// where slurmdbd runs (the host slurmdbd, not 127.0.0.1), slurmdbd.conf
// naming the hosts slurmdbd and mariadb, MariaDB listening on the
// container's network; the host kit's files keep 127.0.0.1. The bare
// cluster has neither file nor slurmdbd.
func TestRenderAccountingModes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	type where struct{ storageHost, dbdHost, dbdAddr, storage, bind string }
	want := map[string]where{
		"local":  {"127.0.0.1", "localhost", "127.0.0.1", "127.0.0.1", "127.0.0.1"},
		"docker": {"slurmdbd", "slurmdbd", "slurmdbd", "mariadb", "0.0.0.0"},
	}
	for _, version := range slurmVersions {
		t.Run(version, func(t *testing.T) {
			confs := map[string]string{}
			for mode, w := range want {
				files, modes := renderFiles(t, "demo", mode, version, "--accounting")
				conf, dbd, cnf := files["slurm.conf"], files["slurmdbd.conf"], files["mariadb.cnf"]
				confs[mode] = conf
				got := where{setting(conf, "AccountingStorageHost"), setting(dbd, "DbdHost"), setting(dbd, "DbdAddr"),
					setting(dbd, "StorageHost"), setting(cnf, "bind-address")}
				if got != w {
					t.Errorf("%s mode: AccountingStorageHost, DbdHost, DbdAddr, StorageHost, bind-address = %+v, want %+v", mode, got, w)
				}
				if setting(conf, "AccountingStorageType") != "accounting_storage/slurmdbd" || setting(conf, "PriorityType") != "priority/multifactor" {
					t.Errorf("%s mode: slurm.conf is not the accounting one:\n%s", mode, conf)
				}
				if setting(conf, "AccountingStoragePort") != setting(dbd, "DbdPort") || setting(dbd, "StoragePort") != setting(cnf, "port") {
					t.Errorf("%s mode: ports disagree: slurm.conf %s, slurmdbd.conf %s/%s, mariadb.cnf %s", mode,
						setting(conf, "AccountingStoragePort"), setting(dbd, "DbdPort"), setting(dbd, "StoragePort"), setting(cnf, "port"))
				}
				if modes["slurmdbd.conf"] != 0o600 {
					t.Errorf("%s mode: slurmdbd.conf mode %v, want 0600 (it holds the password)", mode, modes["slurmdbd.conf"])
				}
			}
			drop := func(conf string) []string {
				var keep []string
				for _, l := range normalize(conf) {
					if !strings.HasPrefix(l, "AccountingStorageHost=") {
						keep = append(keep, l)
					}
				}
				return keep
			}
			if diff := cmp.Diff(drop(confs["local"]), drop(confs["docker"])); diff != "" {
				t.Errorf("accounting slurm.conf differs beyond where the daemons run (-local +docker):\n%s", diff)
			}
			bare, _ := renderFiles(t, "demo", "docker", version)
			for _, f := range []string{"slurmdbd.conf", "mariadb.cnf"} {
				if _, ok := bare[f]; ok {
					t.Errorf("bare docker render wrote %s", f)
				}
			}
			if got := setting(bare["slurm.conf"], "AccountingStorageType"); got != "accounting_storage/none" {
				t.Errorf("bare docker render: AccountingStorageType=%s", got)
			}
		})
	}
}
