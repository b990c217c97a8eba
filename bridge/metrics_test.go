package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/slurm"
)

// scrape fetches /metrics and returns the samples ("name{labels}" ->
// value), the HELP and TYPE of each family.
func scrape(t *testing.T, m *Metrics) (samples map[string]float64, help, typ map[string]string) {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	samples, help, typ = map[string]float64{}, map[string]string{}, map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			f := strings.SplitN(strings.TrimPrefix(line, "# HELP "), " ", 2)
			help[f[0]] = f[1]
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(strings.TrimPrefix(line, "# TYPE "))
			typ[f[0]] = f[1]
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Fatalf("bad sample line %q", line)
			}
			samples[line[:i]] = v
		}
	}
	return samples, help, typ
}

// After a workload, the endpoint shows every metric the admin guide lists,
// with the labels it documents and non-zero values where work was done.
func TestMetricsAfterRounds(t *testing.T) {
	h := newHarness(t, nil)
	m := NewMetrics()
	b, err := New(h.cfg, Deps{Cluster: h.fc, Store: h.store, Clock: h.clock, Metrics: m,
		LookupUID: func(string) (int, error) { return os.Getuid(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.awaitInterval = time.Millisecond
	ctx := context.Background()
	var tagged []string
	for i := range 3 {
		tagged = append(tagged, h.fc.submit(resnet, 1+i%2, 1, t0))
	}
	h.fc.submit("", 2, 1, t0)                 // untagged: others' work
	h.fc.submit("hadar copies=999", 1, 1, t0) // bad tag: passed through
	if _, err := b.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	// Two progress reports on an unchanged placement: a learned sample.
	if err := jobproto.WriteProgress(h.cfg.SpoolDir, tagged[0], 100, t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(time.Minute)
	if _, err := b.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := jobproto.WriteProgress(h.cfg.SpoolDir, tagged[0], 400, t0.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(time.Minute)
	if _, err := b.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	// slurmctld down: a failed round, a Slurm error by class.
	h.fc.mu.Lock()
	h.fc.fail["Jobs"] = slurm.ErrControllerDown
	h.fc.mu.Unlock()
	if _, err := b.Cycle(ctx); err == nil {
		t.Fatal("round with slurmctld down succeeded")
	}

	s, help, typ := scrape(t, m)
	want := map[string]float64{
		`hadar_rounds_total{result="ok"}`:                              3,
		`hadar_rounds_total{result="error"}`:                           1,
		`hadar_round_duration_seconds_count{phase="observe"}`:          3,
		`hadar_round_duration_seconds_count{phase="solve"}`:            3,
		`hadar_round_duration_seconds_count{phase="enforce"}`:          3,
		`hadar_jobs{class="running"}`:                                  3,
		`hadar_jobs{class="untagged"}`:                                 1,
		`hadar_jobs{class="waiting"}`:                                  0,
		`hadar_jobs{class="pass-through"}`:                             1,
		`hadar_gpus{state="hadar",type="v100"}`:                        4,
		`hadar_gpus{state="others",type="v100"}`:                       3, // the untagged job (2) and the passed-through one
		`hadar_gpus{state="free",type="v100"}`:                         1,
		`hadar_gpus{state="free",type="p100"}`:                         4,
		`hadar_gpus{state="free",type="k80"}`:                          8,
		`hadar_slurm_actions_total{kind="place",result="ok"}`:          3,
		`hadar_slurm_actions_total{kind="start-now",result="ok"}`:      2, // placed jobs, then the passed-through one
		`hadar_slurm_actions_total{kind="await-start",result="ok"}`:    1,
		`hadar_slurm_actions_total{kind="comment",result="ok"}`:        1, // the pass-through's (placed jobs get theirs in the start-now update)
		`hadar_slurm_errors_total{class="controller_down"}`:            1,
		`hadar_throughput_samples_total`:                               1,
		`hadar_round_duration_seconds_bucket{phase="solve",le="+Inf"}`: 3,
		`hadar_round_duration_seconds_sum{phase="observe"}`:            -1, // present, any value
		`process_start_time_seconds`:                                   -1,
		`go_goroutines`:                                                -1,
	}
	var names []string
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		got, ok := s[k]
		switch {
		case !ok:
			t.Errorf("missing %s", k)
		case want[k] >= 0 && got != want[k]:
			t.Errorf("%s = %v, want %v", k, got, want[k])
		}
	}
	if t.Failed() {
		var all []string
		for k, v := range s {
			if strings.HasPrefix(k, "hadar_") && !strings.Contains(k, "_bucket") {
				all = append(all, k+" "+strconv.FormatFloat(v, 'g', -1, 64))
			}
		}
		sort.Strings(all)
		t.Logf("hadar samples:\n%s", strings.Join(all, "\n"))
	}

	// Conventions: hadar_ prefix, snake case, counters end in _total,
	// durations in _seconds, every family has help.
	name := regexp.MustCompile(`^hadar_[a-z][a-z0-9_]*$`)
	families := 0
	for fam, kind := range typ {
		if !strings.HasPrefix(fam, "hadar_") {
			continue
		}
		families++
		if !name.MatchString(fam) {
			t.Errorf("metric name %q", fam)
		}
		if help[fam] == "" {
			t.Errorf("%s has no help", fam)
		}
		switch kind {
		case "counter":
			if !strings.HasSuffix(fam, "_total") {
				t.Errorf("counter %s does not end in _total", fam)
			}
		case "histogram":
			if !strings.HasSuffix(fam, "_seconds") {
				t.Errorf("histogram %s is not in _seconds", fam)
			}
		default:
			if strings.HasSuffix(fam, "_total") {
				t.Errorf("%s %s ends in _total", kind, fam)
			}
		}
	}
	if families < 7 {
		t.Errorf("%d hadar metric families: %v", families, typ)
	}
}

// Each decision is one log line with the job, where it was, where it goes
// and why, in both log formats.
func TestDecisionLogLines(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			h := newHarness(t, nil)
			var buf bytes.Buffer
			var handler slog.Handler = slog.NewTextHandler(&buf, nil)
			if format == "json" {
				handler = slog.NewJSONHandler(&buf, nil)
			}
			b, err := New(h.cfg, Deps{Cluster: h.fc, Store: h.store, Clock: h.clock, Logger: slog.New(handler),
				LookupUID: func(string) (int, error) { return os.Getuid(), nil }})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ids := map[string]bool{}
			for i := range 3 {
				ids[h.fc.submit(resnet, 1+i%2, 1, t0)] = true
			}
			ids[h.fc.submit("hadar model=no-such-model", 1, 1, t0)] = true
			rep, err := b.Cycle(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			logged := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				f := logFields(t, format, line)
				if f["msg"] != "decision" {
					continue
				}
				for _, k := range []string{"job", "decision", "from", "to", "reason", "round"} {
					if f[k] == "" {
						t.Errorf("decision line without %s: %s", k, line)
					}
				}
				logged[f["job"]+" "+f["decision"]] = true
			}
			for _, d := range rep.Decisions {
				if !logged[d.JobID+" "+string(d.Kind)] {
					t.Errorf("decision %+v not logged:\n%s", d, buf.String())
				}
			}
			if len(logged) != len(ids) {
				t.Errorf("%d decision lines for %d jobs:\n%s", len(logged), len(ids), buf.String())
			}
		})
	}
}

// logFields reads one slog line (JSON or text) into a flat map.
func logFields(t *testing.T, format, line string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if format == "json" {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object: %q: %v", line, err)
		}
		for k, v := range m {
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	// key=value or key="quoted value"
	re := regexp.MustCompile(`([a-z_]+)=("(?:[^"\\]|\\.)*"|\S*)`)
	for _, m := range re.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		out[m[1]] = v
	}
	return out
}

// TestMetricsSeriesFromStartAndBlockedGPUs: error series exist at 0 before
// any error; idle GPUs of a node whose CPUs are all taken are "blocked",
// not "free".
func TestMetricsSeriesFromStartAndBlockedGPUs(t *testing.T) {
	m := NewMetrics()
	s, _, _ := scrape(t, m)
	for _, k := range []string{`hadar_slurm_errors_total{class="timeout"}`, `hadar_slurm_errors_total{class="controller_down"}`, `hadar_rounds_total{result="error"}`} {
		if v, ok := s[k]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0 before any round", k, v, ok)
		}
	}
	h := newHarness(t, nil)
	h.fc.mu.Lock()
	for _, n := range h.fc.nodes {
		n.cpus = 8
	}
	h.fc.mu.Unlock()
	id := h.fc.submit("", 1, 1, t0) // untagged: Slurm starts it
	h.fc.mu.Lock()
	h.fc.jobs[id].cpus = 8
	node := h.fc.jobs[id].nodes
	h.fc.mu.Unlock()
	if len(node) != 1 {
		t.Fatalf("untagged job runs on %v", node)
	}
	b := h.bridge()
	b.deps.Metrics = m
	h.cycle(b)
	s, _, _ = scrape(t, m)
	nt := ""
	for _, n := range h.fc.nodes {
		if n.name == node[0] {
			nt = n.gtype
		}
	}
	if got := s[`hadar_gpus{state="blocked",type="`+nt+`"}`]; got != 3 {
		t.Errorf("blocked %s GPUs = %v, want 3 (node %s has all its CPUs taken)", nt, got, node[0])
	}
}
