package dispatch

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// slowFirst makes the first transaction that w sees take d.
func slowFirst(w *writeTimes, d time.Duration) {
	w.hold = func(n int) {
		if n == 0 {
			time.Sleep(d)
		}
	}
}

func TestCommitGapAfterCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const gap = 5 * time.Millisecond
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": gatedDevice(t, log)}, WithCommitGap(gap))
		var w writeTimes
		slowFirst(&w, 10*time.Millisecond)
		w.start(t, h)

		start := time.Now()
		go h.d.Submit(t.Context(), newCommand("first", "valve", 2*time.Hour))
		synctest.Wait()
		time.Sleep(time.Millisecond) // queues while the first commits
		go h.d.Submit(t.Context(), newCommand("second", "valve", 2*time.Hour))
		time.Sleep(time.Second)
		starts, kinds := w.get()
		if len(starts) != 2 {
			t.Fatalf("%d transactions, want 2", len(starts))
		}
		// The first started at once (no transaction before it) and ended
		// after 10ms; the second waits the gap after that.
		if starts[0] != start {
			t.Errorf("first transaction at %v, want at once", starts[0].Sub(start))
		}
		if got, want := starts[1].Sub(start), 10*time.Millisecond+gap; got != want || kinds[1][EntryIssued] != 1 {
			t.Errorf("second transaction at %v with %v, want at %v with the second command", got, kinds[1], want)
		}
		h.stop()
	})
}

func TestCommitGapOverlapsLinger(t *testing.T) {
	cases := []struct {
		name        string
		linger, gap time.Duration
		queueAfter  time.Duration // after the first transaction ended
		want        time.Duration // start of the second, after the first ended
	}{
		{"gap ends later", 3 * time.Millisecond, 5 * time.Millisecond, time.Millisecond, 5 * time.Millisecond},
		{"linger ends later", 3 * time.Millisecond, 5 * time.Millisecond, 4 * time.Millisecond, 7 * time.Millisecond},
		{"queued before the end", 3 * time.Millisecond, 5 * time.Millisecond, -2 * time.Millisecond, 5 * time.Millisecond},
		{"no gap", 3 * time.Millisecond, 0, time.Millisecond, 4 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const first = 10 * time.Millisecond
				log := &leaderLog{}
				h := newHarness(t, log, map[string]Device{"valve": gatedDevice(t, log)}, WithCommitLinger(tc.linger), WithCommitGap(tc.gap))
				var w writeTimes
				slowFirst(&w, first)
				w.start(t, h)

				start := time.Now()
				go h.d.Submit(t.Context(), newCommand("first", "valve", 2*time.Hour))
				// The first lingers, then commits for 10ms.
				ended := start.Add(tc.linger + first)
				time.Sleep(time.Until(ended.Add(tc.queueAfter)))
				go h.d.Submit(t.Context(), newCommand("second", "valve", 2*time.Hour))
				time.Sleep(time.Second)
				starts, _ := w.get()
				if len(starts) != 2 {
					t.Fatalf("%d transactions, want 2", len(starts))
				}
				if got := starts[1].Sub(ended); got != tc.want {
					t.Errorf("second transaction %v after the first ended, want %v", got, tc.want)
				}
				h.stop()
			})
		})
	}
}

func TestCommitGapSkippedWhenQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": gatedDevice(t, log)}, WithCommitGap(time.Hour), WithMaxQueued(2))
		var w writeTimes
		slowFirst(&w, 10*time.Millisecond)
		w.start(t, h)

		go h.d.Submit(t.Context(), newCommand("first", "valve", 2*time.Hour))
		synctest.Wait()
		// Two more fill the queue while the first commits, and a third waits
		// for room.
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() { h.d.Submit(t.Context(), newCommand(fmt.Sprintf("c%d", i), "valve", 2*time.Hour)) })
		}
		synctest.Wait()
		ended := time.Now().Add(10 * time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		starts, _ := w.get()
		if len(starts) < 2 {
			t.Fatalf("%d transactions, want the full queue's after the first", len(starts))
		}
		if starts[1] != ended {
			t.Errorf("the full queue's transaction started %v after the first ended, want at once", starts[1].Sub(ended))
		}
		h.stop()
	})
}

func TestWithCommitGap(t *testing.T) {
	if _, err := newConfig([]Option{WithCommitGap(-time.Millisecond)}); err == nil {
		t.Error("a negative gap was accepted")
	}
	c, err := newConfig([]Option{WithCommitGap(0)})
	if err != nil || c.commitGap != 0 {
		t.Errorf("zero gap: %v, %v", c, err)
	}
	if c, err := newConfig(nil); err != nil || c.commitGap != DefaultCommitGap || DefaultCommitGap <= 0 {
		t.Errorf("default gap %v (%v), want DefaultCommitGap %v", c.commitGap, err, DefaultCommitGap)
	}
}
