package chart

import (
	"bytes"
	"image/color"
	"image/png"
	"math"
	"testing"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		log  bool
	}{{"linear", false}, {"log", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Chart{
				Title: "session start", XLabel: "time relative to baseline (x)", Reference: 1, Log: tt.log,
				Bars: []Bar{
					{Label: "true", Value: 1, Lo: 1, Hi: 1, Baseline: true, Note: "1.0 ms"},
					{Label: "oxsupervise run", Value: 40, Lo: 35, Hi: 50, Note: "40x"},
					{Label: "no spread", Value: 2, Lo: math.NaN(), Hi: math.NaN()},
				},
				Footer: []string{"go run ./bench/cmd/oxbench session"},
			}
			var buf bytes.Buffer
			if err := Render(&buf, c); err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(&buf)
			if err != nil {
				t.Fatalf("output is not a PNG: %v", err)
			}
			b := img.Bounds()
			if b.Dx() < plotW || b.Dy() < len(c.Bars)*rowH {
				t.Fatalf("image %v too small for %d bars", b, len(c.Bars))
			}
			// The bars and the baseline line must actually be drawn.
			want := map[color.RGBA]bool{barColor: false, baseBar: false, refColor: false}
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					r, g, bl, a := img.At(x, y).RGBA()
					c := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(a >> 8)}
					if _, ok := want[c]; ok {
						want[c] = true
					}
				}
			}
			for c, seen := range want {
				if !seen {
					t.Errorf("colour %v not drawn", c)
				}
			}
		})
	}
}

func TestRenderRejectsEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, Chart{Title: "empty"}); err == nil {
		t.Fatal("Render of a chart without bars succeeded")
	}
	if err := Render(&buf, Chart{Title: "zero", Bars: []Bar{{Label: "a"}}}); err == nil {
		t.Fatal("Render of a chart without a positive value succeeded")
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tt := range []struct{ in, want float64 }{{0.7, 1}, {1.3, 2}, {3, 5}, {7, 10}, {120, 200}} {
		if got := niceCeil(tt.in); got != tt.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
