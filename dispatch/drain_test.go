package dispatch

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestDrainStopsIntakeAndWaitsForInFlight: Drain stops both intakes at
// once, lets the command in flight reach its outcome, and returns; a request
// that lands in the topic during the drain is neither issued nor covered by
// a committed intake position, so the next leader takes it.
func TestDrainStopsIntakeAndWaitsForInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := newBlockingDevice()
		reqs := newFakeRequests()
		reqs.add(t, mustEncodeRequest(t, newCommand("r0", "valve", time.Hour)))
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithRequestSource(reqs))
		h.start(t.Context())
		<-dev.started // r0 is at the device

		drained := make(chan error, 1)
		go func() { drained <- h.d.Drain(t.Context()) }()
		synctest.Wait()
		select {
		case err := <-drained:
			t.Fatalf("Drain returned %v with r0 in flight", err)
		default:
		}
		// Intake from both sides is closed while r0 finishes.
		if _, err := h.d.Submit(t.Context(), newCommand("api", "valve", time.Hour)); !errors.Is(err, ErrIntakeStopped) {
			t.Errorf("Submit during the drain: %v, want ErrIntakeStopped", err)
		}
		reqs.add(t, mustEncodeRequest(t, newCommand("late", "valve", time.Hour)))
		synctest.Wait()

		close(dev.release)
		if err := <-drained; err != nil {
			t.Fatalf("Drain: %v", err)
		}
		if out, ok := h.d.Lookup("r0"); !ok || out.Status != StatusSucceeded {
			t.Errorf("r0 after the drain: %+v %v, want succeeded", out, ok)
		}
		for _, id := range []string{"late", "api"} {
			if _, ok := log.issued(t, id); ok {
				t.Errorf("%s was issued by the draining leader", id)
			}
		}
		// The committed intake position covers r0 and stops before late.
		var position int64 = -1
		for _, e := range log.entries(t) {
			if e.Kind == EntryIntake {
				position = e.Intake.NextOffset
			}
		}
		if position != 1 {
			t.Errorf("committed intake position %d, want 1 (late, at offset 1, left for the next leader)", position)
		}
		if err := h.stop(); err == nil {
			t.Error("Run returned nil after the leadership ended")
		}
	})
}

// TestDrainEndsWithItsContext: a command that does not finish leaves Drain
// at the end of its context, and the dispatcher still halts cleanly.
func TestDrainEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dev := newBlockingDevice()
		h := newHarness(t, nil, map[string]Device{"valve": dev})
		h.start(t.Context())
		go func() { _, _ = h.d.Submit(context.Background(), newCommand("stuck", "valve", time.Hour)) }()
		<-dev.started
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		if err := h.d.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Drain: %v, want the deadline", err)
		}
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("Drain took %v, want its 3s bound", took)
		}
		_ = h.stop()
	})
}
