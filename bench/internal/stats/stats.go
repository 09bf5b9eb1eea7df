// Package stats summarises interleaved benchmark samples: quantiles of each
// variant and the ratio of a variant to its baseline with a spread taken
// from the rounds, so one noisy round on a shared machine shows up as a
// wide interval instead of a wrong number.
package stats

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Quantile returns the q-quantile (0..1) of xs by linear interpolation
// between closest ranks; NaN for no samples.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return s[lo]*(1-frac) + s[hi]*frac
}

// Median is Quantile(xs, 0.5).
func Median(xs []float64) float64 { return Quantile(xs, 0.5) }

// Ratio compares a variant with the baseline measured in the same rounds.
type Ratio struct {
	// Median is median(variant) / median(baseline).
	Median float64
	// Lo and Hi bound a 95% paired bootstrap interval of Median: rounds
	// are resampled together, so a slow round slows both sides.
	Lo, Hi float64
	// MinRound and MaxRound are the extreme per-round ratios.
	MinRound, MaxRound float64
}

// CompareRounds returns the ratio of variant to baseline, where
// variant[i] and baseline[i] were measured in the same round. seed makes
// the bootstrap reproducible.
func CompareRounds(baseline, variant []float64, seed uint64) Ratio {
	n := min(len(baseline), len(variant))
	if n == 0 {
		nan := math.NaN()
		return Ratio{nan, nan, nan, nan, nan}
	}
	baseline, variant = baseline[:n], variant[:n]
	r := Ratio{Median: Median(variant) / Median(baseline), MinRound: math.Inf(1), MaxRound: math.Inf(-1)}
	for i := range n {
		x := variant[i] / baseline[i]
		r.MinRound = min(r.MinRound, x)
		r.MaxRound = max(r.MaxRound, x)
	}
	const resamples = 2000
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	boot := make([]float64, resamples)
	b := make([]float64, n)
	v := make([]float64, n)
	for k := range boot {
		for i := range n {
			j := rng.IntN(n)
			b[i], v[i] = baseline[j], variant[j]
		}
		boot[k] = Median(v) / Median(b)
	}
	r.Lo = Quantile(boot, 0.025)
	r.Hi = Quantile(boot, 0.975)
	return r
}
