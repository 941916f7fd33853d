package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// plot draws one row as an SVG: ns/op against callers on the left, p99
// against callers on the right, a line per side. Callers go on a log
// scale, times on a linear one from zero, so a side twice as slow looks
// twice as high.
func plot(r result) string {
	const (
		width, height = 900, 340
		panelW        = 360
		top, bottom   = 50, 50
		left          = 70
		gap           = 70
	)
	colours := []string{"#1f5fbf", "#e07b00", "#7a7a7a", "#2a9d3a"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(r.row.suite+" "+r.row.name))

	var callers []int
	for _, lv := range r.levels {
		callers = append(callers, lv.callers)
	}
	sides := r.row.sides
	lo, hi := math.Log2(float64(callers[0])), math.Log2(float64(callers[len(callers)-1]))
	if hi == lo {
		hi = lo + 1
	}
	plotH := float64(height - top - bottom)
	for p, metric := range []struct {
		title string
		value func(*measured) float64
	}{{"ns/op", ns}, {"p99 of one call", p99}} {
		x0 := float64(left + p*(panelW+gap))
		yMax := 0.0
		for _, lv := range r.levels {
			for i := range lv.sides {
				if v := metric.value(&lv.sides[i]); !math.IsNaN(v) {
					yMax = max(yMax, v)
				}
			}
		}
		step := niceStep(yMax / 4)
		yMax = math.Max(step*math.Ceil(yMax/step), step)
		xAt := func(c int) float64 { return x0 + (math.Log2(float64(c))-lo)/(hi-lo)*panelW }
		yAt := func(v float64) float64 { return float64(top) + plotH - v/yMax*plotH }

		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-weight="bold">%s</text>`+"\n", x0, top-10, metric.title)
		for v := 0.0; v <= yMax+step/2; v += step {
			y := yAt(v)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y, x0+panelW, y)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", x0-6, y+4, tick(v))
		}
		for _, c := range callers {
			x := xAt(c)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x, top, x, float64(top)+plotH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%d</text>`+"\n", x, float64(top)+plotH+16, c)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">callers</text>`+"\n", x0+panelW/2, float64(top)+plotH+34)
		for si, s := range sides {
			var pts []string
			for _, lv := range r.levels {
				if m := sideOf(lv, s.name); m != nil && !math.IsNaN(metric.value(m)) {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(lv.callers), yAt(metric.value(m))))
				}
			}
			colour := colours[si%len(colours)]
			widthPx := 2
			if s.ours {
				widthPx = 3
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%d" points="%s"/>`+"\n", colour, widthPx, strings.Join(pts, " "))
			for _, pt := range pts {
				x, y, _ := strings.Cut(pt, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", x, y, colour)
			}
		}
	}
	// Legend, on the title's line.
	for si, s := range sides {
		x, y := 420+si*130, 22
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			x, y-5, colours[si%len(colours)], x+20, y, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
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
	case v >= 1e6:
		return fmt.Sprintf("%gms", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gµs", v/1e3)
	}
	return fmt.Sprintf("%gns", v)
}
