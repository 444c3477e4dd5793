package ceiling

import (
	"context"
	"fmt"
	"time"
)

// Side is one path of an interleaved comparison. Run measures it for a
// window; rep numbers the repetition, from 0, so that a side can keep the
// ids of its commands apart.
type Side struct {
	Name string
	Run  func(ctx context.Context, rep int, window time.Duration) (Summary, error)
}

// SideResult is one side over every repetition.
type SideResult struct {
	Name string

	// Reps is the summary of each repetition.
	Reps []Summary

	// Rate is the median rate over the repetitions; Pooled pools every
	// latency.
	Rate   float64
	Pooled Summary
}

// RateSpread returns the lowest and the highest rate of the repetitions.
func (s SideResult) RateSpread() (lo, hi float64) {
	for i, r := range s.Reps {
		if i == 0 || r.Rate < lo {
			lo = r.Rate
		}
		if i == 0 || r.Rate > hi {
			hi = r.Rate
		}
	}
	return lo, hi
}

// RatioTo returns the median over the repetitions of this side's rate over
// base's rate in the same repetition.
func (s SideResult) RatioTo(base SideResult) float64 {
	var ratios []float64
	for i := range min(len(s.Reps), len(base.Reps)) {
		ratios = append(ratios, Ratio(s.Reps[i].Rate, base.Reps[i].Rate))
	}
	return Median(ratios)
}

// Interleave runs every side for window, reps times, starting each
// repetition with the next side in turn, so that a burst of load on a shared
// machine falls on every side alike.
func Interleave(ctx context.Context, reps int, window time.Duration, sides []Side) ([]SideResult, error) {
	out := make([]SideResult, len(sides))
	for i, s := range sides {
		out[i].Name = s.Name
	}
	for rep := range reps {
		for k := range sides {
			i := (rep + k) % len(sides)
			s, err := sides[i].Run(ctx, rep, window)
			if err != nil {
				return out, fmt.Errorf("%s, repetition %d: %w", sides[i].Name, rep+1, err)
			}
			out[i].Reps = append(out[i].Reps, s)
		}
	}
	for i := range out {
		var rates []float64
		for _, r := range out[i].Reps {
			rates = append(rates, r.Rate)
		}
		out[i].Rate = Median(rates)
		out[i].Pooled = Pool(out[i].Reps...)
	}
	return out, nil
}

// SerialLoop calls f with 0, 1, 2... one call at a time for window, and
// returns the latency of every call.
func SerialLoop(ctx context.Context, window time.Duration, f func(ctx context.Context, i int) error) (Summary, error) {
	var samples []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < window; i++ {
		began := time.Now()
		if err := f(ctx, i); err != nil {
			return Summary{}, err
		}
		samples = append(samples, time.Since(began))
	}
	return Summarize(samples, time.Since(start)), nil
}
