// Package dispatchtest checks a dispatch.Device against the contract of the
// package doc's "Writing a Device" section, in the manner of testing/slogtest:
// a device package calls [Run] from its own tests, with a [Target] that
// points the suite at a working instance of the hardware or a simulator.
//
// The suite calls the device as the dispatcher does: through DispatchUnder,
// under [TestTerm], when the device implements dispatch.AuthorityDevice, and
// through Dispatch otherwise. It checks that:
//   - a command the target accepts succeeds, and the target receives the
//     fencing token that the call was given;
//   - a context that is cancelled before the call makes Dispatch fail without
//     acting, and one that is cancelled during a stalled call, as the
//     dispatcher cancels it at the end of the leadership's freshness (no
//     deadline, cause dispatch.ErrFreshnessExpired), makes it return within
//     the cancel bound;
//   - an unreachable target gives an error marked dispatch.Retryable, a
//     command the device refuses gives one marked dispatch.Rejected, and no
//     error is marked both.
package dispatchtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// DefaultCancelBound is the default time within which Dispatch must return
// after its context is cancelled. The dispatcher cancels every dispatch the
// instant its leadership ends, and its halt waits for the calls to return.
const DefaultCancelBound = 500 * time.Millisecond

// Target describes the device under test and the environment around it.
// Every field but CancelBound is required.
type Target struct {
	// Device is the device under test, connected to a working target.
	Device dispatch.Device

	// Command returns a command with this ID that the device acts on
	// successfully.
	Command func(id string) dispatch.Command

	// Delivered reports the token that the target received with the command
	// of this ID, and false when the command did not reach it.
	Delivered func(id string) (coordination.FencingToken, bool)

	// Stall makes the target stop answering, so that a Dispatch blocks until
	// its context ends, and returns a function that makes it answer again.
	Stall func() (resume func())

	// Unreachable is a second device of the same kind whose target refuses
	// the connection, so that it certainly cannot act.
	Unreachable dispatch.Device

	// Invalid returns a command with this ID that the device refuses
	// without acting, such as one with an unknown action.
	Invalid func(id string) dispatch.Command

	// CancelBound overrides DefaultCancelBound.
	CancelBound time.Duration
}

// check is one rule of the contract.
type check struct {
	name string
	run  func(ctx context.Context, target Target) error
}

var checks = []check{
	{"Succeeds", checkSucceeds},
	{"TokenDelivered", checkTokenDelivered},
	{"CancelledBeforeCall", checkCancelledBefore},
	{"CancelHonoured", checkCancelHonoured},
	{"UnreachableIsRetryable", checkUnreachable},
	{"RefusalIsRejected", checkInvalid},
}

// Run runs every check of the contract as a subtest of t.
func Run(t *testing.T, target Target) {
	t.Helper()
	if err := target.validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(t.Context(), target); err != nil {
				t.Error(err)
			}
		})
	}
}

// Failure is one check of the contract that a device failed.
type Failure struct {
	// Check names the check, as the subtest of Run does.
	Check string

	// Err says what went wrong.
	Err error
}

func (f Failure) Error() string { return f.Check + ": " + f.Err.Error() }

// Check runs every check of the contract and returns the failures, in the
// order of the checks; none when the device keeps the contract. A target
// that lacks a required field fails the check "Target".
func Check(ctx context.Context, target Target) []Failure {
	if err := target.validate(); err != nil {
		return []Failure{{Check: "Target", Err: err}}
	}
	var failures []Failure
	for _, c := range checks {
		if err := c.run(ctx, target); err != nil {
			failures = append(failures, Failure{Check: c.name, Err: err})
		}
	}
	return failures
}

func (t Target) validate() error {
	var missing []string
	if t.Device == nil {
		missing = append(missing, "Device")
	}
	if t.Command == nil {
		missing = append(missing, "Command")
	}
	if t.Delivered == nil {
		missing = append(missing, "Delivered")
	}
	if t.Stall == nil {
		missing = append(missing, "Stall")
	}
	if t.Unreachable == nil {
		missing = append(missing, "Unreachable")
	}
	if t.Invalid == nil {
		missing = append(missing, "Invalid")
	}
	if len(missing) > 0 {
		return fmt.Errorf("dispatchtest: the target lacks %v", missing)
	}
	return nil
}

func (t Target) cancelBound() time.Duration {
	if t.CancelBound > 0 {
		return t.CancelBound
	}
	return DefaultCancelBound
}

var sequence atomic.Int64

// nextID returns a command ID unique in the process.
func nextID(what string) string {
	return "dispatchtest-" + what + "-" + strconv.FormatInt(sequence.Add(1), 10)
}

// testToken is a token no real cluster starts with, so a device that sends a
// constant is caught.
// TestTerm is the term under which the suite calls DispatchUnder of a device
// that implements dispatch.AuthorityDevice. A fencing target admits it: no
// other term precedes it in the suite.
const TestTerm coordination.Term = 4242

// call dispatches cmd to device as the dispatcher would: under TestTerm when
// the device receives terms, with the token alone otherwise.
func call(ctx context.Context, device dispatch.Device, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	if d, ok := device.(dispatch.AuthorityDevice); ok {
		return d.DispatchUnder(ctx, cmd, coordination.Authority{Term: TestTerm, Token: token})
	}
	return device.Dispatch(ctx, cmd, token)
}

