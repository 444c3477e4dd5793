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

// TestLatencySplitsTheRawCommit: the section says how much of the raw
// commit is its produce and its EndTxn, and reads the produce against the
// brokers' retry backoff, held or not, or says the brokers did not report it.
func TestLatencySplitsTheRawCommit(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	section := func(produce float64, backoff string, device float64) string {
		r := &report{latency: &latencyResult{
			clients: 16, rawBatch: 16, rawPause: 2 * time.Millisecond,
			http: ceiling.LatencyResult{ToDevice: ceiling.Summary{P50: ms(device)}},
			raw:  ceiling.Summary{P50: ms(25.5), P99: ms(36)},
			rawSteps: ceiling.CommitSteps{
				Produce: ceiling.Summary{Count: 40, P50: ms(produce), P99: ms(30)},
				End:     ceiling.Summary{Count: 40, P50: ms(1), P99: ms(2)},
			},
			retryBackoff: backoff,
		}}
		var b strings.Builder
		r.writeLatency(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) })
		return b.String()
	}
	for _, c := range []struct {
		produce       float64
		backoff       string
		device        float64
		want, notWant string
	}{
		{24, "20", 28, "The brokers' `add.partitions.to.txn.retry.backoff.ms` is 20 ms: a produce that takes longer met a partition leader that held", "were not held"},
		{24, "20", 28, "The dispatcher's\nIssued commits were mostly held too: the HTTP API's to-device p50, which holds one, is 28.0 ms.", "mostly not held"},
		{24, "20", 6.5, "The dispatcher's\nIssued commits were mostly not held: the HTTP API's to-device p50, which holds one, is 6.50 ms.", "mostly held too"},
		{3.5, "20", 6.5, "in this run most of the raw commit's produces took less, so most\nof its transactions were not held", "met a partition leader"},
		{24, "", 28, "The brokers did not report their `add.partitions.to.txn.retry.backoff.ms`.", "met a partition leader"},
	} {
		got := section(c.produce, c.backoff, c.device)
		split := fmt.Sprintf("Of the raw commit's p50 of 25.5 ms, its produce took %s ms and its EndTxn 1.00 ms (p50s).\n", ceiling.Millis(ms(c.produce)))
		for _, want := range []string{split, c.want, "| the raw commit's produce (begin to every record acknowledged) | 40 |"} {
			if !strings.Contains(got, want) {
				t.Errorf("produce %.1f ms, backoff %q: the section lacks %q:\n%s", c.produce, c.backoff, want, got)
			}
		}
		if strings.Contains(got, c.notWant) {
			t.Errorf("produce %.1f ms, backoff %q: the section says %q:\n%s", c.produce, c.backoff, c.notWant, got)
		}
	}
}
