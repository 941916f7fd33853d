package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// plot draws one row as an SVG: ns/op against callers on the left, p99
// against callers on the right, a line per side in its own colour, and a
// legend naming every side. Callers go on a log scale. Times go on a
// linear scale from zero, or on a log scale when the panel's values span
// more than a decade, so a fast side does not lie flat on zero.
func plot(r result) string {
	const (
		width, panelW = 900, 360
		panelH        = 240
		bottom        = 50
		left          = 70
		gap           = 70
	)
	var callers []int
	for _, lv := range r.levels {
		callers = append(callers, lv.callers)
	}
	var names []string
	for _, s := range r.row.sides {
		names = append(names, s.name)
	}
	colours := plotColours(names)
	colour := func(name string, _ int) string { return colours[name] }
	var legend strings.Builder
	ly := svgLegend(&legend, names, colour, left, 44, width-20)
	top := ly + 40
	height := top + panelH + bottom

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(r.row.suite+" "+r.row.name))
	b.WriteString(legend.String())

	lo, hi := math.Log2(float64(callers[0])), math.Log2(float64(callers[len(callers)-1]))
	if hi == lo {
		hi = lo + 1
	}
	for p, metric := range []struct {
		title string
		value func(*measured) float64
	}{{"ns/op", ns}, {"p99 of one call", p99}} {
		x0 := float64(left + p*(panelW+gap))
		vlo, vhi := math.Inf(1), math.Inf(-1)
		for _, lv := range r.levels {
			for i := range lv.sides {
				if v := metric.value(&lv.sides[i]); v > 0 {
					vlo, vhi = min(vlo, v), max(vhi, v)
				}
			}
		}
		if !(vlo <= vhi) {
			vlo, vhi = 1, 10
		}
		title := metric.title
		yAt, ticks := linearAxis(0, vhi, float64(top), panelH)
		if vhi/vlo > 10 {
			yAt, ticks = logAxis(vlo, vhi, float64(top), panelH)
			title += " (log scale)"
			if len(ticks) > 12 { // 2 and 5 would crowd the labels: decades only
				ticks = slices.DeleteFunc(ticks, func(v float64) bool {
					d := math.Log10(v)
					return math.Abs(d-math.Round(d)) > 1e-9
				})
			}
		}
		xAt := func(c int) float64 { return x0 + (math.Log2(float64(c))-lo)/(hi-lo)*panelW }

		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-weight="bold">%s</text>`+"\n", x0, top-10, title)
		for _, v := range ticks {
			y := yAt(v)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y, x0+panelW, y)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", x0-6, y+4, tick(v))
		}
		for _, c := range callers {
			x := xAt(c)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x, top, x, top+panelH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%d</text>`+"\n", x, top+panelH+16, c)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">callers</text>`+"\n", x0+panelW/2, top+panelH+34)
		for _, s := range r.row.sides {
			var pts []string
			for _, lv := range r.levels {
				if m := sideOf(lv, s.name); m != nil && metric.value(m) > 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(lv.callers), yAt(metric.value(m))))
				}
			}
			widthPx := 2
			if s.ours {
				widthPx = 3
			}
			fmt.Fprintf(&b, `<polyline data-side="%s" fill="none" stroke="%s" stroke-width="%d" points="%s"/>`+"\n",
				html.EscapeString(s.name), colours[s.name], widthPx, strings.Join(pts, " "))
			for _, pt := range pts {
				x, y, _ := strings.Cut(pt, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", x, y, colours[s.name])
			}
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// palette is every colour a plot draws sides in: distinct enough to tell
// apart at a glance, and as many as the largest suite has sides.
var palette = []string{
	"#1f5fbf", // blue
	"#e07b00", // orange
	"#2a9d3a", // green
	"#b8336a", // crimson
	"#5b3fa8", // purple
	"#8c564b", // brown
	"#17becf", // cyan
	"#7a7a7a", // grey
	"#bcbd22", // olive
	"#e377c2", // pink
}

// sideColours gives a side the same colour in every plot it is in.
// moonpool is blue and the peer a suite's targets are set against is
// orange; failsafe-go is cyan wherever it has one side.
var sideColours = map[string]string{
	"moonpool":      palette[0],
	"puddle":        palette[1],
	"x/time/rate":   palette[1],
	"semaphore":     palette[1],
	"gobreaker":     palette[1],
	"map+rate":      palette[1],
	"redis_rate":    palette[1],
	"pgxpool":       palette[1],
	"chan":          palette[2],
	"database/sql":  palette[2],
	"protoactor":    palette[3],
	"goroutine":     palette[4],
	"mutex":         palette[5],
	failsafeSmooth:  palette[6],
	failsafeBursty:  palette[4],
	failsafeBulk:    palette[6],
	failsafeBreaker: palette[6],
	adaptiveTheirs:  palette[6],
	adaptiveOracle:  palette[7],
	adaptiveNone:    palette[2],
}

// plotColours gives each of one plot's sides a colour no other side of
// the plot has: its own from sideColours when that is free, else the
// first free one of the palette.
func plotColours(names []string) map[string]string {
	out := make(map[string]string, len(names))
	used := make(map[string]bool)
	var rest []string
	for _, n := range names {
		if c, ok := sideColours[n]; ok && !used[c] {
			out[n], used[c] = c, true
		} else {
			rest = append(rest, n)
		}
	}
	for i, n := range rest {
		c := ""
		for _, p := range palette {
			if !used[p] {
				c = p
				break
			}
		}
		if c == "" { // more sides than colours: a shade of grey apiece
			c = fmt.Sprintf("#%02x%02x%02x", 40+i*20%200, 40+i*20%200, 40+i*20%200)
		}
		out[n], used[c] = c, true
	}
	return out
}

// niceStep rounds a raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// tick labels an axis value in ns.
func tick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1e9:
		return fmt.Sprintf("%gs", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%gms", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gµs", v/1e3)
	}
	return fmt.Sprintf("%gns", v)
}

