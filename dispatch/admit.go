package dispatch

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"
	"time"
)

// CommandValidator is an optional interface that a Device may implement to
// refuse, before anything is written, a command it could never carry out: an
// action it does not know, or a payload it cannot parse. [Dispatcher.Submit]
// and [Dispatcher.Check] call ValidateCommand for a new command ID before
// the command is recorded, and return its error wrapped in an
// *[UnsupportedCommandError]; a command from the requests topic that it
// refuses is recorded as rejected (the topic has no one to answer).
//
// ValidateCommand must not block or touch the hardware: it looks at the
// command alone, and may be called concurrently with itself and with
// Dispatch. A device without it accepts every action and payload at intake,
// and refuses a bad one when it is dispatched.
type CommandValidator interface {
	ValidateCommand(cmd Command) error
}

// UnsupportedCommandError reports a command that its device's
// [CommandValidator] refuses. Nothing was recorded.
type UnsupportedCommandError struct {
	// Device and Action are the command's.
	Device string
	Action string
	// Err is the device's reason.
	Err error
}

// Error names the device, the action and the device's reason.
func (e *UnsupportedCommandError) Error() string {
	return fmt.Sprintf("dispatch: device %q cannot carry out action %q: %v", e.Device, e.Action, e.Err)
}

// Unwrap returns the device's reason.
func (e *UnsupportedCommandError) Unwrap() error { return e.Err }

// IDConflictError reports a command whose ID the dispatcher already holds for
// a different command: an idempotency key reused for another request. The
// new command was not recorded, and the first one is unchanged. See
// [Command.SameAs] for what counts as the same command.
type IDConflictError struct {
	// ID is the command ID taken.
	ID string
	// Differs names the fields in which the new command differs from the
	// one recorded under ID, in the order of [Command.Differences].
	Differs []string
}

// Error names the ID and the fields that differ.
func (e *IDConflictError) Error() string {
	return fmt.Sprintf("dispatch: command ID %q is already taken by a different command (it differs in %s); use a new ID for a new command", e.ID, strings.Join(e.Differs, ", "))
}

// Field names that [Command.Differences] reports.
const (
	FieldRole       = "role"
	FieldDevice     = "device"
	FieldAction     = "action"
	FieldPayload    = "payload"
	FieldDeadline   = "deadline"
	FieldAttributes = "attributes"
)

// SameDeadlineTolerance is how far apart the times to live of two commands
// may be for [Command.SameAs] to count their deadlines the same: a
// submitter that retries with the same timeout computes each deadline
// from its own clock reading.
const SameDeadlineTolerance = time.Second

// SameAs reports whether c is the same command as o for the idempotency of
// its ID: the same Role, Device, Action, Payload (byte for byte) and
// Attributes (nil and empty alike), and the same deadline. Deadlines are the
// same when they are equal to the millisecond the command log keeps, or when
// their times to live (Deadline minus SubmittedAt) differ by less than
// [SameDeadlineTolerance], as a retry that passes the same timeout gives.
// SubmittedAt itself may differ, so a retry of a submission is the same
// command. Both commands are taken as the dispatcher completed them: an
// empty Role and a zero Deadline filled in.
func (c Command) SameAs(o Command) bool { return len(c.Differences(o)) == 0 }

// Differences names the fields in which c and o differ as [Command.SameAs]
// compares them, in the order role, device, action, payload, deadline,
// attributes; nil when they are the same command.
func (c Command) Differences(o Command) []string {
	var d []string
	if c.Role != o.Role {
		d = append(d, FieldRole)
	}
	if c.Device != o.Device {
		d = append(d, FieldDevice)
	}
	if c.Action != o.Action {
		d = append(d, FieldAction)
	}
	if !bytes.Equal(c.Payload, o.Payload) {
		d = append(d, FieldPayload)
	}
	ttl := c.Deadline.Sub(c.SubmittedAt) - o.Deadline.Sub(o.SubmittedAt)
	sameDeadline := c.Deadline.UnixMilli() == o.Deadline.UnixMilli() ||
		(ttl > -SameDeadlineTolerance && ttl < SameDeadlineTolerance)
	if !sameDeadline {
		d = append(d, FieldDeadline)
	}
	if len(c.Attributes) != 0 || len(o.Attributes) != 0 {
		if !maps.Equal(c.Attributes, o.Attributes) {
			d = append(d, FieldAttributes)
		}
	}
	return d
}

