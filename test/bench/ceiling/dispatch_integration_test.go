//go:build integration

package ceiling

import (
	"context"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestMeasureSubmitModes runs the end-to-end dispatcher side's rounds on the
// real cluster in both ways a round is submitted: every command of each
// round reaches the device once, each latency is a time since the round
// began, and a batch handed to one SubmitBatch commits its Issued records in
// one transaction a round, where Submits of their own take one or more.
func TestMeasureSubmitModes(t *testing.T) {
	addrs := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logTopic, requestsTopic := kafkatest.UniqueName(t, "measure-log"), kafkatest.UniqueName(t, "measure-requests")
	for _, name := range []string{logTopic, requestsTopic} {
		if err := CreateTopic(ctx, addrs, TopicSpec{Name: name, Partitions: 1, Replication: 3, MinInsyncReplicas: 2}); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = DeleteTopics(context.Background(), addrs, logTopic, requestsTopic) }()
	d, err := StartDispatcher(ctx, DispatcherSetup{Brokers: addrs, Role: kafkatest.UniqueName(t, "measure-modes"),
		LogTopic: logTopic, RequestsTopic: requestsTopic})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	const batch = 200
	first := 0
	for _, mode := range []SubmitMode{SubmitEach, SubmitBatched} {
		before, mix := d.Device.Count(), d.Mix.Stats()
		run, err := measureSubmit(ctx, d, batch, 2*time.Second, "mode-"+mode.String(), first, mode)
		samples, elapsed, txns := run.samples, run.elapsed, run.perRound
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if len(samples) == 0 || len(samples)%batch != 0 || d.Device.Count()-before != len(samples) {
			t.Fatalf("%s: %d samples, %d device calls; want whole rounds of %d, one call each", mode, len(samples), d.Device.Count()-before, batch)
		}
		for _, s := range samples {
			if s <= 0 || s > elapsed {
				t.Fatalf("%s: a latency of %v in a run of %v", mode, s, elapsed)
			}
		}
		first += len(samples)
		// The devices may act before the last round's transaction is
		// reported to WithOnCommitted, which comes after its effects.
		rounds := len(samples) / batch
		issuing := d.Mix.Stats().Sub(mix).Issuing
		for deadline := time.Now().Add(5 * time.Second); issuing < int64(rounds) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			issuing = d.Mix.Stats().Sub(mix).Issuing
		}
		t.Logf("%s: %d rounds of %d in %v, %.2f transactions a round, %d with Issued records", mode, rounds, batch, elapsed, txns, issuing)
		switch {
		case mode == SubmitBatched && issuing != int64(rounds):
			t.Errorf("%s: %d transactions with Issued records in %d rounds, want one a round", mode, issuing, rounds)
		case issuing < int64(rounds):
			t.Errorf("%s: %d transactions with Issued records in %d rounds, want at least one a round", mode, issuing, rounds)
		}
		// Every round found the transaction of its Issued records, and its
		// phases fit in the run.
		if len(run.phases) != rounds {
			t.Errorf("%s: phases of %d rounds, want %d", mode, len(run.phases), rounds)
		}
		var all time.Duration
		for _, p := range run.phases {
			if p.Write <= 0 || p.ToWrite < 0 || p.Acts < 0 || p.Back < 0 {
				t.Fatalf("%s: a round's phases %+v", mode, p)
			}
			all += p.Outside() + p.Write
		}
		if all > elapsed {
			t.Errorf("%s: the rounds' phases add up to %v, more than the run's %v", mode, all, elapsed)
		}
	}
}
