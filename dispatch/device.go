package dispatch

import (
	"context"
	"errors"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// Device drives one piece of hardware. It is the one interface a user
// implements to add a device type; the optional interfaces beside it add
// abilities, and the dispatcher asserts them where it needs them.
//
// The dispatcher never calls Dispatch concurrently for one device: it sends a
// device's commands one at a time, in log order.
type Device interface {
	// Dispatch drives the hardware. ctx ends the moment the leadership ends,
	// the command's deadline passes, or the leadership's freshness ends: the
	// instant its lease has no more than the safety margin left
	// ([WithSafetyMargin]), moved forward by each renewal that commits
	// during the call. context.Cause(ctx) is then [ErrFreshnessExpired]: the
	// leader may have been cut off from the cluster, and a successor may
	// take the role once the lease runs out. A cancelled ctx must abort the
	// device write as soon as the protocol allows, and every wait of the
	// device (for a connection, an acknowledgement, an answer) must end with
	// it.
	//
	// token is the fencing token under which the command's record committed.
	// A device that can carry it (an envelope field, a fence register) should,
	// so that the hardware itself can refuse a deposed leader.
	//
	// An error says whether a retry may help. Wrap it with [Retryable] only
	// when the device certainly did not act, and with [Rejected] when the
	// device certainly did not act and never will for this command. Any other
	// error leaves the command in doubt: the device may have acted.
	Dispatch(ctx context.Context, cmd Command, token coordination.FencingToken) (Result, error)
}

// AuthorityDevice is an optional interface that a Device may implement to
// receive the term of the leadership beside the token. The dispatcher calls
// DispatchUnder instead of Dispatch when the device implements it, with the
// same contract in every other respect.
//
// The term orders leaderships; the token does not always, because a token
// may rotate to a lower producer id within one leadership (see
// [coordination.Term]). A device that refuses commands of a deposed leader
// compares terms: it admits a term at least as high as the highest it has
// seen, and refuses a lower one. Without this interface a device receives
// only the token, which proves the record was the holder's but cannot order
// two leaderships across a rotation.
type AuthorityDevice interface {
	DispatchUnder(ctx context.Context, cmd Command, authority coordination.Authority) (Result, error)
}

// dispatchUnder calls DispatchUnder of a device that implements
// [AuthorityDevice], and Dispatch with the token otherwise.
func dispatchUnder(ctx context.Context, device Device, cmd Command, authority coordination.Authority) (Result, error) {
	if d, ok := device.(AuthorityDevice); ok {
		return d.DispatchUnder(ctx, cmd, authority)
	}
	return device.Dispatch(ctx, cmd, authority.Token)
}

// HealthChecker is an optional interface that a Device may implement.
// [Registry.CheckHealth] calls CheckHealth; [Dispatcher.Submit] refuses a
// command for a device whose last check failed. A device without it is
// reported healthy.
type HealthChecker interface {
	// CheckHealth reports whether the device is reachable now. It must
	// return by the time ctx ends.
	CheckHealth(ctx context.Context) error
}

// Redispatcher is an optional interface that a Device may implement. After a
// failover the new leader finds commands that were issued but have no
// outcome; it dispatches such a command again only when RedispatchSafe
// returns true for it, because the device deduplicates by command ID or the
// action is idempotent. A device without it gets none of them again: they are
// recorded in doubt for an operator.
type Redispatcher interface {
	RedispatchSafe(cmd Command) bool
}

// A Device may also implement io.Closer. The dispatcher's owner calls Close
// once, after the last Dispatch returned; Close must not block indefinitely.

// ErrRetryable marks a device error after which the device certainly did not
// act, and a later attempt may succeed: the connection was down, the unit did
// not answer a request that never reached it. Test for it with [IsRetryable].
var ErrRetryable = errors.New("retryable: the device did not act")

// ErrRejected marks a device error after which the device certainly did not
// act, and never will for this command: a malformed payload, an unknown
// action, a token lower than one the device has seen. Test for it with
// [IsRejected].
var ErrRejected = errors.New("rejected: the device refused the command")

// Retryable marks err as one after which the device certainly did not act. It
// returns nil for a nil err.
func Retryable(err error) error { return mark(err, ErrRetryable) }

// Rejected marks err as a refusal: the device did not act and will not. It
// returns nil for a nil err.
func Rejected(err error) error { return mark(err, ErrRejected) }

// IsRetryable reports whether a retry of the command may help, because the
// device certainly did not act.
func IsRetryable(err error) bool { return errors.Is(err, ErrRetryable) }

// IsRejected reports whether the device refused the command without acting.
func IsRejected(err error) bool { return errors.Is(err, ErrRejected) }

// markedError joins a device error with its class, keeping both for
// errors.Is and errors.As.
type markedError struct {
	err   error
	class error
}

func mark(err, class error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: class}
}

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.class} }