func testToken() coordination.FencingToken {
	t, _ := coordination.NewFencingToken(4242+sequence.Add(1), 7)
	return t
}

// fill completes the fields the dispatcher would fill in.
func fill(cmd dispatch.Command, bound time.Duration) dispatch.Command {
	if cmd.SubmittedAt.IsZero() {
		cmd.SubmittedAt = time.Now()
	}
	if cmd.Deadline.IsZero() {
		cmd.Deadline = cmd.SubmittedAt.Add(10 * bound)
	}
	return cmd
}

func classify(err error) error {
	if dispatch.IsRetryable(err) && dispatch.IsRejected(err) {
		return fmt.Errorf("the error is marked both retryable and rejected: %w", err)
	}
	return nil
}

func checkSucceeds(ctx context.Context, target Target) error {
	cmd := fill(target.Command(nextID("succeeds")), target.cancelBound())
	ctx, cancel := context.WithDeadline(ctx, cmd.Deadline)
	defer cancel()
	if _, err := call(ctx, target.Device, cmd, testToken()); err != nil {
		return fmt.Errorf("dispatch of a valid command: %w", err)
	}
	return nil
}

func checkTokenDelivered(ctx context.Context, target Target) error {
	cmd := fill(target.Command(nextID("token")), target.cancelBound())
	token := testToken()
	ctx, cancel := context.WithDeadline(ctx, cmd.Deadline)
	defer cancel()
	if _, err := call(ctx, target.Device, cmd, token); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	got, ok := target.Delivered(cmd.ID)
	switch {
	case !ok:
		return fmt.Errorf("command %s did not reach the target", cmd.ID)
	case got != token:
		return fmt.Errorf("the target received token %s, Dispatch was given %s", got, token)
	}
	return nil
}

func checkCancelledBefore(ctx context.Context, target Target) error {
	cmd := fill(target.Command(nextID("cancelled")), target.cancelBound())
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := dispatchWithin(ctx, target, cmd, target.cancelBound())
	if err == nil {
		return errors.New("dispatch with a cancelled context succeeded; it must not act")
	}
	if errors.Is(err, errTooSlow) {
		return err
	}
	if _, ok := target.Delivered(cmd.ID); ok {
		return errors.New("the command reached the target although the context was cancelled before the call")
	}
	return classify(err)
}

func checkCancelHonoured(ctx context.Context, target Target) error {
	resume := target.Stall()
	defer resume()
	cmd := fill(target.Command(nextID("stalled")), target.cancelBound())
	// The dispatcher ends a call this way when the leadership's freshness
	// runs out: no deadline, only a cancel with a cause.
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(dispatch.ErrFreshnessExpired) }
	type answer struct {
		err error
		at  time.Time
	}
	done := make(chan answer, 1)
	go func() {
		_, err := call(ctx, target.Device, cmd, testToken())
		done <- answer{err, time.Now()}
	}()
	select {
	case a := <-done:
		cancel()
		return fmt.Errorf("dispatch returned (%v) while the target was stalled", a.err)
	case <-time.After(target.cancelBound()):
	}
	cancelled := time.Now()
	cancel()
	select {
	case a := <-done:
		if a.err == nil {
			return errors.New("dispatch reported success for a stalled call that was cancelled")
		}
		if took := a.at.Sub(cancelled); took > target.cancelBound() {
			return fmt.Errorf("dispatch returned %v after the cancel, above %v", took, target.cancelBound())
		}
		return classify(a.err)
	case <-time.After(target.cancelBound()):
		return fmt.Errorf("dispatch did not return within %v of the cancel", target.cancelBound())
	}
}

func checkUnreachable(ctx context.Context, target Target) error {
	cmd := fill(target.Command(nextID("unreachable")), target.cancelBound())
	ctx, cancel := context.WithDeadline(ctx, cmd.Deadline)
	defer cancel()
	_, err := call(ctx, target.Unreachable, cmd, testToken())
	switch {
	case err == nil:
		return errors.New("dispatch to an unreachable target succeeded")
	case !dispatch.IsRetryable(err):
		return fmt.Errorf("the error of an unreachable target is not marked retryable: %w", err)
	}
	return classify(err)
}

func checkInvalid(ctx context.Context, target Target) error {
	cmd := fill(target.Invalid(nextID("invalid")), target.cancelBound())
	ctx, cancel := context.WithDeadline(ctx, cmd.Deadline)
	defer cancel()
	_, err := call(ctx, target.Device, cmd, testToken())
	switch {
	case err == nil:
		return errors.New("dispatch of a command the device must refuse succeeded")
	case !dispatch.IsRejected(err):
		return fmt.Errorf("the refusal is not marked rejected: %w", err)
	}
	if _, ok := target.Delivered(cmd.ID); ok {
		return errors.New("a refused command reached the target")
	}
	return classify(err)
}

var errTooSlow = errors.New("dispatch did not return within the cancel bound")

// dispatchWithin calls Dispatch and gives up waiting after bound.
func dispatchWithin(ctx context.Context, target Target, cmd dispatch.Command, bound time.Duration) (dispatch.Result, error) {
	type answer struct {
		result dispatch.Result
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := call(ctx, target.Device, cmd, testToken())
		done <- answer{r, err}
	}()
	select {
	case a := <-done:
		return a.result, a.err
	case <-time.After(bound):
		return dispatch.Result{}, errTooSlow
	}
}
