package dispatch

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestOnCommittedReportsEachTransaction: the callback sees every Issued and
// Outcome record once, with the offset the log holds it at, one call per
// transaction, and a command is settled when its Outcome is reported.
func TestOnCommittedReportsEachTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		var mu sync.Mutex
		var calls [][]CommittedRecord
		var h *harness
		settledAtReport := map[string]bool{}
		h = newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithOnCommitted(func(rs []CommittedRecord) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, rs)
			for _, r := range rs {
				if r.Kind == EntryOutcome {
					h.d.mu.Lock()
					settledAtReport[r.CommandID] = h.d.commands[r.CommandID].phase == phaseTerminal
					h.d.mu.Unlock()
				}
			}
		}))
		h.start(t.Context())
		synctest.Wait()
		for _, id := range []string{"a", "b"} {
			if out, err := h.d.Submit(t.Context(), newCommand(id, "valve", time.Minute)); err != nil || out.Status != StatusSucceeded {
				t.Fatalf("Submit %s: %+v, %v", id, out, err)
			}
		}
		synctest.Wait()
		h.stop()

		offsets := map[EntryKind]map[string]int64{EntryIssued: {}, EntryOutcome: {}}
		for _, e := range log.entries(t) {
			if m := offsets[e.Kind]; m != nil {
				switch e.Kind {
				case EntryIssued:
					m[e.Issued.Command.ID] = e.Offset
				case EntryOutcome:
					m[e.Outcome.CommandID] = e.Offset
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if offsets[EntryIssued]["a"] == offsets[EntryIssued]["b"] {
			t.Fatalf("the log holds both Issued records at offset %d", offsets[EntryIssued]["a"])
		}
		seen := map[EntryKind]map[string]int{EntryIssued: {}, EntryOutcome: {}}
		for _, rs := range calls {
			if len(rs) == 0 {
				t.Error("a call with no records")
			}
			for _, r := range rs {
				seen[r.Kind][r.CommandID]++
				if want := offsets[r.Kind][r.CommandID]; r.Offset != want {
					t.Errorf("%v of %s reported at offset %d, the log holds it at %d", r.Kind, r.CommandID, r.Offset, want)
				}
				if (r.Kind == EntryOutcome) != (r.Outcome != nil) {
					t.Errorf("%v of %s reported with outcome %v", r.Kind, r.CommandID, r.Outcome)
				}
				if r.Outcome != nil && r.Outcome.Status != StatusSucceeded {
					t.Errorf("outcome of %s reported as %s", r.CommandID, r.Outcome.Status)
				}
			}
		}
		for _, kind := range []EntryKind{EntryIssued, EntryOutcome} {
			for _, id := range []string{"a", "b"} {
				if seen[kind][id] != 1 {
					t.Errorf("%v of %s reported %d times, want once", kind, id, seen[kind][id])
				}
			}
		}
		for _, id := range []string{"a", "b"} {
			if !settledAtReport[id] {
				t.Errorf("command %s was not settled when its outcome was reported", id)
			}
		}
	})
}