// conflict returns the *IDConflictError of cmd against c, the command the
// dispatcher holds under its ID, or nil when cmd repeats it. A command that
// was rejected at intake has no Issued record, so nothing to compare with
// after a takeover; it never conflicts.
func conflict(c *command, cmd Command) error {
	if !c.issued {
		return nil
	}
	if diff := cmd.Differences(c.cmd); len(diff) > 0 {
		return &IDConflictError{ID: cmd.ID, Differs: diff}
	}
	return nil
}

// validateFor returns the error of a command for a device: an
// *UnknownDeviceError when the registry lacks it, an
// *UnsupportedCommandError when its CommandValidator refuses the command.
func validateFor(registry *Registry, cmd Command) error {
	device, err := registry.Lookup(cmd.Device)
	if err != nil {
		return err
	}
	if v, ok := device.(CommandValidator); ok {
		if err := v.ValidateCommand(cmd); err != nil {
			return &UnsupportedCommandError{Device: cmd.Device, Action: cmd.Action, Err: err}
		}
	}
	return nil
}

// Check reports, without writing anything, whether [Dispatcher.Submit] would
// refuse cmd: the *[InvalidCommandError] of [Command.Validate], an
// *[IDConflictError] for an ID that the dispatcher holds for a different
// command, an *[UnknownDeviceError] for a device the registry lacks, or an
// *[UnsupportedCommandError] from the device's [CommandValidator]. A command
// that repeats one the dispatcher holds passes (Submit returns the first's
// outcome); a new ID submitted before the dedup window gets the
// *[OutsideWindowError] that Submit would return. A settled command held as
// a compact ID is read back from the log for the comparison, within
// [DefaultKafkaRequestTimeout]. Before recovery has finished, and its dedup
// window is loaded, the dispatcher does not know every ID yet; Check then
// skips the conflict test, which Submit makes later.
func (d *Dispatcher) Check(cmd Command) error {
	cmd = d.complete(cmd, d.now())
	if err := cmd.Validate(); err != nil {
		return err
	}
	select {
	case <-d.windowLoaded:
		d.mu.Lock()
		c, ok := d.commands[cmd.ID]
		var hit CheckpointID
		var compact bool
		var err error
		if ok {
			err = conflict(c, cmd)
		} else {
			hit, compact = d.ids.find(IDHash(cmd.ID))
		}
		d.mu.Unlock()
		if ok {
			return err
		}
		if compact {
			// A settled command held as a compact ID is compared with the
			// command read back from the log. A read that fails leaves the
			// test to Submit, which makes it again.
			ctx, cancel := context.WithTimeout(context.Background(), DefaultKafkaRequestTimeout)
			held, same, err := d.readSettled(ctx, cmd.ID, hit)
			cancel()
			if err == nil && same {
				return conflict(held, cmd)
			}
		}
		if err := d.outsideWindow(cmd, d.now()); err != nil {
			return err
		}
	default:
	}
	return validateFor(d.registry, cmd)
}

// admit checks a submitted command before it is recorded: against the
// command already held under its ID, or, for a new ID, against its device.
// The device's validator runs outside d.mu.
func (d *Dispatcher) admit(cmd Command) error {
	d.mu.Lock()
	c, ok := d.commands[cmd.ID]
	var err error
	if ok {
		err = conflict(c, cmd)
	}
	d.mu.Unlock()
	if ok {
		return err
	}
	return validateFor(d.registry, cmd)
}
