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
//
// The device calls of one stretch of freshness share one context, which
// ends at the stretch's end: a call costs no context or timer of its own for
// the freshness, which matters at thousands of calls a second.
type freshness struct {
	parent context.Context // the dispatcher's halt context
	leader Leader
	margin time.Duration
	pause  time.Duration // between two renewals that failed or did not help

	mu       sync.Mutex
	renewing chan struct{} // closed when the renewal in flight returns

	// cur is the context of the current stretch, nil before the first
	// call, after the stretch ended, and after close; cancel ends it.
	cur    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer // armed at the end of cur's stretch
	closed bool
	// armed counts the timer's pending or running callbacks: one is added
	// before each arming and taken away when that callback returns, or when
	// the timer is stopped before it fires.
	armed sync.WaitGroup
}

func newFreshness(parent context.Context, leader Leader, margin, pause time.Duration) *freshness {
	return &freshness{parent: parent, leader: leader, margin: margin, pause: pause}
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

// bound returns the context of a device call's freshness: derived from the
// parent, it also ends, with cause [ErrFreshnessExpired], at the end of the
// leader's freshness, the instant ValidFor falls to the margin. A renewal
// that commits before that instant moves it forward. Calls in the same
// stretch of freshness get the same context; the caller derives its own
// from it and cancels that, never this one.
//
// No goroutine waits on the way: a timer is armed at the freshness end, and
// when it fires it reads ValidFor again and either arms itself for the
// extent that a renewal added or ends the stretch.
func (f *freshness) bound() context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	left := f.leader.ValidFor() - f.margin
	if f.cur != nil && f.cur.Err() == nil {
		if left <= 0 {
			// The lease went stale before the timer fired.
			f.endLocked(ErrFreshnessExpired)
			return f.staleLocked()
		}
		return f.cur
	}
	f.endLocked(context.Canceled) // a stretch that the parent's end ended
	if left <= 0 || f.closed || f.parent.Err() != nil {
		// The lease went stale since the check before the call, or the
		// dispatcher halted.
		return f.staleLocked()
	}
	ctx, cancel := context.WithCancelCause(f.parent)
	f.cur, f.cancel = ctx, cancel
	f.armed.Add(1)
	f.timer = time.AfterFunc(left, func() { f.fire(ctx) })
	return ctx
}

// staleLocked returns a context that has already ended with cause
// [ErrFreshnessExpired], or with the parent's cause when the parent ended.
func (f *freshness) staleLocked() context.Context {
	ctx, cancel := context.WithCancelCause(f.parent)
	cancel(ErrFreshnessExpired)
	return ctx
}

// fire runs when the timer reaches the end of the stretch of ctx.
func (f *freshness) fire(ctx context.Context) {
	defer f.armed.Done()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != ctx {
		return // stopped too late to take back: that stretch is over
	}
	if left := f.leader.ValidFor() - f.margin; left > 0 {
		// A renewal committed since the timer was armed.
		f.armed.Add(1)
		f.timer.Reset(left)
		return
	}
	f.timer = nil
	f.endLocked(ErrFreshnessExpired)
}

// endLocked ends the current stretch with cause and disarms its timer.
func (f *freshness) endLocked(cause error) {
	f.disarmLocked()
	if f.cancel != nil {
		f.cancel(cause)
	}
	f.cur, f.cancel = nil, nil
}

// disarmLocked stops the timer; a callback that already started finds its
// stretch gone and returns.
func (f *freshness) disarmLocked() {
	if f.timer != nil && f.timer.Stop() {
		f.armed.Done()
	}
	f.timer = nil
}

// close ends the current stretch and waits for a timer callback that is
// running. The dispatcher calls it once every device call has returned;
// bound returns ended contexts after it.
func (f *freshness) close() {
	f.mu.Lock()
	f.closed = true
	f.endLocked(context.Canceled)
	f.mu.Unlock()
	f.armed.Wait()
}
