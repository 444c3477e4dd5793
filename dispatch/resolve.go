package dispatch

import (
	"context"
	"fmt"
	"strconv"
)

// ResolveAction is what an operator decides for a command in doubt.
type ResolveAction int8

const (
	// ResolveRedispatch dispatches the command again, after a Redispatched
	// record with reason RedispatchOperator commits under the current token.
	// Choose it when the device certainly did not act, or acting twice is
	// harmless.
	ResolveRedispatch ResolveAction = 1

	// ResolveCancel closes the command with StatusCancelled without
	// dispatching it again.
	ResolveCancel ResolveAction = 2
)

// String names the action.
func (a ResolveAction) String() string {
	switch a {
	case ResolveRedispatch:
		return "redispatch"
	case ResolveCancel:
		return "cancel"
	}
	return "ResolveAction(" + strconv.Itoa(int(a)) + ")"
}

// UnknownCommandError reports a command ID that the role's log does not hold.
type UnknownCommandError struct {
	// ID is the command ID asked for.
	ID string
}

// Error names the command.
func (e *UnknownCommandError) Error() string {
	return fmt.Sprintf("dispatch: the log holds no command %q", e.ID)
}

// NotInDoubtError reports a resolve of a command that is not in doubt: it is
// pending, another resolve of it is under way (Status is then
// StatusPending), or a terminal outcome settled it (Status is that outcome's,
// and Settled reports true). Such a resolve writes nothing.
type NotInDoubtError struct {
	// ID is the command ID.
	ID string

	// Status is the command's status now.
	Status Status
}

// Settled reports whether the command is settled for good: a terminal
// outcome closed it, so no resolve of it is ever accepted.
func (e *NotInDoubtError) Settled() bool { return e.Status.Terminal() }

// Error names the command and its status.
func (e *NotInDoubtError) Error() string {
	return fmt.Sprintf("dispatch: command %q is %s, not in doubt", e.ID, e.Status)
}

// Resolve settles a command in doubt as an operator decides, and waits for
// the command's new outcome: StatusCancelled for [ResolveCancel], and the
// device's outcome for [ResolveRedispatch]. The decision is recorded in the
// log, under the current token, before anything is dispatched.
//
// It returns a *[UnknownCommandError] for an ID the log does not hold, a
// *[NotInDoubtError] for a command that is not in doubt (a settled one
// included: a command never gets a second terminal outcome), [ErrHalted]
// when the dispatcher halts first, a *[PanicError] when the dispatcher's own
// code panicked (it halts), and ctx's error when ctx ends first; the resolve
// then goes on without the caller.
func (d *Dispatcher) Resolve(ctx context.Context, id string, action ResolveAction) (Outcome, error) {
	if action != ResolveRedispatch && action != ResolveCancel {
		return Outcome{}, fmt.Errorf("dispatch: resolve %q: unknown action %s", id, action)
	}
	if err := d.awaitClosed(ctx, d.ready); err != nil {
		return Outcome{}, err
	}
	var c *command
	err := d.guard("Resolve", func() (err error) {
		c, err = d.startResolve(id, action)
		return err
	})
	err = d.compactResolveError(ctx, id, err)
	if err != nil {
		return Outcome{}, err
	}
	return d.await(ctx, c)
}

// startResolve queues the record of a resolve.
func (d *Dispatcher) startResolve(id string, action ResolveAction) (*command, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.halted {
		return nil, ErrHalted
	}
	c, ok := d.commands[id]
	if !ok {
		return nil, &UnknownCommandError{ID: id}
	}
	switch {
	case c.phase == phaseTerminal:
		// Settled for good: a second terminal outcome is never written.
		return nil, &NotInDoubtError{ID: id, Status: c.outcome.Status}
	case c.phase != phaseInDoubt || c.resolving:
		return nil, &NotInDoubtError{ID: id, Status: StatusPending}
	}
	switch action {
	case ResolveRedispatch:
		if err := d.redispatch(c, RedispatchOperator); err != nil {
			return nil, err
		}
	case ResolveCancel:
		it, err := d.outcomeItem(c, Outcome{Status: StatusCancelled, Attempt: max(c.attempt, FirstAttempt), Reason: "cancelled by an operator"})
		if err != nil {
			return nil, err
		}
		d.commits.enqueue(it)
	}
	c.resolving = true
	c.settled = make(chan struct{})
	return c, nil
}
