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
					for i := range burst {
						go func() {
							if _, err := h.d.Submit(t.Context(), newCommand(fmt.Sprintf("r%d-%d", r, i), "valve", time.Hour)); err != nil {
								t.Error(err)
							}
						}()
					}
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
