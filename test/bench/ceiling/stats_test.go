package ceiling

import (
	"testing"
	"time"
)

func TestQuantileNearestRank(t *testing.T) {
	var sorted []time.Duration
	for i := 1; i <= 1000; i++ {
		sorted = append(sorted, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 500 * time.Millisecond},
		{0.99, 990 * time.Millisecond},
		{0.999, 999 * time.Millisecond},
		{1, 1000 * time.Millisecond},
		{0.0001, 1 * time.Millisecond},
	} {
		if got := Quantile(sorted, tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := Quantile(nil, 0.5); got != 0 {
		t.Errorf("Quantile of no samples = %v, want 0", got)
	}
}

func TestSummarizeRateAndOrder(t *testing.T) {
	samples := []time.Duration{3 * time.Millisecond, 1 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	s := Summarize(samples, 2*time.Second)
	if s.Count != 4 || s.Rate != 2 {
		t.Fatalf("count %d rate %v, want 4 and 2", s.Count, s.Rate)
	}
	if s.P50 != 2*time.Millisecond || s.Max != 4*time.Millisecond {
		t.Fatalf("p50 %v max %v, want 2ms and 4ms", s.P50, s.Max)
	}
	if samples[0] != 3*time.Millisecond {
		t.Fatal("Summarize reordered its input")
	}
}

// TestAtLeast counts the samples at or above a bound, ties included.
func TestAtLeast(t *testing.T) {
	s := Summarize([]time.Duration{30, 10, 20, 20, 5}, 0)
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, 5}, {5, 5}, {6, 4}, {20, 3}, {21, 1}, {31, 0}} {
		if got := s.AtLeast(c.d); got != c.want {
			t.Errorf("AtLeast(%d) = %d, want %d", c.d, got, c.want)
		}
	}
}
