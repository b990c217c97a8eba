package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"image/color"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/hadar-sched/hadar/sim"
)

// The PNGs of `hadar history --plot`.
const (
	historyWidth = 8 * vg.Inch
	historyDPI   = 120
)

var historyPalette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255}, color.RGBA{188, 189, 34, 255}, color.RGBA{23, 190, 207, 255},
}

var othersColor = color.RGBA{170, 170, 170, 255}

// errNoHistory is returned when there is nothing to draw.
var errNoHistory = errors.New("nothing recorded in this period")

// plot writes the three PNGs into dir and returns those it wrote.
func (h *history) plot(dir string) ([]string, error) {
	if !h.hasHistory {
		return nil, fmt.Errorf("--plot: %s has no GPU or job history (written by an older hadar-slurmd)", h.path)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--plot: %w", err)
	}
	var files, empty []string
	for _, p := range []struct {
		name string
		draw func(string) error
	}{
		{"utilization.png", h.plotUtilization},
		{"queue.png", h.plotQueue},
		{"placement.png", h.plotPlacement},
	} {
		path := filepath.Join(dir, p.name)
		err := p.draw(path)
		switch {
		case errors.Is(err, errNoHistory):
			empty = append(empty, p.name)
		case err != nil:
			return files, fmt.Errorf("--plot: %s: %w", p.name, err)
		default:
			files = append(files, path)
		}
	}
	if len(empty) > 0 {
		return files, fmt.Errorf("--plot: %v: %w", empty, errNoHistory)
	}
	return files, nil
}

// timeAxis sets p's x axis to local clock times, from the first record
// (or the start of the period) to the end of the period.
func (h *history) timeAxis(p *plot.Plot) {
	p.X.Tick.Marker = clockTicks{}
	p.X.Min, p.X.Max = unix(h.start()), unix(h.to)
	p.X.Label.Text = "time (" + h.to.Local().Format("MST") + ")"
}

// start is when the period's records begin.
func (h *history) start() time.Time {
	first := h.to
	for _, g := range h.gpus {
		if g.At.Before(first) {
			first = g.At
		}
	}
	for _, q := range h.queue {
		if q.At.Before(first) {
			first = q.At
		}
	}
	for _, s := range h.spans {
		if s.Started.Before(first) {
			first = s.Started
		}
	}
	if first.Before(h.from) || !first.Before(h.to) {
		return h.from
	}
	return first
}

// clockTicks labels round local clock times (every 1, 2, 5, 10, 15, 30
// minutes, 1, 2, 3, 6, 12 hours or days), at most eight.
type clockTicks struct{}

func (clockTicks) Ticks(lo, hi float64) []plot.Tick {
	span := time.Duration((hi - lo) * float64(time.Second))
	step := 7 * 24 * time.Hour
	for _, s := range []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
		30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour} {
		if span/s <= 8 {
			step = s
			break
		}
	}
	format := "15:04"
	switch {
	case step >= 24*time.Hour:
		format = "Jan 2"
	case span > 20*time.Hour:
		format = "Jan 2 15:04"
	}
	from := time.Unix(0, int64(lo*1e9)).Local()
	var t time.Time
	if step >= 24*time.Hour {
		t = time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.Local)
	} else {
		_, off := from.Zone()
		shift := time.Duration(off) * time.Second
		t = from.Add(shift).Truncate(step).Add(-shift)
	}
	var ticks []plot.Tick
	for ; unix(t) <= hi; t = t.Add(step) {
		if unix(t) >= lo {
			ticks = append(ticks, plot.Tick{Value: unix(t), Label: t.Format(format)})
		}
		if mid := t.Add(step / 2); unix(mid) >= lo && unix(mid) <= hi {
			ticks = append(ticks, plot.Tick{Value: unix(mid)})
		}
	}
	return ticks
}

// countTicks labels whole numbers (steps of 1, 2 or 5 x 10^k).
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
	for k := 1.0; ; k *= 10 {
		if hi/k <= 6 {
			step = k
			break
		}
		if hi/(2*k) <= 6 {
			step = 2 * k
			break
		}
		if hi/(5*k) <= 6 {
			step = 5 * k
			break
		}
	}
	var ticks []plot.Tick
	for v := 0.0; v <= hi; v += step {
		if v >= lo {
			ticks = append(ticks, plot.Tick{Value: v, Label: fmt.Sprint(v)})
		}
	}
	return ticks
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func (h *history) plotUtilization(path string) error {
	by := map[string]plotter.XYs{}
	byHadar := map[string]plotter.XYs{}
	for _, g := range h.gpus {
		if g.Total == 0 {
			continue
		}
		x := unix(g.At)
		by[g.Type] = append(by[g.Type], plotter.XY{X: x, Y: 100 * float64(g.Used) / float64(g.Total)})
		byHadar[g.Type] = append(byHadar[g.Type], plotter.XY{X: x, Y: 100 * float64(g.Hadar) / float64(g.Total)})
	}
	if len(by) == 0 {
		return errNoHistory
	}
	p := plot.New()
	p.Title.Text = "GPU utilization by type"
	p.Y.Label.Text = "% of the type's GPUs allocated"
	p.Y.Min, p.Y.Max = 0, 100+12*float64(len(by))
	p.Y.Tick.Marker = plot.ConstantTicks(percentTicks())
	h.timeAxis(p)
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	for i, t := range slices.Sorted(maps.Keys(by)) {
		clr := historyPalette[i%len(historyPalette)]
		for _, s := range []struct {
			xys    plotter.XYs
			label  string
			dashes []vg.Length
		}{
			{by[t], t + ": all jobs", nil},
			{byHadar[t], t + ": hadar jobs", []vg.Length{vg.Points(4), vg.Points(3)}},
		} {
			l, err := plotter.NewLine(s.xys)
			if err != nil {
				return err
			}
			l.StepStyle = plotter.PostStep
			l.LineStyle = draw.LineStyle{Color: clr, Width: vg.Points(1.5), Dashes: s.dashes}
			p.Add(l)
			p.Legend.Add(s.label, l)
		}
	}
	return saveHistoryPlot(path, 4.5*vg.Inch, p)
}

