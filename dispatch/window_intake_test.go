package dispatch

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestIntakeRefusesOutsideWindow wants a request submitted before the dedup
// window recorded as rejected, with no Issued record and no dispatch, while
// the requests around it flow.
func TestIntakeRefusesOutsideWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		reqs := newFakeRequests()
		now := time.Now()
		reqs.add(t,
			mustEncodeRequest(t, Command{ID: "stale", Device: "valve", SubmittedAt: now.Add(-time.Hour - time.Second), Deadline: now.Add(time.Hour)}),
			mustEncodeRequest(t, Command{ID: "fresh", Device: "valve", SubmittedAt: now, Deadline: now.Add(time.Hour)}))
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithRequestSource(reqs), WithDedupWindow(time.Hour))
		h.start(t.Context())
		synctest.Wait()
		if _, ok := log.issued(t, "stale"); ok {
			t.Fatal("the request outside the window was issued")
		}
		outs := log.outcomes(t)["stale"]
		if len(outs) != 1 || outs[0].Status != StatusRejected || outs[0].Attempt != NoAttempt {
			t.Fatalf("outcomes of the request outside the window: %+v", outs)
		}
		if o, ok := h.d.Lookup("stale"); !ok || o.Status != StatusRejected {
			t.Fatalf("Lookup of the request outside the window: %+v %t", o, ok)
		}
		if seen := dev.seen(); len(seen) != 1 || seen[0].id != "fresh" {
			t.Fatalf("dispatches %+v, want fresh alone", seen)
		}
		if err := h.stop(); err == nil {
			t.Fatal("Run returned nil after the leadership ended")
		}
	})
}
