package dispatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.uber.org/goleak"
)

// agingLeader is a fakeLeader whose lease ages on the clock, as the real
// leadership's does: ValidFor is the lease duration minus the time since the
// last committed renewal, and Renew commits a renewal now. Under synctest the
// clock is the bubble's.
type agingLeader struct {
	*fakeLeader
	lease time.Duration

	freshMu sync.Mutex
	freshAt time.Time
}

func newAgingLeader(f *fakeLeader, lease time.Duration) *agingLeader {
	return &agingLeader{fakeLeader: f, lease: lease, freshAt: time.Now()}
}

func (a *agingLeader) ValidFor() time.Duration {
	if a.fakeLeader.ValidFor() == 0 {
		return 0 // ended
	}
	a.freshMu.Lock()
	defer a.freshMu.Unlock()
	return max(0, a.lease-time.Since(a.freshAt))
}

func (a *agingLeader) Renew(ctx context.Context) error {
	a.fakeLeader.mu.Lock()
	a.fakeLeader.renews++
	err := a.fakeLeader.renewErr
	ended := a.fakeLeader.err != nil
	a.fakeLeader.mu.Unlock()
	if ended || err != nil {
		return errors.Join(err, errors.New("renewal failed"))
	}
	a.freshMu.Lock()
	a.freshAt = time.Now()
	a.freshMu.Unlock()
	return nil
}

// newAgingHarness is newHarness over an agingLeader with the given lease.
func newAgingHarness(t *testing.T, devices map[string]Device, lease time.Duration, options ...Option) (*harness, *agingLeader) {
	t.Helper()
	h := newHarness(t, nil, devices)
	aging := newAgingLeader(h.leader, lease)
	options = append([]Option{WithCommitLinger(0), WithCommitGap(0)}, options...)
	d, err := NewDispatcher(aging, h.registry, h.log, options...)
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	return h, aging
}

// ctxEnd is what a blocking device saw when its context ended.
type ctxEnd struct {
	at    time.Time
	cause error
}

// blockingDevice holds each call until its context ends or release closes,
// and reports the end of its context.
type blockingDevice struct {
	started chan struct{}
	release chan struct{}
	ended   chan ctxEnd
}

func newBlockingDevice() *blockingDevice {
	return &blockingDevice{started: make(chan struct{}, 1), release: make(chan struct{}), ended: make(chan ctxEnd, 1)}
}

func (b *blockingDevice) Dispatch(ctx context.Context, _ Command, _ coordination.FencingToken) (Result, error) {
	b.started <- struct{}{}
	select {
	case <-ctx.Done():
		b.ended <- ctxEnd{at: time.Now(), cause: context.Cause(ctx)}
		// The plain ctx error, as a careless device returns it: the
		// outcome must still say that the freshness ran out.
		return Result{}, ctx.Err()
	case <-b.release:
		return Result{Detail: "released"}, nil
	}
}

func TestDispatchContextEndsAtFreshnessEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dev := newBlockingDevice()
		const lease, margin = 10 * time.Second, 2 * time.Second
		h, _ := newAgingHarness(t, map[string]Device{"valve": dev}, lease, WithSafetyMargin(margin))
		h.start(t.Context())
		freshAt := time.Now() // the grant; no renewal follows
		out, err := h.d.Submit(t.Context(), newCommand("slow", "valve", time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		end := <-dev.ended
		if want := freshAt.Add(lease - margin); !end.at.Equal(want) {
			t.Errorf("the device's ctx ended %v after the grant, want %v: lease minus margin", end.at.Sub(freshAt), lease-margin)
		}
		if !errors.Is(end.cause, ErrFreshnessExpired) {
			t.Errorf("ctx cause %v, want ErrFreshnessExpired", end.cause)
		}
		// The device may have acted: in doubt, with a reason that names the
		// freshness although the device returned a bare context.Canceled.
		if out.Status != StatusInDoubt {
			t.Errorf("outcome %s (%s), want in doubt", out.Status, out.Reason)
		}
		if !strings.Contains(out.Reason, ErrFreshnessExpired.Error()) {
			t.Errorf("reason %q does not say the freshness ran out", out.Reason)
		}
		h.stop()
	})
}

func TestRenewalDuringCallMovesFreshnessEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dev := newBlockingDevice()
		const lease, margin = 10 * time.Second, 2 * time.Second
		h, leader := newAgingHarness(t, map[string]Device{"valve": dev}, lease, WithSafetyMargin(margin))
		h.start(t.Context())
		t0 := time.Now()
		outs := make(chan Outcome, 2)
		go func() {
			out, _ := h.d.Submit(t.Context(), newCommand("long", "valve", time.Hour))
			outs <- out
		}()
		<-dev.started
		// Renewals commit at 5s and 11s: the freshness end moves from 8s
		// to 13s, then to 19s, and the timer armed for 8s must follow.
		time.Sleep(5 * time.Second)
		if err := leader.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Second)
		if err := leader.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(19*time.Second - time.Since(t0) - time.Millisecond)
		synctest.Wait()
		select {
		case end := <-dev.ended:
			t.Fatalf("the call was cut at %v although renewals kept the lease fresh: %v", end.at.Sub(t0), end.cause)
		default:
		}
		end := <-dev.ended
		if got := end.at.Sub(t0); got != 19*time.Second {
			t.Errorf("the call was cut at %v, want 19s: the last renewal at 11s plus lease minus margin", got)
		}
		if !errors.Is(end.cause, ErrFreshnessExpired) {
			t.Errorf("ctx cause %v, want ErrFreshnessExpired", end.cause)
		}
		if out := <-outs; out.Status != StatusInDoubt {
			t.Errorf("outcome %+v, want in doubt", out)
		}

		// A call that returns while the lease stays fresh is not cut.
		go func() {
			out, _ := h.d.Submit(t.Context(), newCommand("short", "valve", time.Hour))
			outs <- out
		}()
		<-dev.started
		time.Sleep(time.Second)
		close(dev.release)
		if out := <-outs; out.Status != StatusSucceeded || strings.Contains(out.Reason, ErrFreshnessExpired.Error()) {
			t.Errorf("outcome %+v, want succeeded", out)
		}
		h.stop()
	})
}

func TestFreshnessBoundSharedAndStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := goleak.IgnoreCurrent()
		f := newFakeLeader(t, &leaderLog{}, fakeToken(t, 7, 0))
		leader := newAgingLeader(f, 10*time.Second)
		parent, halt := context.WithCancelCause(t.Context())
		fresh := newFreshness(parent, leader, 2*time.Second, time.Second)
		t0 := time.Now()

		// Calls of one stretch share its context, and a call's own end
		// (its child cancelled) leaves the stretch going.
		first := fresh.bound()
		time.Sleep(time.Second)
		child, cancel := context.WithCancel(fresh.bound())
		cancel()
		if second := fresh.bound(); second != first {
			t.Error("a second call in the same stretch got a context of its own")
		}
		if err := first.Err(); err != nil {
			t.Errorf("the stretch ended with a call's own end: %v", err)
		}
		if cause := context.Cause(child); errors.Is(cause, ErrFreshnessExpired) {
			t.Errorf("a call cancelled by its caller counts as cut: %v", cause)
		}

		// The stretch ends at lease minus margin, with the freshness cause.
		<-first.Done()
		if got := time.Since(t0); got != 8*time.Second {
			t.Errorf("the stretch ended %v after the grant, want 8s", got)
		}
		if cause := context.Cause(first); !errors.Is(cause, ErrFreshnessExpired) {
			t.Errorf("cause %v, want ErrFreshnessExpired", cause)
		}

		// Bound while the lease is within the margin: ended at once.
		if cause := context.Cause(fresh.bound()); !errors.Is(cause, ErrFreshnessExpired) {
			t.Errorf("bound on a stale lease: cause %v, want ErrFreshnessExpired", cause)
		}

		// After a renewal, a new stretch begins, and ends 8s later.
		if err := leader.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
		renewed := time.Now()
		next := fresh.bound()
		if next == first || next.Err() != nil {
			t.Fatalf("after a renewal: the old stretch's context, or an ended one (%v)", next.Err())
		}
		<-next.Done()
		if got := time.Since(renewed); got != 8*time.Second {
			t.Errorf("the renewed stretch ended %v after the renewal, want 8s", got)
		}

		// The parent's end passes through with the parent's cause, to the
		// stretch in progress and to a bound after it.
		leader.Renew(t.Context())
		live := fresh.bound()
		errHalt := errors.New("halted")
		halt(errHalt)
		if cause := context.Cause(live); !errors.Is(cause, errHalt) {
			t.Errorf("cause %v, want the parent's", cause)
		}
		if cause := context.Cause(fresh.bound()); !errors.Is(cause, errHalt) {
			t.Errorf("bound after the halt: cause %v, want the parent's", cause)
		}

		// Close stops the timer: nothing is left running.
		fresh.close()
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := goleak.Find(before); err != nil {
			t.Errorf("goroutines left after close: %v", err)
		}
	})
}

func TestFreshnessCloseEndsTheStretch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeader(t, &leaderLog{}, fakeToken(t, 7, 0))
		leader := newAgingLeader(f, 10*time.Second)
		fresh := newFreshness(t.Context(), leader, 2*time.Second, time.Second)
		ctx := fresh.bound()
		fresh.close()
		if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) || errors.Is(cause, ErrFreshnessExpired) {
			t.Errorf("cause after close %v, want context.Canceled", cause)
		}
		if ctx := fresh.bound(); ctx.Err() == nil {
			t.Error("bound after close returned a live context")
		}
	})
}
