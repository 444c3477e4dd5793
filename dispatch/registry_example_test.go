package dispatch_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// valve is a device that opens and closes a valve. It refuses any token
// below one it has seen, so a deposed leader cannot move it.
type valve struct {
	fence dispatch.TokenFence
	open  bool
}

func (v *valve) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	if err := ctx.Err(); err != nil {
		return dispatch.Result{}, dispatch.Retryable(err) // nothing was done
	}
	if err := v.fence.Admit(token); err != nil {
		return dispatch.Result{}, err // marked rejected
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

func ExampleTokenFence() {
	v := &valve{}
	newer, _ := coordination.NewFencingToken(12, 3)
	older, _ := coordination.NewFencingToken(12, 2)

	res, err := v.Dispatch(context.Background(), dispatch.Command{ID: "c1", Action: "open"}, newer)
	fmt.Println(res.Detail, err)

	// A deposed leader wakes in the zombie window and tries to close it.
	_, err = v.Dispatch(context.Background(), dispatch.Command{ID: "c0", Action: "close"}, older)
	fmt.Println(dispatch.IsRejected(err), v.open)
	fmt.Println(err)
	// Output:
	// opened <nil>
	// true true
	// dispatch: token 12:2 is below 12:3, already seen: a newer leader holds the role
}
