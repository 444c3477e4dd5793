package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrFreshnessExpired is the cause with which the context of a
// [Device.Dispatch] call ends when the leadership's freshness runs out during
// the call: the lease has no more than the safety margin left, and no renewal
// committed that moved its end. A device that returns context.Cause(ctx)
// wrapped in its error carries it into the outcome. The call may have acted,
// so the outcome is in doubt unless the device marks its error [Retryable] or
// [Rejected]; the dispatcher drives no device again until a renewal commits.
var ErrFreshnessExpired = errors.New("dispatch: the leadership's freshness ran out during the device call: no renewal committed, and the lease had no more than the safety margin left")

// freshness is the guard of the zombie window (see the package doc): no
// device is driven unless the leader's own lease has more than the safety
// margin left, measured on the monotonic clock, and no device call outlives
// that freshness. A stale lease is renewed first; a renewal that the broker
// fences ends the leadership, and with it the dispatcher.
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

// bound returns a context derived from parent that also ends, with cause
// [ErrFreshnessExpired], at the end of the leader's freshness: the instant
// ValidFor falls to the margin. A renewal that commits before that instant
// moves it forward. The caller must call the watch's release when the call
// that ctx bounds returns.
//
// No goroutine waits on the way: a timer is armed at the freshness end, and
// when it fires it reads ValidFor again and either arms itself for the
// extent that a renewal added or cancels ctx.
func (f *freshness) bound(parent context.Context) (context.Context, *freshWatch) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &freshWatch{f: f, cancel: cancel}
	left := f.leader.ValidFor() - f.margin
	if left <= 0 {
		// The lease went stale since the check before the call.
		cancel(ErrFreshnessExpired)
		return ctx, w
	}
	w.mu.Lock()
	w.armed.Add(1)
	w.timer = time.AfterFunc(left, w.fire)
	w.mu.Unlock()
	return ctx, w
}

// freshWatch ends one device call's context at the end of the leader's
// freshness. Its timer callback is its only goroutine, and release waits for
// it.
type freshWatch struct {
	f      *freshness
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	timer    *time.Timer
	released bool
	// armed counts the timer's pending or running callbacks: one is added
	// before each arming and taken away when that callback returns, or when
	// release disarms the timer before it fires.
	armed sync.WaitGroup
}

// fire runs when the timer reaches the freshness end it was armed for.
func (w *freshWatch) fire() {
	defer w.armed.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released {
		return
	}
	if left := w.f.leader.ValidFor() - w.f.margin; left > 0 {
		// A renewal committed since the timer was armed.
		w.armed.Add(1)
		w.timer.Reset(left)
		return
	}
	w.cancel(ErrFreshnessExpired)
}

// release stops the watch, waits for a callback that is running, and cancels
// the context. It is called once, after the bounded call returned.
func (w *freshWatch) release() {
	w.mu.Lock()
	w.released = true
	if w.timer != nil && w.timer.Stop() {
		w.armed.Done()
	}
	w.mu.Unlock()
	w.armed.Wait()
	w.cancel(context.Canceled)
}
