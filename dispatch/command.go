package dispatch

import "time"

// Command is one instruction to one device. The submitter builds it; the
// dispatcher records it in the command log under the leadership token before
// any device sees it.
type Command struct {
	// ID is the idempotency key, chosen by the submitter. A second command
	// with an ID that the log already holds is not dispatched again: when it
	// is the same command ([Command.SameAs]) its submitter receives the
	// status of the first, and when it differs an *[IDConflictError].
	ID string

	// Role is the role whose leader dispatches the command. The dispatcher
	// sets it to its own role when the submitter leaves it empty.
	Role string

	// Device is the registered name of the device that receives the command.
	Device string

	// Action names what the device does. The device decides what an action
	// means, such as "write-registers" for Modbus or "open" for a valve.
	Action string

	// Payload is the argument of the action, in a form the device defines.
	Payload []byte

	// SubmittedAt is the instant the submitter created the command.
	SubmittedAt time.Time

	// Deadline is the instant after which the command is never dispatched.
	// A command past its deadline is recorded as expired.
	Deadline time.Time

	// Attributes carries optional metadata, such as an operator's name.
	Attributes map[string]string
}

// Result is what a device reports about a command it acted on.
type Result struct {
	// Detail is a short human-readable account, such as "acknowledged" or
	// "read back 0x0001". It is recorded in the outcome record.
	Detail string

	// Data is an optional device reply, such as the payload of an MQTT reply
	// or the registers read back. It is recorded in the outcome record.
	Data []byte
}
