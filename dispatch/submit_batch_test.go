package dispatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestSubmitBatchOneTransaction: the Issued records of a batch commit in one
// transaction, in the order of the batch, each with its own command, and the
// device is driven in that order. A batch of 1,000 has its records encoded
// on several goroutines where GOMAXPROCS allows.
func TestSubmitBatchOneTransaction(t *testing.T) {
	for _, n := range []int{200, 1000} {
		t.Run(fmt.Sprintf("batch=%d", n), func(t *testing.T) { submitBatchOneTransaction(t, n) })
	}
}

func submitBatchOneTransaction(t *testing.T, n int) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		var w writeTimes
		w.start(t, h)

		cmds := batchOf(n)
		results := h.d.SubmitBatch(t.Context(), cmds)
		if len(results) != n {
			t.Fatalf("%d results for %d commands", len(results), n)
		}
		for i, r := range results {
			if r.Err != nil || r.Outcome.Status != StatusSucceeded || r.Outcome.CommandID != cmds[i].ID {
				t.Fatalf("result %d: %+v, %v", i, r.Outcome, r.Err)
			}
		}
		_, kinds := w.get()
		if len(kinds) == 0 || kinds[0][EntryIssued] != n {
			t.Fatalf("transactions %v, want all %d Issued records in the first", kinds, n)
		}
		calls := dev.seen()
		if len(calls) != n {
			t.Fatalf("%d device calls, want %d", len(calls), n)
		}
		for i, c := range calls {
			if c.id != cmds[i].ID || !c.logged {
				t.Fatalf("device call %d: %+v, want %s after its Issued record committed", i, c, cmds[i].ID)
			}
		}
		var issued []Command
		for _, e := range log.entries(t) {
			if e.Kind == EntryIssued {
				issued = append(issued, e.Issued.Command)
			}
		}
		if len(issued) != n {
			t.Fatalf("%d Issued records in the log, want %d", len(issued), n)
		}
		for i, cmd := range issued {
			if cmd.ID != cmds[i].ID || string(cmd.Payload) != string(cmds[i].Payload) {
				t.Fatalf("Issued record %d holds %s (payload %q), want %s (payload %q)", i, cmd.ID, cmd.Payload, cmds[i].ID, cmds[i].Payload)
			}
		}
		h.stop()
	})
}

// batchOf returns n new commands for the device "valve", named b000 on.
func batchOf(n int) []Command {
	cmds := make([]Command, n)
	for i := range cmds {
		cmds[i] = newCommand(fmt.Sprintf("b%03d", i), "valve", time.Minute)
	}
	return cmds
}

