package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
)

// TestLatencyMissNamesTheRequestsProduce: a miss through the requests topic
// says by how much, and measures the third replicated write that the
// target's two commits leave out; a path that meets the target writes no
// miss.
func TestLatencyMissNamesTheRequestsProduce(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	path := func(accepted, outcome float64) ceiling.LatencyResult {
		return ceiling.LatencyResult{ToAccepted: ceiling.Summary{P99: ms(accepted)}, ToOutcome: ceiling.Summary{P99: ms(outcome)}}
	}
	r := &report{latency: &latencyResult{
		clients: 16, rawBatch: 16, rawPause: 2 * time.Millisecond,
		http:    path(2, 60),
		topic:   path(20, 90),
		raw:     ceiling.Summary{P99: ms(36)},
		rawLoop: ceiling.Summary{P99: ms(100)},
	}}
	var b strings.Builder
	r.writeLatency(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) })
	got := b.String()
	for _, want := range []string{
		"**Target missed** through the requests topic: outcome committed p99 is 2.50 times the raw commit p99 (target 2), 0.50 over",
		"the request's\nproduce, whose p99 (its \"accepted\") is 20.0 ms. Its outcome p99 is 30.0 ms over the HTTP API's",
		"add to 92.0 ms, 2.56 times the raw commit p99, which the path's p99 is within.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the section lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "through the HTTP API: outcome") {
		t.Errorf("the section calls the HTTP API's 1.67x a miss:\n%s", got)
	}
}
