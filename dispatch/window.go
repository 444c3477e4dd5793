package dispatch

import (
	"errors"
	"fmt"
	"time"
)

// ErrOutsideDedupWindow reports a command whose SubmittedAt is older than
// the dedup window ([WithDedupWindow]) and whose ID the dispatcher does not
// hold: it may repeat a command whose ID has left the window, so it is
// refused and never dispatched. Submit returns an *[OutsideWindowError]
// that wraps it; a request from the requests topic is recorded as rejected
// with its message.
var ErrOutsideDedupWindow = errors.New("dispatch: the command was submitted before the dedup window, so it cannot be told from a duplicate")

// OutsideWindowError is the error of a command refused by the dedup window.
// It wraps [ErrOutsideDedupWindow].
type OutsideWindowError struct {
	// CommandID names the command.
	CommandID string

	// SubmittedAt is the command's SubmittedAt; Now is when it was refused.
	SubmittedAt, Now time.Time

	// Window is the dedup window.
	Window time.Duration
}

// Error names the command, its age and the window.
func (e *OutsideWindowError) Error() string {
	return fmt.Sprintf("dispatch: command %q was submitted %s ago, before the dedup window of %s: %v",
		e.CommandID, e.Now.Sub(e.SubmittedAt).Round(time.Millisecond), e.Window, ErrOutsideDedupWindow)
}

// Unwrap returns [ErrOutsideDedupWindow].
func (e *OutsideWindowError) Unwrap() error { return ErrOutsideDedupWindow }
