package ceiling

import (
	"fmt"
	"slices"
	"time"
)

// Summary condenses the latency samples of one measurement and the rate at
// which its operations completed.
type Summary struct {
	// Count is the number of operations measured.
	Count int

	// Elapsed is the wall-clock extent of the measurement.
	Elapsed time.Duration

	// Rate is Count per second of Elapsed.
	Rate float64

	// P50, P99 and P999 are latency quantiles by the nearest-rank method;
	// Max is the largest sample.
	P50, P99, P999, Max time.Duration

	// samples are the sorted samples, for a pooled summary of several.
	samples []time.Duration
}

// Summarize builds the summary of a set of latency samples collected over
// elapsed. It does not modify samples.
func Summarize(samples []time.Duration, elapsed time.Duration) Summary {
	s := Summary{Count: len(samples), Elapsed: elapsed}
	if elapsed > 0 {
		s.Rate = float64(len(samples)) / elapsed.Seconds()
	}
	if len(samples) == 0 {
		return s
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	s.P50 = Quantile(sorted, 0.50)
	s.P99 = Quantile(sorted, 0.99)
	s.P999 = Quantile(sorted, 0.999)
	s.Max = sorted[len(sorted)-1]
	s.samples = sorted
	return s
}

// Quantile returns the q-quantile (0 < q <= 1) of sorted samples by the
// nearest-rank method: the smallest sample at or above which a fraction q of
// the samples lie. It returns zero for no samples.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted)) + 0.999999999)
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// Ratio returns a / b, and zero when b is zero.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Millis formats a duration in milliseconds with a precision that suits its
// size, for tables.
func Millis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2f", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f", ms)
	default:
		return fmt.Sprintf("%.0f", ms)
	}
}

// Pool summarizes the samples of several summaries together, over the sum
// of their spans.
func Pool(ss ...Summary) Summary {
	var samples []time.Duration
	var elapsed time.Duration
	for _, s := range ss {
		samples = append(samples, s.samples...)
		elapsed += s.Elapsed
	}
	return Summarize(samples, elapsed)
}

// AtLeast returns how many of the samples are d or longer.
func (s Summary) AtLeast(d time.Duration) int {
	i, _ := slices.BinarySearch(s.samples, d)
	return len(s.samples) - i
}
