package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// writeTimes records the instant each transaction of a fake leader starts to
// commit, and the records it carries.
type writeTimes struct {
	mu     sync.Mutex
	starts []time.Time
	kinds  []map[EntryKind]int
	hold   func(n int) // runs inside the n-th write, from 0
}

func (w *writeTimes) install(t *testing.T, h *harness) {
	h.leader.beforeWrite = func(records []coordination.GuardedRecord) error {
		kinds := map[EntryKind]int{}
		for _, r := range records {
			e, err := DecodeEntry(r.Key, r.Value)
			if err != nil {
				t.Error(err)
				continue
			}
			kinds[e.Kind]++
		}
		w.mu.Lock()
		n := len(w.starts)
		w.starts = append(w.starts, time.Now())
		w.kinds = append(w.kinds, kinds)
		hold := w.hold
		w.mu.Unlock()
		if hold != nil {
			hold(n)
		}
		return nil
	}
}

// start installs w on h, starts h, and waits until its dispatcher is idle.
func (w *writeTimes) start(t *testing.T, h *harness) {
	w.install(t, h)
	h.start(t.Context())
	synctest.Wait()
}

func (w *writeTimes) get() ([]time.Time, []map[EntryKind]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.starts), slices.Clone(w.kinds)
}

func TestCommitLingerGathersBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithCommitLinger(2*time.Millisecond))
		var w writeTimes
		w.start(t, h)

		// Three submitters arrive over 1.5ms, within the linger of the first.
		start := time.Now()
		var wg sync.WaitGroup
		for i, at := range []time.Duration{0, 500 * time.Microsecond, 1500 * time.Microsecond} {
			wg.Go(func() {
				time.Sleep(at)
				if _, err := h.d.Submit(t.Context(), newCommand(fmt.Sprintf("c%d", i), "valve", time.Minute)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		starts, kinds := w.get()
		if len(starts) == 0 {
			t.Fatal("no transaction")
		}
		if kinds[0][EntryIssued] != 3 {
			t.Errorf("the first transaction holds %d Issued records, want the whole burst of 3", kinds[0][EntryIssued])
		}
		if got := starts[0].Sub(start); got != 2*time.Millisecond {
			t.Errorf("the first transaction started %v after the first command, want the linger of 2ms", got)
		}
		// The three outcomes come in one transaction too.
		if len(starts) != 2 || kinds[1][EntryOutcome] != 3 {
			t.Errorf("transactions %v, want the burst's Issued records in one and its outcomes in the next", kinds)
		}
		h.stop()
	})
}

func TestCommitLingerLoneCommandWaitsAtMostLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const linger = 3 * time.Millisecond
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithCommitLinger(linger))
		var w writeTimes
		w.start(t, h)

		start := time.Now()
		out, err := h.d.Submit(t.Context(), newCommand("lone", "valve", time.Minute))
		if err != nil || out.Status != StatusSucceeded {
			t.Fatalf("Submit: %+v, %v", out, err)
		}
		// The fake leader commits at once and the device answers at once, so
		// all the command waits is one linger for its Issued record and one
		// for its outcome.
		if took := time.Since(start); took != 2*linger {
			t.Errorf("a lone command took %v, want two lingers of %v", took, linger)
		}
		starts, _ := w.get()
		if len(starts) != 2 || starts[0].Sub(start) != linger {
			t.Errorf("transactions started at %v after the submission, want the first at %v", starts, linger)
		}
		h.stop()
	})
}

// gatedDevice returns a device whose Dispatch waits until the test ends, so
// no outcome joins the transactions a test counts.
func gatedDevice(t *testing.T, log *leaderLog) Device {
	return &recordingDevice{log: log, t: t, respond: func(ctx context.Context, _ Command, _ int) (Result, error) {
		<-ctx.Done()
		return Result{}, ctx.Err()
	}}
}

func TestCommitLingerFullBatchDoesNotWait(t *testing.T) {
	cases := []struct {
		name    string
		options []Option
		submit  int
	}{
		{"record bound", []Option{WithMaxBatchRecords(3)}, 3},
		{"byte bound", []Option{WithMaxBatchBytes(1)}, 1},
		{"queue bound", []Option{WithMaxQueued(2)}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &leaderLog{}
				options := append([]Option{WithCommitLinger(time.Hour)}, tc.options...)
				h := newHarness(t, log, map[string]Device{"valve": gatedDevice(t, log)}, options...)
				var w writeTimes
				w.start(t, h)

				start := time.Now()
				for i := range tc.submit {
					go h.d.Submit(t.Context(), newCommand(fmt.Sprintf("c%d", i), "valve", 2*time.Hour))
					synctest.Wait() // one at a time: the batch fills up while it lingers
				}
				starts, kinds := w.get()
				if len(starts) != 1 {
					t.Fatalf("%d transactions of a full batch before the linger ended, want 1", len(starts))
				}
				if starts[0] != start || kinds[0][EntryIssued] != tc.submit {
					t.Errorf("transaction after %v with %d Issued records, want at once with %d", starts[0].Sub(start), kinds[0][EntryIssued], tc.submit)
				}
				h.stop()
			})
		})
	}
}

func TestCommitLingerRestOfFullBatchDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": gatedDevice(t, log)}, WithCommitLinger(time.Hour), WithMaxBatchRecords(2))
		release := make(chan struct{})
		var w writeTimes
		w.hold = func(n int) {
			if n == 0 {
				<-release
			}
		}
		w.start(t, h)

		submit := func(id string) {
			go h.d.Submit(t.Context(), newCommand(id, "valve", 2*time.Hour))
			synctest.Wait()
		}
		submit("a0")
		submit("a1") // a full batch: its transaction starts, and is held
		for _, id := range []string{"b0", "b1", "b2"} {
			submit(id)
		}
		start := time.Now()
		close(release)
		synctest.Wait()
		starts, kinds := w.get()
		// b0 and b1 fill a batch; b2 waited as long as they did and goes
		// right after them.
		if len(starts) != 3 {
			t.Fatalf("%d transactions, want 3", len(starts))
		}
		for i, want := range []int{2, 2, 1} {
			if kinds[i][EntryIssued] != want {
				t.Errorf("transaction %d has %d Issued records, want %d", i, kinds[i][EntryIssued], want)
			}
		}
		if starts[1] != start || starts[2] != start {
			t.Errorf("transactions after the held one started %v and %v later, want at once", starts[1].Sub(start), starts[2].Sub(start))
		}
		h.stop()
	})
}

func TestCommitLingerEndsAtHalt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithCommitLinger(time.Hour))
		h.start(t.Context())
		synctest.Wait()
		submitted := make(chan error, 1)
		go func() {
			_, err := h.d.Submit(t.Context(), newCommand("c", "valve", 2*time.Hour))
			submitted <- err
		}()
		synctest.Wait() // the command lingers
		start := time.Now()
		h.leader.end(fmt.Errorf("test over: %w", coordination.ErrNotHeld))
		err := <-h.runErr
		if took := time.Since(start); took != 0 {
			t.Errorf("the halt took %v during a linger", took)
		}
		h.runErr <- err
		if err := h.stop(); !errors.Is(err, coordination.ErrNotHeld) {
			t.Errorf("Run returned %v, want the leadership's error", err)
		}
		if err := <-submitted; !errors.Is(err, ErrHalted) {
			t.Errorf("Submit returned %v, want ErrHalted", err)
		}
		if n := h.leader.writeCount(); n != 0 {
			t.Errorf("%d transactions after the leadership ended", n)
		}
	})
}

func TestCommitLingerNoWaitAfterLongTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const linger = 2 * time.Millisecond
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithCommitLinger(linger))
		var w writeTimes
		w.hold = func(n int) {
			if n == 0 {
				time.Sleep(10 * time.Millisecond) // a slow commit
			}
		}
		w.start(t, h)

		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() { h.d.Submit(t.Context(), newCommand("first", "valve", time.Minute)) })
		wg.Go(func() {
			time.Sleep(5 * time.Millisecond) // queues while the first commits
			h.d.Submit(t.Context(), newCommand("second", "valve", time.Minute))
		})
		wg.Wait()
		starts, kinds := w.get()
		if len(starts) < 2 {
			t.Fatalf("%d transactions", len(starts))
		}
		// The first commits at linger+10ms; the second command queued more
		// than a linger before that and goes at once.
		if got, want := starts[1].Sub(start), linger+10*time.Millisecond; got != want || kinds[1][EntryIssued] != 1 {
			t.Errorf("second transaction at %v with %v, want at %v with the second command", got, kinds[1], want)
		}
		h.stop()
	})
}

func TestWithCommitLinger(t *testing.T) {
	if _, err := newConfig([]Option{WithCommitLinger(-time.Millisecond)}); err == nil {
		t.Error("a negative linger was accepted")
	}
	c, err := newConfig([]Option{WithCommitLinger(0)})
	if err != nil || c.commitLinger != 0 {
		t.Errorf("zero linger: %v, %v", c, err)
	}
	if c, err := newConfig(nil); err != nil || c.commitLinger != DefaultCommitLinger || DefaultCommitLinger <= 0 {
		t.Errorf("default linger %v (%v), want DefaultCommitLinger %v", c.commitLinger, err, DefaultCommitLinger)
	}
}
