package sim

import (
	"errors"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
)

// plotDir is where the tests write their PNGs: a temporary directory, or
// $HADAR_PLOT_DIR to look at them.
func plotDir(t *testing.T) string {
	if d := os.Getenv("HADAR_PLOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// checkPNG asserts that path holds a decodable PNG of the expected size.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if want := int(math.Round(float64(plotWidth/vg.Inch) * plotDPI)); cfg.Width != want || cfg.Height == 0 {
		t.Errorf("%s: %dx%d, want width %d", path, cfg.Width, cfg.Height, want)
	}
	if st, err := f.Stat(); err != nil || st.Size() < 1000 {
		t.Errorf("%s: suspiciously small (%v, %v)", path, st, err)
	}
}

// fakeJCTs spreads n JCTs log-uniformly from lo to hi hours.
func fakeJCTs(n int, lo, hi float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = lo * math.Pow(hi/lo, float64((i*37)%n)/float64(n-1))
	}
	return out
}

func TestPlotJCTCDF(t *testing.T) {
	dir := plotDir(t)
	tests := map[string]map[string][]float64{
		"jct_cdf_log.png": {
			"hadar":                 fakeJCTs(96, 0.05, 40),
			"max_min_fairness_perf": fakeJCTs(96, 0.08, 60),
			"max_min_fairness":      fakeJCTs(96, 0.1, 90),
			"yarn":                  fakeJCTs(96, 0.3, 150),
			"crashed":               nil,
		},
		"jct_cdf_linear.png": {"a": {1, 2, 3, 4}, "b": {2, 2, 5}},
	}
	for name, data := range tests {
		path := filepath.Join(dir, name)
		if err := PlotJCTCDF(path, data); err != nil {
			t.Fatal(err)
		}
		checkPNG(t, path)
	}
}

func TestPlotUtilization(t *testing.T) {
	series := map[string][]UtilPoint{}
	for k, name := range []string{"hadar", "gavel", "yarn"} {
		var pts []UtilPoint
		for i := 0; i < 150; i++ {
			h := float64(i) * 0.1 * float64(k+2) / 2
			u := 0.9 - 0.2*float64(k) + 0.1*math.Sin(float64(i)/7)
			pts = append(pts, UtilPoint{Hours: h, Utilization: math.Max(0, math.Min(1, u))})
		}
		series[name] = pts
	}
	// Unsorted input is fine.
	series["gavel"][0], series["gavel"][5] = series["gavel"][5], series["gavel"][0]
	path := filepath.Join(plotDir(t), "utilization.png")
	if err := PlotUtilization(path, series); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)
}

func TestPlotMetricBars(t *testing.T) {
	policies := []string{"max_min_fairness_perf", "hadar", "hadare", "max_min_fairness", "yarn"}
	metrics := []string{"makespan (h)", "avg JCT (h)", "p99 JCT (h)", "utilization", "queue (h)"}
	values := map[string]map[string]float64{}
	for i, p := range policies {
		f := 1 + 0.15*float64(i)
		values[p] = map[string]float64{
			"makespan (h)": 45.84 * f, "avg JCT (h)": 18.41 * f, "p99 JCT (h)": 120 * f,
			"utilization": 0.88 / f, "queue (h)": 0,
		}
	}
	values["hadar"]["queue (h)"] = 2.5
	path := filepath.Join(plotDir(t), "metrics.png")
	if err := PlotMetricBars(path, policies, metrics, values); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)

	svg := filepath.Join(t.TempDir(), "metrics.svg")
	if err := PlotMetricBars(svg, policies[:2], metrics[:1], values); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("svg output: %v", err)
	}
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	out := func(name string) string { return filepath.Join(dir, name) }
	ok := map[string]map[string]float64{"a": {"m": 1}, "b": {"m": 2}}
	tests := []struct {
		name    string
		err     error
		noData  bool
		file    string
		wantMsg string
	}{
		{"cdf nil", PlotJCTCDF(out("1.png"), nil), true, "1.png", ""},
		{"cdf only empty series", PlotJCTCDF(out("2.png"), map[string][]float64{"a": {}}), true, "2.png", ""},
		{"cdf NaN", PlotJCTCDF(out("3.png"), map[string][]float64{"a": {1, math.NaN()}}), false, "3.png", "not finite"},
		{"util nil", PlotUtilization(out("4.png"), nil), true, "4.png", ""},
		{"util inf", PlotUtilization(out("5.png"), map[string][]UtilPoint{"a": {{Hours: math.Inf(1)}}}), false, "5.png", "not finite"},
		{"bars no policies", PlotMetricBars(out("6.png"), nil, []string{"m"}, ok), true, "6.png", ""},
		{"bars no metrics", PlotMetricBars(out("7.png"), []string{"a"}, nil, ok), true, "7.png", ""},
		{"bars missing value", PlotMetricBars(out("8.png"), []string{"a", "c"}, []string{"m"}, ok), false, "8.png", `policy "c", metric "m"`},
		{"bars duplicate", PlotMetricBars(out("9.png"), []string{"a", "a"}, []string{"m"}, ok), false, "9.png", "twice"},
		{"no path", PlotMetricBars("", []string{"a"}, []string{"m"}, ok), false, "", "no output path"},
		{"bad dir", PlotMetricBars(out("nodir/x.png"), []string{"a"}, []string{"m"}, ok), false, "nodir/x.png", "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error")
			}
			if tc.noData != errors.Is(tc.err, ErrNoPlotData) {
				t.Errorf("error %v: errors.Is(ErrNoPlotData) = %v, want %v", tc.err, !tc.noData, tc.noData)
			}
			if !strings.Contains(tc.err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", tc.err, tc.wantMsg)
			}
			if tc.file != "" {
				if _, err := os.Stat(out(tc.file)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s exists after a failed plot", tc.file)
				}
			}
		})
	}
}

func TestPolicyStylesDeterministic(t *testing.T) {
	a := newPolicyStyles([]string{"yarn", "hadar", "gavel"})
	b := newPolicyStyles([]string{"gavel", "yarn", "hadar"})
	for _, n := range []string{"gavel", "hadar", "yarn"} {
		if a.color(n) != b.color(n) {
			t.Errorf("%s: color depends on input order", n)
		}
	}
	if a.color("gavel") == a.color("hadar") {
		t.Error("two policies share a color")
	}
	many := make([]string, 12)
	for i := range many {
		many[i] = string(rune('a' + i))
	}
	s := newPolicyStyles(many)
	if s.line("a").Color != s.line("k").Color || s.line("k").Dashes == nil {
		t.Error("the 11th policy should reuse the first color with a dash pattern")
	}
}