func percentTicks() []plot.Tick {
	var ticks []plot.Tick
	for v := 0; v <= 100; v += 10 {
		label := ""
		if v%20 == 0 {
			label = fmt.Sprint(v)
		}
		ticks = append(ticks, plot.Tick{Value: float64(v), Label: label})
	}
	return ticks
}

// plotQueue draws two panels: pending jobs over time, and each job's
// queueing delay at the time it started.
func (h *history) plotQueue(path string) error {
	if len(h.queue) == 0 && len(h.spans) == 0 {
		return errNoHistory
	}
	top := plot.New()
	top.Title.Text = "Queue"
	top.Y.Label.Text = "pending jobs"
	h.timeAxis(top)
	top.X.Label.Text = ""
	top.Add(plotter.NewGrid())
	top.Legend.Top, top.Legend.Left = true, true
	top.Legend.TextStyle.Font.Size = vg.Points(9)
	var tagged, others plotter.XYs
	maxPending := 1.0
	for _, q := range h.queue {
		tagged = append(tagged, plotter.XY{X: unix(q.At), Y: float64(q.PendingTagged)})
		others = append(others, plotter.XY{X: unix(q.At), Y: float64(q.PendingOther)})
		maxPending = max(maxPending, float64(q.PendingTagged), float64(q.PendingOther))
	}
	top.Y.Min, top.Y.Max = 0, maxPending*1.3
	top.Y.Tick.Marker = countTicks{}
	for _, s := range []struct {
		xys   plotter.XYs
		label string
		clr   color.Color
	}{{tagged, "hadar jobs (held, waiting for a placement)", historyPalette[0]}, {others, "other jobs", othersColor}} {
		if len(s.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return err
		}
		l.StepStyle = plotter.PostStep
		l.LineStyle = draw.LineStyle{Color: s.clr, Width: vg.Points(1.5)}
		top.Add(l)
		top.Legend.Add(s.label, l)
	}

	bottom := plot.New()
	bottom.Y.Label.Text = "queueing delay (minutes)"
	h.timeAxis(bottom)
	bottom.Add(plotter.NewGrid())
	bottom.Legend.Top, bottom.Legend.Left = true, true
	bottom.Legend.TextStyle.Font.Size = vg.Points(9)
	var dTagged, dOthers plotter.XYs
	maxDelay := 1.0
	for _, s := range h.spans {
		if !s.First || s.Submitted.IsZero() || s.Started.Before(h.from) {
			continue
		}
		d := max(0, s.Started.Sub(s.Submitted).Minutes())
		maxDelay = max(maxDelay, d)
		pt := plotter.XY{X: unix(s.Started), Y: d}
		if s.Tagged {
			dTagged = append(dTagged, pt)
		} else {
			dOthers = append(dOthers, pt)
		}
	}
	bottom.Y.Min, bottom.Y.Max = 0, maxDelay*1.3
	for _, s := range []struct {
		xys   plotter.XYs
		label string
		clr   color.Color
		shape draw.GlyphDrawer
	}{{dTagged, "hadar jobs, at their start", historyPalette[0], draw.CircleGlyph{}}, {dOthers, "other jobs", othersColor, draw.RingGlyph{}}} {
		if len(s.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xys)
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: s.clr, Radius: vg.Points(2.5), Shape: s.shape}
		bottom.Add(sc)
		bottom.Legend.Add(s.label, sc)
	}

	height := 6 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(historyWidth, height), vgimg.UseDPI(historyDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	return sim.WritePNG(path, img)
}

// ganttBars draws one bar per job span and node: from the span's start to
// its last sighting, at the node's row.
type ganttBars struct {
	bars       []ganttBar
	xmin, xmax float64
	rows       int
	label      draw.TextStyle
}

type ganttBar struct {
	row    int
	x0, x1 float64
	clr    color.Color
	text   string
	// lane of lanes: jobs that overlap in time on one node share its row
	// side by side, each in a lane of its own, rather than hide each other.
	lane, lanes int
}

