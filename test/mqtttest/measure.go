package mqtttest

import (
	"context"
	"slices"
	"time"
)

// Stats summarises a run of MeasurePublish.
type Stats struct {
	// N is the number of calls that completed without error.
	N int
	// Elapsed is the wall time of the whole run.
	Elapsed time.Duration
	// PerSecond is N divided by Elapsed.
	PerSecond float64
	// P50 and P99 are latency percentiles of the completed calls.
	P50, P99 time.Duration
	// Max is the slowest completed call.
	Max time.Duration
}

// MeasurePublish calls publish n times in sequence, as the dispatcher sends
// one device's commands, and returns its rate and latency. It stops at the
// first error and returns it with the statistics so far.
func MeasurePublish(ctx context.Context, n int, publish func(ctx context.Context, i int) error) (Stats, error) {
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	var err error
	for i := range n {
		t0 := time.Now()
		if err = publish(ctx, i); err != nil {
			break
		}
		lat = append(lat, time.Since(t0))
	}
	return Summarise(lat, time.Since(start)), err
}

// Summarise computes Stats from the latencies of the calls of one run and
// the run's wall time.
func Summarise(lat []time.Duration, elapsed time.Duration) Stats {
	s := Stats{N: len(lat), Elapsed: elapsed}
	if len(lat) == 0 {
		return s
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	s.P50 = Percentile(sorted, 0.50)
	s.P99 = Percentile(sorted, 0.99)
	s.Max = sorted[len(sorted)-1]
	if elapsed > 0 {
		s.PerSecond = float64(len(lat)) / elapsed.Seconds()
	}
	return s
}

// Percentile returns the q-quantile (0 < q <= 1) of sorted latencies by the
// nearest-rank method.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}