// TestSubmitBatchRefusalsStandAlone: each command of a batch gets what Submit
// would give it alone: an invalid command, one for an unknown device and a
// different command under a taken ID are refused and recorded nowhere, a
// repeat gets the first's outcome without a second dispatch, and the valid
// commands around them succeed.
func TestSubmitBatchRefusalsStandAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.start(t.Context())
		if _, err := h.d.Submit(t.Context(), newCommand("taken", "valve", time.Minute)); err != nil {
			t.Fatal(err)
		}

		repeat := newCommand("twice", "valve", time.Minute)
		conflicting := newCommand("taken", "valve", time.Minute)
		conflicting.Action = "other"
		invalid := newCommand("", "valve", time.Minute)
		results := h.d.SubmitBatch(t.Context(), []Command{
			newCommand("first", "valve", time.Minute),
			invalid,
			newCommand("nowhere", "no-such-device", time.Minute),
			repeat,
			conflicting,
			repeat,
			newCommand("last", "valve", time.Minute),
		})

		var (
			badCmd   *InvalidCommandError
			unknown  *UnknownDeviceError
			conflict *IDConflictError
		)
		checks := []struct {
			name string
			ok   func(SubmitResult) bool
		}{
			{"first succeeds", func(r SubmitResult) bool { return r.Err == nil && r.Outcome.Status == StatusSucceeded }},
			{"invalid is refused", func(r SubmitResult) bool { return errors.As(r.Err, &badCmd) }},
			{"unknown device is refused", func(r SubmitResult) bool { return errors.As(r.Err, &unknown) }},
			{"repeat succeeds", func(r SubmitResult) bool { return r.Err == nil && r.Outcome.Status == StatusSucceeded }},
			{"conflict is refused", func(r SubmitResult) bool { return errors.As(r.Err, &conflict) }},
			{"second repeat gets the first's outcome", func(r SubmitResult) bool {
				return r.Err == nil && r.Outcome.Status == StatusSucceeded && r.Outcome.CommandID == "twice"
			}},
			{"last succeeds", func(r SubmitResult) bool { return r.Err == nil && r.Outcome.Status == StatusSucceeded }},
		}
		for i, c := range checks {
			if !c.ok(results[i]) {
				t.Errorf("%d: %s: got %+v, %v", i, c.name, results[i].Outcome, results[i].Err)
			}
		}
		issued := map[string]int{}
		for _, e := range log.entries(t) {
			if e.Kind == EntryIssued {
				issued[e.Issued.Command.ID]++
			}
		}
		want := map[string]int{"taken": 1, "first": 1, "twice": 1, "last": 1}
		if fmt.Sprint(issued) != fmt.Sprint(want) {
			t.Errorf("Issued records %v, want %v", issued, want)
		}
		dispatched := map[string]int{}
		for _, c := range dev.seen() {
			dispatched[c.id]++
		}
		if fmt.Sprint(dispatched) != fmt.Sprint(want) {
			t.Errorf("device calls %v, want %v", dispatched, want)
		}
		checkNoneComing(t, h)
		h.stop()
	})
}

// TestSubmitBatchAfterHalt: every command of a batch sent to a dispatcher
// that halted gets ErrHalted, every one sent after StopIntake gets
// ErrIntakeStopped, and nothing is recorded.
func TestSubmitBatchAfterHalt(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(h *harness)
		want error
	}{
		{"halted", func(h *harness) { h.stop() }, ErrHalted},
		{"intake stopped", func(h *harness) { h.d.StopIntake() }, ErrIntakeStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &leaderLog{}
				h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}})
				h.start(t.Context())
				synctest.Wait()
				tc.end(h)
				for i, r := range h.d.SubmitBatch(context.Background(), batchOf(2)) {
					if !errors.Is(r.Err, tc.want) {
						t.Errorf("result %d: %+v, %v; want %v", i, r.Outcome, r.Err, tc.want)
					}
				}
				for _, e := range log.entries(t) {
					if e.Kind == EntryIssued {
						t.Errorf("the dispatcher recorded %s", e.Issued.Command.ID)
					}
				}
				checkNoneComing(t, h)
				if tc.want != ErrHalted {
					h.stop()
				}
			})
		})
	}
}

// TestSubmitBatchLargerThanItsBounds: a batch of more commands than the
// pending bound and the commit queue allow waits for room as Submit does,
// commits in several transactions, and every command succeeds.
func TestSubmitBatchLargerThanItsBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 50
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithMaxPending(8), WithMaxQueued(4))
		var w writeTimes
		w.start(t, h)

		cmds := batchOf(n)
		for i, r := range h.d.SubmitBatch(t.Context(), cmds) {
			if r.Err != nil || r.Outcome.Status != StatusSucceeded {
				t.Fatalf("result %d: %+v, %v", i, r.Outcome, r.Err)
			}
		}
		_, kinds := w.get()
		for i, k := range kinds {
			if k[EntryIssued] > 8 {
				t.Errorf("transaction %d holds %d Issued records, above the pending bound of 8", i, k[EntryIssued])
			}
		}
		if calls := dev.seen(); len(calls) != n {
			t.Fatalf("%d device calls, want %d", len(calls), n)
		}
		h.stop()
	})
}

