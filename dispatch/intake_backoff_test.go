package dispatch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// flakyRequests fails the reads that its plan marks, and passes the others
// to a fakeRequests. It records the instant of every read.
type flakyRequests struct {
	*fakeRequests
	plan []bool // plan[i]: the read i fails

	mu    sync.Mutex
	calls []time.Time
}

var errRequestsAway = errors.New("the requests partition is away")

func (f *flakyRequests) ReadRequests(ctx context.Context, tp coordination.TopicPartition, from int64) ([]RequestRecord, error) {
	f.mu.Lock()
	i := len(f.calls)
	f.calls = append(f.calls, time.Now())
	f.mu.Unlock()
	if i < len(f.plan) && f.plan[i] {
		return nil, errRequestsAway
	}
	return f.fakeRequests.ReadRequests(ctx, tp, from)
}

func (f *flakyRequests) gaps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(f.calls); i++ {
		gaps = append(gaps, f.calls[i].Sub(f.calls[i-1]))
	}
	return gaps
}

// TestIntakeRetriesFailedReadsWithADoublingWait checks that a failed read of
// the requests partition is tried again after a wait that starts at
// writeRetryBackoff and doubles up to the max retry backoff, and that a
// read that succeeds starts the waits over.
func TestIntakeRetriesFailedReadsWithADoublingWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reqs := &flakyRequests{
			fakeRequests: newFakeRequests(),
			// Five failures, a read that returns r0, two failures, then
			// a read that waits for more.
			plan: []bool{true, true, true, true, true, false, true, true, false},
		}
		dev := &recordingDevice{log: &leaderLog{}, t: t}
		reqs.add(t, mustEncodeRequest(t, newCommand("r0", "valve", time.Hour)))
		h := newHarness(t, dev.log, map[string]Device{"valve": dev}, WithRequestSource(reqs))
		h.start(t.Context())
		time.Sleep(10 * time.Second) // the bubble's clock: every wait has passed
		synctest.Wait()

		ms := time.Millisecond
		want := []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 0, 200 * ms, 400 * ms}
		got := reqs.gaps()
		if len(got) != len(want) {
			t.Fatalf("gaps between reads %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("gaps between reads %v, want %v", got, want)
				break
			}
		}
		if calls := dev.seen(); len(calls) != 1 || calls[0].id != "r0" {
			t.Errorf("device calls %+v, want r0 once", calls)
		}
		if err := h.stop(); !errors.Is(err, coordination.ErrNotHeld) {
			t.Errorf("Run = %v, want ErrNotHeld", err)
		}
	})
}
