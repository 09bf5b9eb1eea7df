package stats

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"single", []float64{7}, 0.9, 7},
		{"median odd", []float64{3, 1, 2}, 0.5, 2},
		{"median even", []float64{4, 1, 3, 2}, 0.5, 2.5},
		{"p90 of ten", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9.1},
		{"min", []float64{5, 4}, 0, 4},
		{"max", []float64{5, 4}, 1, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quantile(tt.xs, tt.q); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("Quantile(%v, %v) = %v, want %v", tt.xs, tt.q, got, tt.want)
			}
		})
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Fatal("Quantile of no samples must be NaN")
	}
}

func TestCompareRounds(t *testing.T) {
	base := []float64{10, 12, 11, 30, 10}
	variant := []float64{20, 24, 22, 60, 20} // exactly twice each round
	r := CompareRounds(base, variant, 1)
	for name, got := range map[string]float64{"median": r.Median, "lo": r.Lo, "hi": r.Hi, "min": r.MinRound, "max": r.MaxRound} {
		if math.Abs(got-2) > 1e-9 {
			t.Errorf("%s = %v, want 2 (variant is exactly 2x in every round)", name, got)
		}
	}

	noisy := CompareRounds([]float64{10, 10, 10, 10}, []float64{10, 20, 10, 40}, 1)
	if noisy.MinRound != 1 || noisy.MaxRound != 4 {
		t.Errorf("per-round extremes = %v..%v, want 1..4", noisy.MinRound, noisy.MaxRound)
	}
	if !(noisy.Lo <= noisy.Median && noisy.Median <= noisy.Hi) || noisy.Lo == noisy.Hi {
		t.Errorf("interval %v..%v must be non-empty and contain the median %v", noisy.Lo, noisy.Hi, noisy.Median)
	}
	if r := CompareRounds(nil, nil, 1); !math.IsNaN(r.Median) {
		t.Errorf("no rounds: median = %v, want NaN", r.Median)
	}
}
