package dispatchtest_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/dispatch/dispatchtest"
)

// hardware is an in-memory target: it records the token of each command it
// receives, and while stalled it answers nothing.
type hardware struct {
	mu       sync.Mutex
	received map[string]coordination.FencingToken
	stalled  chan struct{} // non-nil while stalled; closed on resume
}

func newHardware() *hardware {
	return &hardware{received: make(map[string]coordination.FencingToken)}
}

func (h *hardware) stall() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan struct{})
	h.stalled = ch
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.stalled == ch {
			close(ch)
			h.stalled = nil
		}
	}
}

func (h *hardware) delivered(id string) (coordination.FencingToken, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.received[id]
	return t, ok
}

// device is a configurable device over hardware; its zero flaws keep the
// contract.
type device struct {
	hw            *hardware
	unreachable   bool
	ignoreCancel  bool
	wrongToken    bool
	plainErrors   bool
	acceptInvalid bool
}

var errRefused = errors.New("connection refused")

func (d *device) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	if d.unreachable {
		if d.plainErrors {
			return dispatch.Result{}, errRefused
		}
		return dispatch.Result{}, dispatch.Retryable(errRefused)
	}
	if !d.ignoreCancel {
		if err := ctx.Err(); err != nil {
			return dispatch.Result{}, dispatch.Retryable(err)
		}
	}
	if cmd.Action != "set" && !d.acceptInvalid {
		return dispatch.Result{}, dispatch.Rejected(errors.New("unknown action " + cmd.Action))
	}
	d.hw.mu.Lock()
	stalled := d.hw.stalled
	if d.wrongToken {
		token, _ = coordination.NewFencingToken(1, 0)
	}
	d.hw.received[cmd.ID] = token
	d.hw.mu.Unlock()
	if stalled != nil {
		if d.ignoreCancel {
			<-stalled
		} else {
			select {
			case <-stalled:
			case <-ctx.Done():
				return dispatch.Result{}, ctx.Err()
			}
		}
	}
	return dispatch.Result{Detail: "ok"}, nil
}

func target(d *device) dispatchtest.Target {
	unreachable := *d
	unreachable.unreachable = true
	return dispatchtest.Target{
		Device:      d,
		Command:     func(id string) dispatch.Command { return dispatch.Command{ID: id, Device: "sim", Action: "set"} },
		Delivered:   d.hw.delivered,
		Stall:       d.hw.stall,
		Unreachable: &unreachable,
		Invalid:     func(id string) dispatch.Command { return dispatch.Command{ID: id, Device: "sim", Action: "explode"} },
	}
}

func TestRunPassesAConformingDevice(t *testing.T) {
	dispatchtest.Run(t, target(&device{hw: newHardware()}))
}

func TestCheckFindsEachFlaw(t *testing.T) {
	for _, tc := range []struct {
		flaw  func(*device)
		check string
	}{
		{func(d *device) { d.ignoreCancel = true }, "CancelHonoured"},
		{func(d *device) { d.wrongToken = true }, "TokenDelivered"},
		{func(d *device) { d.plainErrors = true }, "UnreachableIsRetryable"},
		{func(d *device) { d.acceptInvalid = true }, "RefusalIsRejected"},
	} {
		t.Run(tc.check, func(t *testing.T) {
			d := &device{hw: newHardware()}
			tc.flaw(d)
			failures := dispatchtest.Check(t.Context(), target(d))
			found := false
			for _, f := range failures {
				found = found || f.Check == tc.check
			}
			if !found {
				t.Errorf("Check returned %v, want a failure of %s", failures, tc.check)
			}
		})
	}
}

func TestCheckNamesMissingParts(t *testing.T) {
	if failures := dispatchtest.Check(t.Context(), dispatchtest.Target{}); len(failures) != 1 || failures[0].Check != "Target" {
		t.Errorf("an empty target gave %v", failures)
	}
}

// termDevice receives terms: it refuses any term but TestTerm, as a fencing
// device that has seen no other would refuse a call without one, and counts
// the calls that reached it through DispatchUnder.
type termDevice struct {
	*device
	mu    sync.Mutex
	under int
}

func (d *termDevice) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{}, dispatch.Rejected(errors.New("no term"))
}

func (d *termDevice) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	if authority.Term != dispatchtest.TestTerm {
		return dispatch.Result{}, dispatch.Rejected(errors.New("term " + authority.Term.String()))
	}
	d.mu.Lock()
	d.under++
	d.mu.Unlock()
	return d.device.Dispatch(ctx, cmd, authority.Token)
}

// TestRunCallsDispatchUnder checks that the suite calls a device that
// receives terms the way the dispatcher does, through DispatchUnder.
func TestRunCallsDispatchUnder(t *testing.T) {
	hw := newHardware()
	d := &termDevice{device: &device{hw: hw}}
	unreachable := &termDevice{device: &device{hw: hw, unreachable: true}}
	tg := target(d.device)
	tg.Device, tg.Unreachable = d, unreachable
	dispatchtest.Run(t, tg)
	if d.under == 0 {
		t.Fatal("no call reached DispatchUnder")
	}
}
