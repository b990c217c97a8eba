package sim

import (
	"errors"
	"fmt"
	"image/color"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// UtilPoint is one point of a GPU-utilization time series: from Hours on
// (until the next point) the cluster's utilization was Utilization, in [0, 1].
type UtilPoint struct{ Hours, Utilization float64 }

// ErrNoPlotData is returned by the Plot functions when there is nothing to
// draw.
var ErrNoPlotData = errors.New("nothing to plot")

// Figure size and resolution of the PNGs.
const (
	plotWidth  = 7 * vg.Inch
	plotHeight = 4.5 * vg.Inch
	plotDPI    = 150
)

// policyPalette is a qualitative palette (Tableau 10) that stays readable
// printed in grey; policies beyond ten also get a dash pattern.
var policyPalette = []color.Color{
	color.RGBA{31, 119, 180, 255},  // blue
	color.RGBA{255, 127, 14, 255},  // orange
	color.RGBA{44, 160, 44, 255},   // green
	color.RGBA{214, 39, 40, 255},   // red
	color.RGBA{148, 103, 189, 255}, // purple
	color.RGBA{140, 86, 75, 255},   // brown
	color.RGBA{227, 119, 194, 255}, // pink
	color.RGBA{127, 127, 127, 255}, // grey
	color.RGBA{188, 189, 34, 255},  // olive
	color.RGBA{23, 190, 207, 255},  // cyan
}

var policyDashes = [][]vg.Length{
	nil,
	{vg.Points(6), vg.Points(3)},
	{vg.Points(2), vg.Points(2)},
	{vg.Points(6), vg.Points(2), vg.Points(2), vg.Points(2)},
}

// policyStyles gives each policy a color (and, past the palette, a dash
// pattern) by its rank among the sorted names, so the same set of policies
// is drawn alike in every plot.
type policyStyles map[string]int

func newPolicyStyles(names []string) policyStyles {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	s := policyStyles{}
	for _, n := range sorted {
		if _, ok := s[n]; !ok {
			s[n] = len(s)
		}
	}
	return s
}

func (s policyStyles) color(name string) color.Color {
	return policyPalette[s[name]%len(policyPalette)]
}

func (s policyStyles) line(name string) draw.LineStyle {
	i := s[name]
	return draw.LineStyle{
		Color:  s.color(name),
		Width:  vg.Points(1.5),
		Dashes: policyDashes[(i/len(policyPalette))%len(policyDashes)],
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// PlotJCTCDF draws the empirical CDF of job completion times (in hours), one
// line per policy, to path (PNG for .png, else any format gonum/plot's
// Save knows by extension: .svg, .pdf, ...). The x axis is logarithmic when
// the JCTs span more than two decades. A policy with no JCTs appears in the
// legend as "(no data)"; no JCTs at all is ErrNoPlotData.
func PlotJCTCDF(path string, jctHoursByPolicy map[string][]float64) error {
	names := slices.Sorted(maps.Keys(jctHoursByPolicy))
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for _, name := range names {
		for _, v := range jctHoursByPolicy[name] {
			if !finite(v) {
				return fmt.Errorf("plot JCT CDF: policy %q: JCT %v is not finite", name, v)
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("plot JCT CDF: %w: no JCTs", ErrNoPlotData)
	}
	styles := newPolicyStyles(names)
	p := plot.New()
	p.Title.Text = "Job completion time CDF"
	p.X.Label.Text = "JCT (hours)"
	p.Y.Label.Text = "fraction of jobs completed"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Y.Tick.Marker = niceTicks{}
	if lo > 0 && hi/lo > 100 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Label.Text = "JCT (hours, log scale)"
	} else {
		p.X.Tick.Marker = niceTicks{}
		p.X.Min, p.X.Max = math.Min(0, lo), hi+0.03*(hi-math.Min(0, lo))
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	for _, name := range names {
		jcts := append([]float64(nil), jctHoursByPolicy[name]...)
		if len(jcts) == 0 {
			p.Legend.Add(name + " (no data)")
			continue
		}
		sort.Float64s(jcts)
		// A step up by 1/n at each JCT, starting from 0.
		xys := make(plotter.XYs, 0, len(jcts)+1)
		xys = append(xys, plotter.XY{X: jcts[0], Y: 0})
		for i, v := range jcts {
			xys = append(xys, plotter.XY{X: v, Y: float64(i+1) / float64(len(jcts))})
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot JCT CDF: %w", err)
		}
		l.StepStyle = plotter.PostStep
		l.LineStyle = styles.line(name)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", name, len(jcts)), l)
	}
	if err := savePlot(p, path); err != nil {
		return fmt.Errorf("plot JCT CDF: %w", err)
	}
	return nil
}

// PlotUtilization draws GPU utilization over time, one step line per policy,
// to path. Points are sorted by time; each holds until the next.
func PlotUtilization(path string, series map[string][]UtilPoint) error {
	names := slices.Sorted(maps.Keys(series))
	n, yMax := 0, 1.0
	for _, name := range names {
		for _, pt := range series[name] {
			if !finite(pt.Hours) || !finite(pt.Utilization) {
				return fmt.Errorf("plot utilization: policy %q: point %+v is not finite", name, pt)
			}
			yMax = math.Max(yMax, pt.Utilization)
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("plot utilization: %w: no points", ErrNoPlotData)
	}
	styles := newPolicyStyles(names)
	p := plot.New()
	p.Title.Text = "GPU utilization over time"
	p.X.Label.Text = "time (hours)"
	p.Y.Label.Text = "fraction of GPUs busy"
	p.Add(plotter.NewGrid())
	// Head-room above the curves for the legend; no ticks past yMax.
	p.Y.Min, p.Y.Max = 0, yMax*(1.05+0.07*float64(len(names)))
	p.Y.Tick.Marker = niceTicks{limit: yMax}
	p.X.Tick.Marker = niceTicks{}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	for _, name := range names {
		pts := append([]UtilPoint(nil), series[name]...)
		if len(pts) == 0 {
			p.Legend.Add(name + " (no data)")
			continue
		}
		sort.SliceStable(pts, func(a, b int) bool { return pts[a].Hours < pts[b].Hours })
		xys := make(plotter.XYs, len(pts))
		mean := 0.0
		for i, pt := range pts {
			xys[i] = plotter.XY{X: pt.Hours, Y: pt.Utilization}
			if i+1 < len(pts) {
				mean += pt.Utilization * (pts[i+1].Hours - pt.Hours)
			}
		}
		label := name
		if span := pts[len(pts)-1].Hours - pts[0].Hours; span > 0 {
			label = fmt.Sprintf("%s (mean %.2f)", name, mean/span)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot utilization: %w", err)
		}
		l.StepStyle = plotter.PostStep
		l.LineStyle = styles.line(name)
		p.Add(l)
		p.Legend.Add(label, l)
	}
	if err := savePlot(p, path); err != nil {
		return fmt.Errorf("plot utilization: %w", err)
	}
	return nil
}

// PlotMetricBars draws a grouped bar chart to path: one group per metric
// (in the order given, e.g. "makespan (h)", "avg JCT (h)", "utilization"),
// one bar per policy (in the order given), every value divided by the first
// policy's value for that metric, so the first policy's bars are all 1 and
// the metrics share one axis; each bar is labelled with its absolute value. A metric whose first value is 0 is
// divided by its largest absolute value instead, and says so.
// values[policy][metric] must be given for every pair.
func PlotMetricBars(path string, policies []string, metrics []string, values map[string]map[string]float64) error {
	if len(policies) == 0 || len(metrics) == 0 {
		return fmt.Errorf("plot metric bars: %w: %d policies, %d metrics", ErrNoPlotData, len(policies), len(metrics))
	}
	for _, list := range [][]string{policies, metrics} {
		seen := map[string]bool{}
		for _, s := range list {
			if seen[s] {
				return fmt.Errorf("plot metric bars: %q given twice", s)
			}
			seen[s] = true
		}
	}
	for _, pol := range policies {
		for _, m := range metrics {
			v, ok := values[pol][m]
			if !ok {
				return fmt.Errorf("plot metric bars: no value for policy %q, metric %q", pol, m)
			}
			if !finite(v) {
				return fmt.Errorf("plot metric bars: policy %q, metric %q: %v is not finite", pol, m, v)
			}
		}
	}
	base := policies[0]
	norm := make([]float64, len(metrics))
	ticks := make([]string, len(metrics))
	for k, m := range metrics {
		norm[k] = values[base][m]
		ticks[k] = m
		if norm[k] == 0 {
			for _, pol := range policies {
				norm[k] = math.Max(norm[k], math.Abs(values[pol][m]))
			}
			ticks[k] = m + "\n(largest = 1)"
			if norm[k] == 0 {
				norm[k] = 1
				ticks[k] = m + "\n(all 0)"
			}
		}
	}

	styles := newPolicyStyles(policies)
	p := plot.New()
	p.Title.Text = "Metrics by policy"
	p.Y.Label.Text = fmt.Sprintf("relative to %s (= 1)", base)
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	p.NominalX(ticks...)
	p.Y.Padding = 0
	p.X.Min, p.X.Max = -0.5, float64(len(metrics))-0.5
	p.Y.Tick.Marker = niceTicks{}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(10)

	// Bars fill 80% of each group's width; the data area is roughly the
	// figure less the y axis.
	group := (plotWidth - vg.Inch) / vg.Length(len(metrics)) * 0.8
	width := group / vg.Length(len(policies))
	yMin, yMax := 0.0, 1.0
	for i, pol := range policies {
		vals := make(plotter.Values, len(metrics))
		labels := make([]string, len(metrics))
		xys := make(plotter.XYs, len(metrics))
		for k, m := range metrics {
			vals[k] = values[pol][m] / norm[k]
			labels[k] = formatBarValue(values[pol][m])
			xys[k] = plotter.XY{X: float64(k), Y: math.Max(vals[k], 0)}
			yMin, yMax = math.Min(yMin, vals[k]), math.Max(yMax, vals[k])
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return fmt.Errorf("plot metric bars: %w", err)
		}
		bars.Color = styles.color(pol)
		bars.LineStyle.Width = 0
		bars.Offset = width * (vg.Length(i) - vg.Length(len(policies)-1)/2)
		p.Add(bars)
		p.Legend.Add(pol, bars)

		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return fmt.Errorf("plot metric bars: %w", err)
		}
		for j := range lbl.TextStyle {
			lbl.TextStyle[j].Font.Size = vg.Points(7)
			lbl.TextStyle[j].XAlign = draw.XCenter
		}
		lbl.Offset = vg.Point{X: bars.Offset, Y: vg.Points(2)}
		p.Add(lbl)
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.LineStyle = draw.LineStyle{Color: color.Gray{Y: 90}, Width: vg.Points(0.75), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	p.Add(one)
	// Head-room for the value labels and the legend.
	p.Y.Min, p.Y.Max = yMin*1.1, yMax*(1.15+0.08*float64(len(policies)))
	if err := savePlot(p, path); err != nil {
		return fmt.Errorf("plot metric bars: %w", err)
	}
	return nil
}

// niceTicks labels round values (steps of 1, 2 or 5 x 10^k, at most nine
// labels) with a minor tick between labels; a positive limit drops labels
// above it (utilization stops at 1 even when the axis leaves room for the
// legend).
type niceTicks struct{ limit float64 }

func (n niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || !finite(lo) || !finite(hi) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	top := hi
	if n.limit > 0 && n.limit < hi {
		top = n.limit
	}
	span := top - lo
	if span <= 0 {
		span = hi - lo
	}
	base := math.Pow(10, math.Floor(math.Log10(span/8)))
	step := 10 * base
	for _, m := range []float64{1, 2, 5} {
		if span/(m*base) <= 8 {
			step = m * base
			break
		}
	}
	prec := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	var ticks []plot.Tick
	for i := math.Ceil(lo/step - 1e-9); ; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		if v > top+step*1e-9 {
			break
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', prec, 64)})
		if mid := v + step/2; mid <= hi {
			ticks = append(ticks, plot.Tick{Value: mid})
		}
	}
	return ticks
}

func formatBarValue(v float64) string {
	if v != 0 && (math.Abs(v) >= 1e5 || math.Abs(v) < 1e-3) {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// savePlot writes p to path: PNG at plotDPI for ".png", else gonum/plot's
// format for the extension. A failed write leaves no file behind.
func savePlot(p *plot.Plot, path string) (err error) {
	if path == "" {
		return errors.New("no output path")
	}
	if strings.ToLower(filepath.Ext(path)) != ".png" {
		if err := p.Save(plotWidth, plotHeight, path); err != nil {
			os.Remove(path)
			return err
		}
		return nil
	}
	c := vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	p.Draw(draw.New(c))
	return WritePNG(path, c)
}

// WritePNG writes a drawn canvas to path as PNG; a failed write leaves no
// file behind.
func WritePNG(path string, c *vgimg.Canvas) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	_, err = vgimg.PngCanvas{Canvas: c}.WriteTo(f)
	return err
}
