package main

import (
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
)

// svgShape is one element of a plot, with the attributes the checks read.
type svgShape struct {
	name, text           string
	x, y, width, height  float64
	fill, stroke, points string
}

// svgShapes parses a plot and lists its elements in order, with the
// canvas width.
func svgShapes(t *testing.T, svg string) ([]svgShape, float64) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var shapes []svgShape
	width, inText := 0.0, false
	num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the plot is not well-formed XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			s := svgShape{name: e.Name.Local}
			for _, a := range e.Attr {
				switch a.Name.Local {
				case "x":
					s.x = num(a.Value)
				case "y":
					s.y = num(a.Value)
				case "width":
					s.width = num(a.Value)
				case "height":
					s.height = num(a.Value)
				case "fill":
					s.fill = a.Value
				case "stroke":
					s.stroke = a.Value
				case "points":
					s.points = a.Value
				}
			}
			if s.name == "svg" {
				width = s.width
			}
			inText = s.name == "text"
			shapes = append(shapes, s)
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				shapes[len(shapes)-1].text += string(e)
			}
		}
	}
	return shapes, width
}

// fakeResult is r measured at callers, each side k times slower than the
// one before it, so the sides' values span decades.
func fakeResult(r row, callers []int, k float64) result {
	res := result{row: r}
	for ci, c := range callers {
		lv := level{callers: c}
		v := 10.0 * (1 + float64(ci))
		for _, s := range r.sides {
			lv.sides = append(lv.sides, measured{side: s.name, ours: s.ours, ns: v, p99: 3 * v})
			v *= k
		}
		res.levels = append(res.levels, lv)
	}
	return res
}

// TestPlotOneColourAndLegendEntryPerSide checks every suite's plot of
// ns/op and p99: each side is drawn in a colour no other side of the plot
// has, the legend names every side inside the canvas beside a swatch of
// its colour, and a side keeps its colour from plot to plot.
func TestPlotOneColourAndLegendEntryPerSide(t *testing.T) {
	cfg := configs["default"]
	var rows []row
	rows = append(rows, poolRows(nil, cfg)...)
	rows = append(rows, rateRows(nil, cfg)...)
	rows = append(rows, gateRows(nil, cfg)...)
	rows = append(rows, breakerRows(nil, cfg)...)
	rows = append(rows, keyedRows(nil, cfg)...)
	everywhere := map[string]string{} // a side's colour in the plots so far
	for _, r := range rows {
		name := r.suite + " " + r.name
		shapes, width := svgShapes(t, plot(fakeResult(r, []int{1, 8, 64, 512}, 10)))
		var lines []svgShape
		for _, s := range shapes {
			if s.name == "polyline" {
				lines = append(lines, s)
			}
		}
		if len(lines) != 2*len(r.sides) {
			t.Errorf("%s: %d lines, want one per side in each of 2 panels (%d)", name, len(lines), 2*len(r.sides))
			continue
		}
		colourOf := map[string]string{}
		sideOf := map[string]string{}
		for i, l := range lines {
			s := r.sides[i%len(r.sides)].name
			if c, ok := colourOf[s]; ok && c != l.stroke {
				t.Errorf("%s: %s is drawn in %s and in %s", name, s, c, l.stroke)
			}
			if other, ok := sideOf[l.stroke]; ok && other != s && i < len(r.sides) {
				t.Errorf("%s: %s and %s are both drawn in %s", name, other, s, l.stroke)
			}
			colourOf[s], sideOf[l.stroke] = l.stroke, s
			if c, ok := everywhere[s]; ok && c != l.stroke {
				t.Errorf("%s: %s is %s here and %s in another plot", name, s, l.stroke, c)
			}
			everywhere[s] = l.stroke
		}
		entries := 0
		for i, s := range shapes {
			if s.name != "text" || colourOf[s.text] == "" || i == 0 || shapes[i-1].name != "rect" || shapes[i-1].height != 4 {
				continue
			}
			entries++
			if shapes[i-1].fill != colourOf[s.text] {
				t.Errorf("%s: the legend shows %s in %s, its line is %s", name, s.text, shapes[i-1].fill, colourOf[s.text])
			}
			if end := s.x + 7*float64(len(s.text)); s.x < 0 || end > width {
				t.Errorf("%s: the legend entry of %s runs from x=%.0f to %.0f, outside the canvas of %.0f", name, s.text, s.x, end, width)
			}
		}
		if entries != len(r.sides) {
			t.Errorf("%s: %d legend entries, want one per side (%d)", name, entries, len(r.sides))
		}
	}
}

// TestPlotLogScaleWhenValuesSpanDecades checks that a side a thousand
// times faster than another is still drawn as a line that rises with its
// values, not flat on zero.
func TestPlotLogScaleWhenValuesSpanDecades(t *testing.T) {
	r := rateRows(nil, configs["default"])[0]
	shapes, _ := svgShapes(t, plot(fakeResult(r, []int{1, 8, 64, 512}, 10)))
	var fast svgShape // moonpool's ns/op: 10ns at one caller, 40ns at 512
	for _, s := range shapes {
		if s.name == "polyline" {
			fast = s
			break
		}
	}
	pts := strings.Fields(fast.points)
	if len(pts) != 4 {
		t.Fatalf("the fastest side has %d points, want 4: %q", len(pts), fast.points)
	}
	y := func(p string) float64 {
		_, v, _ := strings.Cut(p, ",")
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	if rise := y(pts[0]) - y(pts[3]); rise < 20 {
		t.Errorf("the fastest side rises %.1fpx from 10ns to 40ns, want at least 20px: a linear axis up to the slowest side's 40µs flattens it", rise)
	}

	// Values within a decade stay on a linear axis from zero.
	shapes, _ = svgShapes(t, plot(fakeResult(r, []int{1, 8, 64, 512}, 1.2)))
	for _, s := range shapes {
		if s.name == "text" && strings.Contains(s.text, "log scale") {
			t.Errorf("values within a decade are drawn on a log scale")
		}
	}
	if !hasTick(shapes, "0") {
		t.Errorf("a linear axis has no tick at 0")
	}
}

// hasTick says whether some text element reads exactly label.
func hasTick(shapes []svgShape, label string) bool {
	for _, s := range shapes {
		if s.name == "text" && s.text == label {
			return true
		}
	}
	return false
}

// TestPlotLogTicksDoNotCrowd checks that an axis spanning eight decades
// labels each tick at least a line of text apart, and names a second "1s".
func TestPlotLogTicksDoNotCrowd(t *testing.T) {
	r := gateRows(nil, configs["default"])[0]
	shapes, _ := svgShapes(t, plot(fakeResult(r, []int{1, 8, 64, 512}, 1e4)))
	var ys []float64
	second := false
	for _, s := range shapes {
		if s.name == "text" && s.x < 70 { // the left panel's tick labels
			ys = append(ys, s.y)
			second = second || s.text == "1s"
		}
	}
	if len(ys) < 3 {
		t.Fatalf("%d tick labels on the left axis, want one a decade", len(ys))
	}
	for i := 1; i < len(ys); i++ {
		if gap := ys[i-1] - ys[i]; gap < 14 {
			t.Errorf("tick labels %d and %d are %.1fpx apart, want at least 14", i-1, i, gap)
		}
	}
	if !second {
		t.Errorf("no tick reads 1s on an axis up to %gns", 10*4*1e8)
	}
}