// TestSubmitBatchCompactIDs: after a takeover from a checkpoint, the settled
// commands are compact IDs; a batch that repeats one gets its outcome read
// from the log, without a second dispatch, one that reuses another's ID for
// a different command is refused, and a new command beside them succeeds.
func TestSubmitBatchCompactIDs(t *testing.T) {
	log := &leaderLog{}
	dev := &countingDevice{}
	devices := map[string]Device{"dev": dev}
	submitted := time.Now()
	first := startLeader(t, log, &rangeLog{leaderLog: log}, 0, devices, WithCheckpointInterval(50))
	submitMany(t, first.d, "r", 200, submitted)
	first.stop(t)

	reader := &rangeLog{leaderLog: log}
	second := startLeader(t, log, reader, 1, devices, WithCheckpointInterval(50))
	if r := second.d.Retained(); r.Compact == 0 {
		t.Fatalf("the successor holds %+v, want compact IDs", r)
	}
	repeat := Command{ID: "r-7", Device: "dev", Action: "set", Payload: []byte("p"), SubmittedAt: submitted, Deadline: submitted.Add(2 * time.Hour)}
	other := repeat
	other.ID, other.Action = "r-8", "other"
	fresh := newCommand("fresh", "dev", time.Hour)
	before := reader.read.Load()
	results := second.d.SubmitBatch(context.Background(), []Command{repeat, other, fresh})
	if n := reader.read.Load() - before; n < 2 {
		t.Errorf("the batch read %d records of the log, want the first records of r-7 and r-8 at least", n)
	}
	if r := results[0]; r.Err != nil || r.Outcome.Status != StatusSucceeded || r.Outcome.CommandID != "r-7" {
		t.Errorf("the repeat: %+v, %v; want the first's success", r.Outcome, r.Err)
	}
	var conflict *IDConflictError
	if r := results[1]; !errors.As(r.Err, &conflict) {
		t.Errorf("a different command under a settled ID: %+v, %v; want an *IDConflictError", r.Outcome, r.Err)
	}
	if r := results[2]; r.Err != nil || r.Outcome.Status != StatusSucceeded {
		t.Errorf("the new command: %+v, %v", r.Outcome, r.Err)
	}
	if n := dev.count("r-7"); n != 1 {
		t.Errorf("r-7 dispatched %d times, want once", n)
	}
	second.stop(t)
	verifyClean(t, log)
}

// TestSubmitBatchSkipsLinger: a batch queued whole does not wait for the
// commit linger, which exists to gather a burst that the batch already is.
func TestSubmitBatchSkipsLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithCommitLinger(20*time.Millisecond))
		var w writeTimes
		w.start(t, h)

		start := time.Now()
		cmds := []Command{newCommand("a", "valve", time.Minute), newCommand("b", "valve", time.Minute), newCommand("c", "valve", time.Minute)}
		for i, r := range h.d.SubmitBatch(t.Context(), cmds) {
			if r.Err != nil || r.Outcome.Status != StatusSucceeded {
				t.Fatalf("result %d: %+v, %v", i, r.Outcome, r.Err)
			}
		}
		starts, kinds := w.get()
		if len(starts) == 0 || kinds[0][EntryIssued] != 3 {
			t.Fatalf("transactions %v, want the batch in the first", kinds)
		}
		if got := starts[0].Sub(start); got != 0 {
			t.Errorf("the batch's transaction started %v after the call, want at once", got)
		}
		h.stop()
	})
}

// TestSubmitBatchContextEnds: when ctx ends while the device holds the
// commands, every result carries ctx's error, as Submit's would.
func TestSubmitBatchContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": gatedDevice(t, log)})
		h.start(t.Context())
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		for i, r := range h.d.SubmitBatch(ctx, batchOf(3)) {
			if !errors.Is(r.Err, context.DeadlineExceeded) {
				t.Errorf("result %d: %+v, %v; want the context's deadline", i, r.Outcome, r.Err)
			}
		}
		checkNoneComing(t, h)
		h.stop()
	})
}

// checkNoneComing asserts that every SubmitBatch call ended its
// announcement: one left in force would keep outcomes riding up to a
// transaction's time for good.
func checkNoneComing(t *testing.T, h *harness) {
	t.Helper()
	h.d.commits.mu.Lock()
	defer h.d.commits.mu.Unlock()
	if n := h.d.commits.coming; n != 0 {
		t.Errorf("%d batch announcements still in force", n)
	}
}
