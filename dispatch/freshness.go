package dispatch

import (
	"context"
	"sync"
	"time"
)

// freshness is the guard of the zombie window (see the package doc): no
// device is driven unless the leader's own lease has more than the safety
// margin left, measured on the monotonic clock. A stale lease is renewed
// first; a renewal that the broker fences ends the leadership, and with it
// the dispatcher.
type freshness struct {
	leader Leader
	margin time.Duration
	pause  time.Duration // between two renewals that failed or did not help

	mu       sync.Mutex
	renewing chan struct{} // closed when the renewal in flight returns
}

func newFreshness(leader Leader, margin, pause time.Duration) *freshness {
	return &freshness{leader: leader, margin: margin, pause: pause}
}

// wait returns nil once the lease is fresh, or ctx's error. While the lease
// is stale it forces renewals, one at a time for all callers.
func (f *freshness) wait(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.leader.ValidFor() > f.margin {
			return nil
		}
		if err := f.renew(ctx); err != nil || f.leader.ValidFor() <= f.margin {
			// A failed renewal, or one that still leaves the lease below
			// the margin: pause, so a transient fault does not spin.
			select {
			case <-time.After(f.pause):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// renew forces one renewal, or waits for the one in flight.
func (f *freshness) renew(ctx context.Context) error {
	f.mu.Lock()
	if ch := f.renewing; ch != nil {
		f.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ch := make(chan struct{})
	f.renewing = ch
	f.mu.Unlock()

	err := f.leader.Renew(ctx)

	f.mu.Lock()
	f.renewing = nil
	f.mu.Unlock()
	close(ch)
	return err
}
