package dispatch

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestOutcomesRideWithTheNextRound runs closed rounds, as a client that
// submits a burst, waits until the device acted on all of it, and after a
// pause submits the next: with the outcome linger, the outcomes of a round
// share the transaction of the next round's Issued records, one transaction
// a round; without it, they take one of their own, which the next round's
// Issued records wait behind.
func TestOutcomesRideWithTheNextRound(t *testing.T) {
	const (
		rounds = 5
		burst  = 10
		commit = 20 * time.Millisecond // one transaction
		pause  = 8 * time.Millisecond  // between the last act and the next burst
	)
	cases := []struct {
		name          string
		outcomeLinger time.Duration
		perRound      int // transactions per round, after the first
	}{
		{"outcome linger", DefaultOutcomeLinger, 1},
		{"outcome linger off", 0, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &leaderLog{}
				acted := make(chan string, rounds*burst)
				dev := &recordingDevice{log: log, t: t, respond: func(_ context.Context, cmd Command, _ int) (Result, error) {
					acted <- cmd.ID
					return Result{}, nil
				}}
				h := newHarness(t, log, map[string]Device{"valve": dev},
					WithCommitLinger(DefaultCommitLinger), WithCommitGap(DefaultCommitGap), WithOutcomeLinger(tc.outcomeLinger))
				var w writeTimes
				w.hold = func(int) { time.Sleep(commit) }
				w.start(t, h)

				for r := range rounds {
					submitRound(t, h, r, burst)
					for range burst {
						<-acted
					}
					time.Sleep(pause)
				}
				time.Sleep(time.Second)
				_, kinds := w.get()
				issuing, alone := 0, 0
				for _, k := range kinds {
					switch {
					case k[EntryIssued] > 0:
						issuing++
					case k[EntryOutcome] > 0:
						alone++
					}
				}
				if issuing != rounds {
					t.Errorf("%d transactions with Issued records for %d rounds, want one a round: %v", issuing, rounds, kinds)
				}
				// The first round's transaction holds no outcome, and the
				// last round's outcomes have no round after them.
				if want := 1 + (tc.perRound-1)*(rounds-1); alone != want {
					t.Errorf("%d transactions of outcomes alone, want %d: %v", alone, want, kinds)
				}
				if tc.perRound == 1 {
					for i, k := range kinds[1:rounds] {
						if k[EntryIssued] != burst || k[EntryOutcome] != burst {
							t.Errorf("transaction %d holds %v, want the Issued records of a round and the outcomes of the one before", i+1, k)
						}
					}
				}
				h.stop() // Verify: every outcome follows its Issued record
			})
		})
	}
}

// TestOutcomeRideShortensWhereNoCommandFollows runs a client that waits for
// the outcome of each command before it submits the next, as the latency
// section of the bench does: no command comes while its outcome rides, so
// the ride halves after each transaction of it alone, down to the commit
// gap. Then rounds with a pause between the last act of one and the next
// burst: the first round's outcomes leave alone after that short ride, the
// next burst queues behind them, and the ride is the outcome linger again,
// so that the outcomes of every later round ride with the next.
func TestOutcomeRideShortensWhereNoCommandFollows(t *testing.T) {
	const (
		cycles = 6
		rounds = 4
		burst  = 10
		commit = 20 * time.Millisecond // one transaction
		pause  = 8 * time.Millisecond  // between the last act and the next burst
	)
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		acted := make(chan time.Time, cycles+rounds*burst)
		settled := make(chan struct{}, cycles+rounds*burst)
		dev := &recordingDevice{log: log, t: t, respond: func(context.Context, Command, int) (Result, error) {
			acted <- time.Now()
			return Result{}, nil
		}}
		h := newHarness(t, log, map[string]Device{"valve": dev},
			WithCommitLinger(DefaultCommitLinger), WithCommitGap(DefaultCommitGap), WithOutcomeLinger(DefaultOutcomeLinger),
			WithOnCommitted(func(rs []CommittedRecord) {
				for _, r := range rs {
					if r.Kind == EntryOutcome {
						settled <- struct{}{}
					}
				}
			}))
		var w writeTimes
		w.hold = func(int) { time.Sleep(commit) }
		w.start(t, h)

		// The closed loop: how long each outcome waited, from its act to
		// the start of its transaction.
		var rides []time.Duration
		for i := range cycles {
			go func() {
				if _, err := h.d.Submit(t.Context(), newCommand(fmt.Sprintf("c%d", i), "valve", time.Hour)); err != nil {
					t.Error(err)
				}
			}()
			at := <-acted
			<-settled
			starts, _ := w.get()
			rides = append(rides, starts[len(starts)-1].Sub(at))
		}
		if rides[0] < DefaultOutcomeLinger {
			t.Errorf("the first outcome rode %v, want the outcome linger, %v: %v", rides[0], DefaultOutcomeLinger, rides)
		}
		for i := 1; i < len(rides); i++ {
			if rides[i] > max(rides[i-1]/2, DefaultCommitGap) {
				t.Errorf("outcome %d rode %v after %v, want at most half that or the commit gap: %v", i, rides[i], rides[i-1], rides)
			}
		}
		if last := rides[len(rides)-1]; last > DefaultCommitGap {
			t.Errorf("the last outcome rode %v, want the commit gap, %v: %v", last, DefaultCommitGap, rides)
		}

		// The rounds.
		_, before := w.get()
		for r := range rounds {
			submitRound(t, h, r, burst)
			for range burst {
				<-acted
			}
			time.Sleep(pause)
		}
		time.Sleep(time.Second)
		_, kinds := w.get()
		alone := 0
		for _, k := range kinds[len(before):] {
			if k[EntryIssued] == 0 && k[EntryOutcome] > 0 {
				alone++
			}
		}
		// The first round's outcomes, which ride the short ride, and the
		// last round's, with no round after them.
		if alone != 2 {
			t.Errorf("%d transactions of outcomes alone in %d rounds, want 2: %v", alone, rounds, kinds[len(before):])
		}
		h.stop()
	})
}

// submitRound submits round r of a closed-loop client: burst commands to
// the device "valve", each from a goroutine of its own, all at once.
func submitRound(t *testing.T, h *harness, r, burst int) {
	for i := range burst {
		go func() {
			if _, err := h.d.Submit(t.Context(), newCommand(fmt.Sprintf("r%d-%d", r, i), "valve", time.Hour)); err != nil {
				t.Error(err)
			}
		}()
	}
}
