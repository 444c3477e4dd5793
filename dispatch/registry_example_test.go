package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// valve is a device that opens and closes a valve. It receives the term
// beside the token and refuses a term below one it has admitted, so a deposed
// leader cannot move it.
type valve struct {
	fence *fence.Store
	open  bool
}

func (v *valve) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	return v.DispatchUnder(ctx, cmd, coordination.Authority{Token: token})
}

func (v *valve) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	if err := ctx.Err(); err != nil {
		return dispatch.Result{}, dispatch.Retryable(err) // nothing was done
	}
	if err := v.fence.Admit(cmd.Device, authority); err != nil {
		if errors.Is(err, fence.ErrStaleTerm) || errors.Is(err, fence.ErrNoTerm) {
			return dispatch.Result{}, dispatch.Rejected(err)
		}
		return dispatch.Result{}, dispatch.Retryable(err) // the state could not be kept
	}
	switch cmd.Action {
	case "open":
		v.open = true
	case "close":
		v.open = false
	default:
		return dispatch.Result{}, dispatch.Rejected(fmt.Errorf("unknown action %q", cmd.Action))
	}
	return dispatch.Result{Detail: cmd.Action + "ed"}, nil
}

func ExampleRegistry() {
	registry := dispatch.NewRegistry()
	fmt.Println(registry.Register("valve-1", &valve{}))

	var dup *dispatch.DuplicateDeviceError
	err := registry.Register("valve-1", &valve{})
	fmt.Println(errors.As(err, &dup), err)

	_, err = registry.Lookup("pump-7")
	fmt.Println(err)
	// Output:
	// <nil>
	// true dispatch: device "valve-1" is already registered
	// dispatch: no device is registered as "pump-7"
}

func ExampleAuthorityDevice() {
	dir, err := os.MkdirTemp("", "valve")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	store, err := fence.Open(filepath.Join(dir, "fence.json"))
	if err != nil {
		fmt.Println(err)
		return
	}
	v := &valve{fence: store}
	tok, _ := coordination.NewFencingToken(12, 3)
	rotated, _ := coordination.NewFencingToken(4, 0)
	current := coordination.Authority{Term: 812, Token: tok}

	res, err := v.DispatchUnder(context.Background(), dispatch.Command{ID: "c1", Device: "valve-1", Action: "open"}, current)
	fmt.Println(res.Detail, err)

	// The leader's producer id rotates to a lower one: the same term, so
	// the same leadership.
	res, err = v.DispatchUnder(context.Background(), dispatch.Command{ID: "c2", Device: "valve-1", Action: "open"},
		coordination.Authority{Term: 812, Token: rotated})
	fmt.Println(res.Detail, err)

	// A leader deposed before term 812 began wakes in the zombie window
	// and tries to close the valve, with a higher token.
	stale, _ := coordination.NewFencingToken(90, 7)
	_, err = v.DispatchUnder(context.Background(), dispatch.Command{ID: "c0", Device: "valve-1", Action: "close"},
		coordination.Authority{Term: 640, Token: stale})
	fmt.Println(dispatch.IsRejected(err), v.open)
	fmt.Println(err)
	// Output:
	// opened <nil>
	// opened <nil>
	// true true
	// fence: term 640 (token 90:7) for "valve-1" is below term 812, already admitted
}