func (g *ganttBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, b := range g.bars {
		x0, x1 := trX(b.x0), trX(b.x1)
		if x1-x0 < vg.Points(1) {
			x1 = x0 + vg.Points(1)
		}
		lanes := max(b.lanes, 1)
		h := 0.76 / float64(lanes)
		lo := float64(b.row) - 0.38 + float64(lanes-1-b.lane)*h
		y0, y1 := trY(lo), trY(lo+h)
		pts := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		c.FillPolygon(b.clr, c.ClipPolygonXY(pts))
		c.StrokeLines(draw.LineStyle{Color: color.White, Width: vg.Points(0.5)}, c.ClipLinesXY(append(pts, pts[0]))...)
		if b.text != "" && x1-x0 >= g.label.Width(b.text)+vg.Points(4) && c.ContainsX(x0) {
			c.FillText(g.label, vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}, b.text)
		}
	}
}

func (g *ganttBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	return g.xmin, g.xmax, -0.5, float64(g.rows) - 0.5
}

// plotPlacement draws a Gantt chart of the job spans by node: hadar jobs
// in colors (one per job), other jobs in grey.
func (h *history) plotPlacement(path string) error {
	nodeSet := map[string]bool{}
	for _, s := range h.spans {
		for _, n := range s.Nodes {
			nodeSet[n] = true
		}
	}
	if len(nodeSet) == 0 {
		return errNoHistory
	}
	nodes := slices.Sorted(maps.Keys(nodeSet))
	row := map[string]int{}
	var ticks []plot.Tick
	// The first node at the top.
	for i, n := range nodes {
		row[n] = len(nodes) - 1 - i
		ticks = append(ticks, plot.Tick{Value: float64(row[n]), Label: n})
	}
	p := plot.New()
	p.Title.Text = "Jobs by node (hadar jobs in color, others grey)"
	h.timeAxis(p)
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Label.Text = "node"
	p.Add(plotter.NewGrid())
	label := p.X.Tick.Label
	label.Font.Size = vg.Points(7)
	label.Color = color.White
	label.XAlign, label.YAlign = draw.XCenter, draw.YCenter
	g := &ganttBars{xmin: unix(h.start()), xmax: unix(h.to), rows: len(nodes), label: label}
	spans := append([]bridgeSpan(nil), toSpans(h)...)
	sort.SliceStable(spans, func(a, b int) bool { return spans[a].x0 < spans[b].x0 })
	g.bars = ganttLayout(spans, row)
	p.Add(g)
	height := vg.Length(1.2)*vg.Inch + vg.Length(len(nodes))*0.28*vg.Inch
	height = max(height, 3*vg.Inch)
	return saveHistoryPlot(path, height, p)
}

// ganttLayout is one bar per span and node (spans sorted by start), at
// the node's row; spans that overlap in time on a node get lanes of their
// own within its row, each the first lane free at the span's start.
func ganttLayout(spans []bridgeSpan, row map[string]int) []ganttBar {
	var bars []ganttBar
	laneEnds := map[string][]float64{}
	nodeOf := make([]string, 0, len(spans))
	for _, s := range spans {
		clr := color.Color(othersColor)
		text := ""
		if s.tagged {
			clr = historyPalette[jobColor(s.id)]
			text = s.id
		}
		for _, n := range s.nodes {
			ends := laneEnds[n]
			lane := len(ends)
			for i, e := range ends {
				if e <= s.x0 {
					lane = i
					break
				}
			}
			if lane == len(ends) {
				ends = append(ends, 0)
			}
			ends[lane] = s.x1
			laneEnds[n] = ends
			bars = append(bars, ganttBar{row: row[n], x0: s.x0, x1: s.x1, clr: clr, text: text, lane: lane})
			nodeOf = append(nodeOf, n)
		}
	}
	for i := range bars {
		bars[i].lanes = len(laneEnds[nodeOf[i]])
	}
	return bars
}

type bridgeSpan struct {
	id     string
	tagged bool
	nodes  []string
	x0, x1 float64
}

// toSpans clips the spans to the period; a span's end is its last
// sighting (the job ran until some time before the next round).
func toSpans(h *history) []bridgeSpan {
	var out []bridgeSpan
	for _, s := range h.spans {
		start := s.Started
		if start.Before(h.from) {
			start = h.from
		}
		if start.After(s.LastSeen) {
			continue
		}
		out = append(out, bridgeSpan{id: s.JobID, tagged: s.Tagged, nodes: s.Nodes, x0: unix(start), x1: unix(s.LastSeen)})
	}
	return out
}

func jobColor(id string) int {
	f := fnv.New32a()
	f.Write([]byte(id))
	return int(f.Sum32() % uint32(len(historyPalette)))
}

func saveHistoryPlot(path string, height vg.Length, p *plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(historyWidth, height), vgimg.UseDPI(historyDPI), vgimg.UseBackgroundColor(color.White))
	p.Draw(draw.New(img))
	return sim.WritePNG(path, img)
}
