// Package chart renders benchmark ratios as a horizontal bar chart PNG with
// nothing but the standard image packages and a bitmap font, so the
// benchmark harness needs no plotting tool installed.
package chart

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Bar is one row: a variant's value relative to its baseline.
type Bar struct {
	Label string
	// Value is the bar length; Lo and Hi draw a whisker (skipped when
	// equal to Value or NaN).
	Value, Lo, Hi float64
	// Baseline rows are drawn grey; their Value is normally 1.
	Baseline bool
	// Note is printed right of the bar (e.g. the absolute median).
	Note string
}

// Chart is one figure.
type Chart struct {
	Title  string
	XLabel string
	// Reference draws a dashed vertical line at this x (the baseline, 1.0
	// for ratios); 0 means none.
	Reference float64
	// Log uses a logarithmic x axis (for ratios spanning decades).
	Log  bool
	Bars []Bar
	// Footer lines are printed under the axis (the reproducing command).
	Footer []string
}

var (
	white    = color.RGBA{255, 255, 255, 255}
	black    = color.RGBA{0, 0, 0, 255}
	grid     = color.RGBA{225, 225, 225, 255}
	barColor = color.RGBA{52, 101, 164, 255}
	baseBar  = color.RGBA{150, 150, 150, 255}
	refColor = color.RGBA{204, 0, 0, 255}
)

const (
	charW   = 7 // basicfont.Face7x13 advance
	rowH    = 22
	barH    = 14
	margin  = 12
	plotW   = 560
	noteGap = 8
)

// Render writes c as a PNG.
func Render(w io.Writer, c Chart) error {
	if len(c.Bars) == 0 {
		return fmt.Errorf("chart %q: no bars", c.Title)
	}
	labelW, noteW := 0, 0
	xmin, xmax := math.Inf(1), 0.0
	for _, b := range c.Bars {
		labelW = max(labelW, len(b.Label)*charW)
		noteW = max(noteW, len(b.Note)*charW)
		for _, v := range []float64{b.Value, b.Lo, b.Hi} {
			if !math.IsNaN(v) && !math.IsInf(v, 0) && v > 0 {
				xmax = max(xmax, v)
				xmin = min(xmin, v)
			}
		}
	}
	if xmax == 0 {
		return fmt.Errorf("chart %q: no positive finite value to draw", c.Title)
	}
	if c.Reference > 0 {
		xmax = max(xmax, c.Reference)
		xmin = min(xmin, c.Reference)
	}
	footerW := 0
	for _, f := range c.Footer {
		footerW = max(footerW, len(f)*charW)
	}
	left := margin + labelW + 10
	width := max(left+plotW+noteGap+noteW+margin, len(c.Title)*charW+2*margin, footerW+2*margin, len(c.XLabel)*charW+left+margin)
	top := margin + 13 + 14
	plotH := len(c.Bars) * rowH
	height := top + plotH + 44 + len(c.Footer)*15 + margin

	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)

	var lo, hi float64
	var x func(v float64) int
	if c.Log {
		lo = math.Pow(10, math.Floor(math.Log10(xmin*0.9)))
		hi = math.Pow(10, math.Ceil(math.Log10(xmax*1.05)))
		x = func(v float64) int {
			return left + int(float64(plotW)*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
		}
	} else {
		hi = niceCeil(xmax * 1.08)
		x = func(v float64) int { return left + int(float64(plotW)*(v-lo)/(hi-lo)) }
	}

	// Grid and tick labels.
	for _, t := range ticks(lo, hi, c.Log) {
		px := x(t)
		vline(img, px, top, top+plotH, grid, 1)
		s := strconv.FormatFloat(t, 'g', 4, 64)
		text(img, px-len(s)*charW/2, top+plotH+14, s, black)
	}
	// Axes.
	hline(img, left, left+plotW, top+plotH, black)
	vline(img, left, top, top+plotH, black, 1)

	for i, b := range c.Bars {
		y := top + i*rowH + (rowH-barH)/2
		text(img, left-10-len(b.Label)*charW, y+11, b.Label, black)
		col := barColor
		if b.Baseline {
			col = baseBar
		}
		if b.Value > 0 && !math.IsInf(b.Value, 0) {
			draw.Draw(img, image.Rect(left+1, y, max(x(b.Value), left+2), y+barH), image.NewUniform(col), image.Point{}, draw.Src)
		}
		if valid(b.Lo) && valid(b.Hi) && (b.Lo != b.Value || b.Hi != b.Value) {
			cy := y + barH/2
			hline(img, x(b.Lo), x(b.Hi), cy, black)
			vline(img, x(b.Lo), cy-4, cy+4, black, 1)
			vline(img, x(b.Hi), cy-4, cy+4, black, 1)
		}
		text(img, left+plotW+noteGap, y+11, b.Note, black)
	}
	if c.Reference > 0 {
		rx := x(c.Reference)
		for y := top - 4; y < top+plotH; y += 6 {
			vline(img, rx, y, min(y+3, top+plotH), refColor, 2)
		}
		lbl := "baseline"
		text(img, rx-len(lbl)*charW/2, top-4, lbl, refColor)
	}
	text(img, margin, margin+11, c.Title, black)
	text(img, left+(plotW-len(c.XLabel)*charW)/2, top+plotH+32, c.XLabel, black)
	for i, f := range c.Footer {
		text(img, margin, top+plotH+50+i*15, f, color.RGBA{80, 80, 80, 255})
	}
	return png.Encode(w, img)
}

func valid(v float64) bool { return v > 0 && !math.IsNaN(v) && !math.IsInf(v, 0) }

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func ticks(lo, hi float64, log bool) []float64 {
	var out []float64
	if log {
		for p := lo; p <= hi*1.0001; p *= 10 {
			out = append(out, p)
			if p*2 < hi {
				out = append(out, p*2)
			}
			if p*5 < hi {
				out = append(out, p*5)
			}
		}
		return out
	}
	step := niceCeil((hi - lo) / 6)
	for v := lo; v <= hi*1.0001; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color) {
	if x0 > x1 {
		x0, x1 = x1, x0
	}
	for x := x0; x <= x1; x++ {
		img.Set(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.Color, w int) {
	for y := y0; y <= y1; y++ {
		for dx := range w {
			img.Set(x+dx, y, c)
		}
	}
}
