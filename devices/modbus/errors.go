package modbus

import (
	"errors"
	"fmt"

	gmodbus "github.com/goburrow/modbus"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// ErrClosed is returned by a Device after its Close. The device did not act,
// so the error is marked retryable.
var ErrClosed = errors.New("modbus: device is closed")

// ErrNoAnswer is wrapped when a request was written and the unit's answer
// did not arrive before the deadline. The unit may have acted.
var ErrNoAnswer = errors.New("modbus: no answer from the unit")

// Phase is the step of a dispatch or health check at which it failed. The
// phase and whether its request had left decide the class of the error; see
// the package documentation.
type Phase int

const (
	// PhaseBus is the wait for the bus, while another unit's transaction
	// runs on it.
	PhaseBus Phase = iota + 1
	// PhaseConnect is the connect to a TCP address or the open of a serial
	// port.
	PhaseConnect
	// PhaseFence is the write of the term and fencing token to the fence
	// registers.
	PhaseFence
	// PhaseWrite is the command's own write.
	PhaseWrite
	// PhaseVerify is the read-back after an acknowledged write.
	PhaseVerify
	// PhaseHealth is the read of the health register.
	PhaseHealth
	// PhaseFencedWrite is the one request that carries the fence
	// registers and the command's registers ([FenceOneRequest]). It is
	// classified as PhaseWrite: the unit acts on all of it or none.
	PhaseFencedWrite
)

// String returns the phase's name as error messages print it.
func (p Phase) String() string {
	switch p {
	case PhaseBus:
		return "bus"
	case PhaseConnect:
		return "connect"
	case PhaseFence:
		return "fence"
	case PhaseWrite:
		return "write"
	case PhaseVerify:
		return "verify"
	case PhaseHealth:
		return "health"
	case PhaseFencedWrite:
		return "fenced write"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// UnitError reports a failed exchange with a unit. A Modbus exception answer
// is beneath it as a *github.com/goburrow/modbus.ModbusError, a cancelled
// context as the context's error, a missing answer as [ErrNoAnswer]; use
// errors.As and errors.Is. The dispatch classes are added around it by
// Dispatch.
type UnitError struct {
	// Bus names the connection or serial line, such as "tcp 10.0.0.5:502"
	// or "rtu /dev/ttyUSB0".
	Bus string
	// Unit is the unit (slave) id.
	Unit int
	// Phase is the step that failed.
	Phase Phase
	// Sent reports whether any byte of the failed step's request was
	// written to the connection or line.
	Sent bool
	// Err is the cause.
	Err error
}

// Error names the unit, its bus, the phase, whether the request left, and
// the cause.
func (e *UnitError) Error() string {
	sent := "not sent"
	if e.Sent {
		sent = "sent"
	}
	return fmt.Sprintf("modbus: unit %d on %s: %s (request %s): %v", e.Unit, e.Bus, e.Phase, sent, e.Err)
}

// Unwrap returns the cause.
func (e *UnitError) Unwrap() error { return e.Err }

// Exception returns the Modbus exception code of the unit's answer, and
// false when the failure was not an exception answer.
func (e *UnitError) Exception() (byte, bool) {
	var me *gmodbus.ModbusError
	if errors.As(e.Err, &me) {
		return me.ExceptionCode, true
	}
	return 0, false
}

// VerifyError reports a read-back that differs from what was written. The
// unit acknowledged the write, so the command is in doubt: something else
// may have written the same registers, or the unit may clamp or refuse
// values without an exception.
type VerifyError struct {
	// Address is the first register or coil compared.
	Address uint16
	// Wrote and Read are the values, as JSON arrays.
	Wrote, Read string
}

// Error shows what was written and what was read.
func (e *VerifyError) Error() string {
	return fmt.Sprintf("modbus: read back from %d differs: wrote %s, read %s", e.Address, e.Wrote, e.Read)
}

// UnknownActionError reports a command whose action the device does not
// accept: not one of this package's actions, or not listed in
// [Config.Actions].
type UnknownActionError struct {
	// Action is the command's action.
	Action string
}

// Error names the action.
func (e *UnknownActionError) Error() string {
	return fmt.Sprintf("modbus: action %q is not enabled on this device", e.Action)
}

// classify marks a *UnitError with the dispatch class its phase calls for:
//
//   - waiting for the bus or connecting: retryable, nothing was sent;
//   - the fence write: an exception answer is rejected (the unit refused
//     the term), anything else retryable, because the command's own write
//     was never sent;
//   - the command's write: not sent is retryable; exceptions 01, 02, 03
//     are rejected; any other exception, and any failure after a byte was
//     sent, is in doubt;
//   - the read-back and the health read: in doubt (unmarked).
func classify(e *UnitError) error {
	code, exception := e.Exception()
	switch e.Phase {
	case PhaseBus, PhaseConnect:
		return dispatch.Retryable(e)
	case PhaseFence:
		if exception {
			return dispatch.Rejected(e)
		}
		return dispatch.Retryable(e)
	case PhaseWrite, PhaseFencedWrite:
		if exception {
			switch code {
			case gmodbus.ExceptionCodeIllegalFunction,
				gmodbus.ExceptionCodeIllegalDataAddress,
				gmodbus.ExceptionCodeIllegalDataValue:
				return dispatch.Rejected(e)
			}
			return e
		}
		if !e.Sent {
			return dispatch.Retryable(e)
		}
	}
	return e
}

// FenceLayoutError reports a command that cannot travel in the fence's
// request of [FenceOneRequest]: it writes coils, or registers that do not
// begin right after the fence block, or more than fit in one request. It is
// rejected before any request.
type FenceLayoutError struct {
	// Action, Address and Quantity describe the command's write.
	Action   Action
	Address  uint16
	Quantity int
	// Want is the address the command's registers must begin at, and Max
	// how many registers may follow the fence.
	Want uint16
	Max  int
}

func (e *FenceLayoutError) Error() string {
	return fmt.Sprintf("modbus: fence mode one-request: %s of %d at %d cannot share the fence's request; it takes 1 to %d registers at %d",
		e.Action, e.Quantity, e.Address, e.Max, e.Want)
}