// adaptiveColours gives each side of the Adaptive suite one colour in
// every plot, from the palette the other plots use.
var adaptiveColours = plotColours([]string{adaptiveOurs, adaptiveTheirs, adaptiveOracle, adaptiveNone})

// adaptivePlot draws one clock's scenarios, a row each: the limit over
// time on the left, the p99 of the requests answered in each window on
// the right, a line per side. Phase changes are dashed. An axis whose
// values span more than a decade is drawn on a log scale.
func adaptivePlot(f *adaptiveFacts) string {
	const (
		panelW, panelH = 420, 180
		left, gap      = 70, 80
		rowGap         = 70
	)
	var sides []string
	for _, r := range f.runs {
		if !slices.Contains(sides, r.side) {
			sides = append(sides, r.side)
		}
	}
	names := f.scenarioNames()
	width := left + 2*panelW + gap + 40
	colour := func(side string, _ int) string { return adaptiveColours[side] }
	var legend strings.Builder
	ly := svgLegend(&legend, sides, colour, left, 44, width-20)
	top := ly + 40
	height := top + len(names)*(panelH+rowGap)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left,
		html.EscapeString(adaptivePlotTitle(f)))
	b.WriteString(legend.String())
	for ri, name := range names {
		y0 := top + ri*(panelH+rowGap)
		var runs []*adaptiveRun
		for _, r := range f.runs {
			if r.scenario.name == name {
				runs = append(runs, r)
			}
		}
		s := runs[0].scenario
		for p, panel := range []struct {
			title  string
			points func(*adaptiveRun) []sample
			label  func(float64) string
		}{
			{name + ": limit", func(r *adaptiveRun) []sample { return r.limits }, func(v float64) string { return fmt.Sprintf("%g", v) }},
			{name + ": p99 latency", func(r *adaptiveRun) []sample { return r.p99s }, tick},
		} {
			x0 := float64(left + p*(panelW+gap))
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, r := range runs {
				for _, x := range panel.points(r) {
					if x.v > 0 {
						lo, hi = min(lo, x.v), max(hi, x.v)
					}
				}
			}
			if !(lo <= hi) {
				lo, hi = 1, 10
			}
			yAt, ticks := linearAxis(0, hi, float64(y0), panelH)
			if hi/lo > 10 {
				yAt, ticks = logAxis(lo, hi, float64(y0), panelH)
			}
			xAt := func(t time.Duration) float64 { return x0 + float64(t)/float64(s.length)*panelW }
			fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-weight="bold">%s</text>`+"\n", x0, y0-8, html.EscapeString(panel.title))
			for _, v := range ticks {
				y := yAt(v)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y, x0+panelW, y)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", x0-6, y+4, panel.label(v))
			}
			for _, ph := range s.phases[1:] {
				x := xAt(ph.at)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333" stroke-dasharray="4 3"/>`+"\n", x, y0, x, y0+panelH)
			}
			tStep := niceStep(s.length.Seconds() / 5)
			for t := 0.0; t <= s.length.Seconds()*1.0001; t += tStep {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%g</text>`+"\n", xAt(time.Duration(t*float64(time.Second))), y0+panelH+16, t)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">seconds</text>`+"\n", x0+panelW/2, y0+panelH+32)
			for _, r := range runs {
				var pts []string
				for _, x := range panel.points(r) {
					if x.v > 0 {
						pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(x.at), yAt(x.v)))
					}
				}
				if len(pts) == 0 {
					continue
				}
				w := 1.5
				if r.ours {
					w = 2.5
				}
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" points="%s"/>`+"\n", adaptiveColours[r.side], w, strings.Join(pts, " "))
			}
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// adaptivePlotTitle says what the plot shows, and of which round.
func adaptivePlotTitle(f *adaptiveFacts) string {
	t := fmt.Sprintf("Adaptive, %s clock: the limit and the p99 latency over time", f.clock)
	if len(f.runs) > 0 && len(f.runs[0].rounds) > 1 {
		t += fmt.Sprintf(" (the first of %d rounds)", len(f.runs[0].rounds))
	}
	return t
}

// linearAxis maps values from lo to hi (rounded out to a nice step) onto
// a panel of height h from y0 down, and lists its ticks.
func linearAxis(lo, hi, y0, h float64) (func(float64) float64, []float64) {
	step := niceStep((hi - lo) / 4)
	top := math.Max(step*math.Ceil(hi/step), step)
	var ticks []float64
	for v := lo; v <= top+step/2; v += step {
		ticks = append(ticks, v)
	}
	return func(v float64) float64 { return y0 + h - (v-lo)/(top-lo)*h }, ticks
}

// logAxis is linearAxis on a log scale, from the decade below lo to the
// one above hi, with ticks at 1, 2 and 5 of each.
func logAxis(lo, hi, y0, h float64) (func(float64) float64, []float64) {
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	var ticks []float64
	for v := lo; v <= hi*1.001; v *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if m*v <= hi*1.001 {
				ticks = append(ticks, m*v)
			}
		}
	}
	return func(v float64) float64 {
		return y0 + h - (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*h
	}, ticks
}

// adaptivePlots writes one plot per clock the Adaptive suite ran on into
// dir, and returns their names.
func adaptivePlots(dir string, results []result) ([]string, error) {
	var names []string
	for _, r := range results {
		f := adaptiveFactsOf(r)
		if f == nil {
			continue
		}
		name := "adaptive-" + f.clock + "-clock.svg"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(adaptivePlot(f)), 0o644); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}
