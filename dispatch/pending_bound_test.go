package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// heldDevice is a device that holds every call until open closes.
func heldDevice(t *testing.T, log *leaderLog, open <-chan struct{}) *recordingDevice {
	return &recordingDevice{log: log, t: t, respond: func(ctx context.Context, _ Command, _ int) (Result, error) {
		select {
		case <-open:
			return Result{}, nil
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}}
}

func TestMaxPendingHoldsNewSubmits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		open := make(chan struct{})
		dev := heldDevice(t, log, open)
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithMaxPending(2))
		h.start(t.Context())
		synctest.Wait()

		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() { h.d.Submit(t.Context(), newCommand(fmt.Sprintf("c%d", i), "valve", time.Hour)) })
		}
		synctest.Wait()

		// A third command waits for room: with a deadline, Submit gives up
		// and records nothing.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := h.d.Submit(ctx, newCommand("waits", "valve", time.Hour))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("third Submit at the bound: %v, want the context's deadline", err)
		}
		if _, ok := log.issued(t, "waits"); ok {
			t.Error("a command past the pending bound was issued")
		}

		// A command the dispatcher holds does not wait: it is not new.
		ctx, cancel = context.WithTimeout(t.Context(), time.Second)
		_, err = h.d.Submit(ctx, newCommand("c0", "valve", time.Hour))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("resubmitting a pending command: %v, want it to wait for its outcome", err)
		}

		// Once the device answers, the pending commands settle and a new
		// one goes through.
		after := make(chan Outcome, 1)
		wg.Go(func() {
			out, _ := h.d.Submit(t.Context(), newCommand("after", "valve", time.Hour))
			after <- out
		})
		synctest.Wait()
		if _, ok := log.issued(t, "after"); ok {
			t.Error("a new command was issued while the bound was reached")
		}
		close(open)
		wg.Wait()
		if out := <-after; out.Status != StatusSucceeded {
			t.Errorf("the command that waited for room: %+v, want it to succeed", out)
		}
		h.stop()
	})
}

func TestMaxPendingStopsIntake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		open := make(chan struct{})
		dev := heldDevice(t, log, open)
		reqs := newFakeRequests()
		for i := range 10 {
			reqs.add(t, mustEncodeRequest(t, newCommand(fmt.Sprintf("r%d", i), "valve", time.Hour)))
		}
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithRequestSource(reqs), WithMaxPending(3))
		h.start(t.Context())
		synctest.Wait()

		issued := func() int {
			n := 0
			for i := range 10 {
				if _, ok := log.issued(t, fmt.Sprintf("r%d", i)); ok {
					n++
				}
			}
			return n
		}
		if n := issued(); n != 3 {
			t.Fatalf("%d requests issued while the device holds every call, want the bound of 3", n)
		}
		if got := h.d.commits.intakePosition(); got != 3 {
			t.Errorf("committed intake position %d, want 3: the rest stays in the topic", got)
		}
		close(open)
		synctest.Wait()
		if n := issued(); n != 10 {
			t.Errorf("%d requests issued once the device answers, want all 10", n)
		}
		h.stop()
	})
}

func TestMaxPendingHaltReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := gatedDevice(t, log)
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithMaxPending(1))
		h.start(t.Context())
		synctest.Wait()
		go h.d.Submit(t.Context(), newCommand("first", "valve", time.Hour))
		synctest.Wait()
		done := make(chan error, 1)
		go func() {
			_, err := h.d.Submit(t.Context(), newCommand("second", "valve", time.Hour))
			done <- err
		}()
		synctest.Wait()
		h.stop()
		if err := <-done; !errors.Is(err, ErrHalted) {
			t.Errorf("a Submit waiting for room when the dispatcher halted: %v, want ErrHalted", err)
		}
	})
}

func TestWithMaxPending(t *testing.T) {
	if _, err := newConfig([]Option{WithMaxPending(0)}); err == nil {
		t.Error("a bound of 0 was accepted")
	}
	if c, err := newConfig(nil); err != nil || c.maxPending != DefaultMaxPending {
		t.Errorf("default bound %d (%v), want DefaultMaxPending", c.maxPending, err)
	}
}

func TestMaxPendingWaitEndsWhenIntakeStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		open := make(chan struct{})
		dev := heldDevice(t, log, open)
		reqs := newFakeRequests()
		for i := range 3 {
			reqs.add(t, mustEncodeRequest(t, newCommand(fmt.Sprintf("r%d", i), "valve", time.Hour)))
		}
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithRequestSource(reqs), WithMaxPending(1))
		h.start(t.Context())
		synctest.Wait()
		submitted := make(chan error, 1)
		go func() {
			_, err := h.d.Submit(t.Context(), newCommand("waits", "valve", time.Hour))
			submitted <- err
		}()
		synctest.Wait()

		h.d.StopIntake()
		synctest.Wait()
		select {
		case err := <-submitted:
			if !errors.Is(err, ErrIntakeStopped) {
				t.Errorf("a Submit waiting for room when intake stopped: %v, want ErrIntakeStopped", err)
			}
		default:
			t.Fatal("a Submit waiting for room went on waiting after intake stopped")
		}
		close(open)
		synctest.Wait()
		for _, id := range []string{"waits", "r1", "r2"} {
			if _, ok := log.issued(t, id); ok {
				t.Errorf("%s was issued after intake stopped", id)
			}
		}
		if got := h.d.commits.intakePosition(); got != 1 {
			t.Errorf("committed intake position %d, want 1: the requests that waited are the next leader's", got)
		}
		h.stop()
	})
}
