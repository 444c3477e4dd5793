package dispatch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestTakeoverSeries runs forty leaderships of one role in a row over a
// shared partition, each ended by a drain or by a crash at random, with a
// window of IDs large enough for delta checkpoints. However long the
// history grows, each recovery reads a bounded number of records, a drained
// leader leaves its successor no tail, every delta holds at most a quarter
// of the window and an interval's IDs, and the last leader knows what a
// leader that folds the whole log knows. The leaders share a Standby that
// reads ahead at random times, so that some recoveries take a base read
// before their predecessor's last writes, and each holds the whole window.
func TestTakeoverSeries(t *testing.T) {
	const (
		interval  = 40
		neighbour = 30 // records of another role each leadership
		leaders   = 40
	)
	rng := rand.New(rand.NewPCG(11, 17))
	log := &leaderLog{}
	devices := map[string]Device{"dev": &countingDevice{}}
	// A window of 1,000 IDs and more: past 16 intervals, so deltas are
	// written between full checkpoints.
	first := startLeader(t, log, &rangeLog{leaderLog: log}, 0, devices, WithCheckpointInterval(interval))
	submitMany(t, first.d, "seed", 1000, time.Now())
	first.stop(t)

	// The leaders share a member's Standby, which reads ahead at random:
	// before the leader's own writes (its base may be stale by the
	// takeover), just before the takeover, both, or not at all.
	standby, err := NewStandby(first.leader.Role(), &rangeLog{leaderLog: log}, WithCheckpointInterval(interval))
	if err != nil {
		t.Fatal(err)
	}
	ahead := rand.New(rand.NewPCG(23, 29))
	prefetch := func() {
		t.Helper()
		if ahead.IntN(2) == 0 {
			if err := standby.Prefetch(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids := 1000
	drained := false
	maxRead, prefetched, found := 0, 0, 0
	for k := 1; k <= leaders; k++ {
		prefetch()
		reader := &rangeLog{leaderLog: log}
		ld := startLeader(t, log, reader, int16(k), devices, WithCheckpointInterval(interval), WithStandby(standby))
		stats := ld.d.RecoveryStats()
		maxRead = max(maxRead, stats.RecordsRead)
		if stats.BasePrefetched {
			prefetched++
		}
		if stats.CheckpointPrefetched {
			found++
		}
		prefetch()
		history := len(log.entries(t))
		// The search reads back at most about twice the distance to the
		// newest checkpoint (an interval of the role's records and a
		// leadership of the neighbour's at most), and the base at its own
		// offsets: a part, at this window's size.
		if bound := 4*(interval+neighbour) + 4; stats.RecordsRead > bound {
			t.Fatalf("leader %d: recovery read %d records of %d; want at most %d", k, stats.RecordsRead, history, bound)
		}
		if stats.CheckpointOffset < 0 {
			t.Fatalf("leader %d: recovery found no checkpoint in %d records", k, history)
		}
		if drained && stats.TailRecords != 0 {
			t.Fatalf("leader %d: its predecessor drained, yet it read %d records of the role after the checkpoint", k, stats.TailRecords)
		}
		if r := ld.d.Retained(); r.Compact != ids || r.Whole != 0 {
			t.Fatalf("leader %d holds %+v, want %d compact IDs", k, r, ids)
		}
		n := rng.IntN(3 * interval)
		submitMany(t, ld.d, fmt.Sprintf("l%d", k), n, time.Now())
		ids += n
		otherRole(t, log, k, neighbour)
		if drained = rng.IntN(2) == 0; drained {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := ld.d.Drain(ctx)
			cancel()
			if err != nil {
				t.Fatalf("leader %d: drain: %v", k, err)
			}
		}
		ld.stop(t)
	}
	verifyClean(t, log)

	// Every delta is bounded by the window at its offset.
	entries := log.entries(t)
	deltas := 0
	for _, cp := range checkpointsOf(t, entries) {
		if cp.Base == nil {
			continue
		}
		deltas++
		window := 0
		for _, e := range entries {
			if e.Offset < cp.first && e.Kind == EntryIssued && e.Role == first.d.role {
				window++
			}
		}
		if bound := window/4 + 2*interval; len(cp.IDs) > bound {
			t.Fatalf("the delta at offset %d holds %d IDs of a window of %d; want at most %d", cp.first, len(cp.IDs), window, bound)
		}
	}
	if deltas == 0 {
		t.Fatal("no delta checkpoint in the series")
	}
	if prefetched == 0 || found == 0 {
		t.Fatalf("%d recoveries took a base and %d a checkpoint that their standby read ahead, want some of each", prefetched, found)
	}
	t.Logf("%d leaderships, %d records, %d compact IDs, %d deltas, %d bases and %d checkpoints read ahead; recovery read at most %d records",
		leaders, len(entries), ids, deltas, prefetched, found, maxRead)

	last := startLeader(t, log, &rangeLog{leaderLog: log}, leaders+1, devices, WithCheckpointInterval(interval))
	defer last.stop(t)
	whole := startLeader(t, log, log, leaders+2, devices) // reads the whole log
	defer whole.stop(t)
	for _, e := range entries {
		if e.Kind != EntryIssued || e.Role != last.d.role {
			continue
		}
		a, okA := last.d.Lookup(e.Issued.Command.ID)
		b, okB := whole.d.Lookup(e.Issued.Command.ID)
		if !okA || !okB || !reflect.DeepEqual(a, b) || a.Status != StatusSucceeded {
			t.Fatalf("%s: after %d takeovers %+v %t, from the whole log %+v %t", e.Issued.Command.ID, leaders, a, okA, b, okB)
		}
	}
}
