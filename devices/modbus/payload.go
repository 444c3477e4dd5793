package modbus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxPayloadBytes bounds the size of a command payload. The largest valid
// one, 1968 coils written as JSON booleans, fits with room to spare; a larger
// payload is rejected before it is parsed.
const MaxPayloadBytes = 32 << 10

// The quantity limits of the Modbus application protocol specification.
const (
	maxWriteRegisters = 123
	maxWriteCoils     = 1968
)

// PayloadError reports a command payload that does not fit its action. The
// device rejects such a command without touching the bus.
type PayloadError struct {
	// Action is the command's action.
	Action Action
	// Reason says what is wrong.
	Reason string
	// Err is the decoding error beneath, if any.
	Err error
}

// Error names the action and what is wrong with its payload.
func (e *PayloadError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("modbus: %s payload: %s: %v", e.Action, e.Reason, e.Err)
	}
	return fmt.Sprintf("modbus: %s payload: %s", e.Action, e.Reason)
}

// Unwrap returns the decoding error, if any.
func (e *PayloadError) Unwrap() error { return e.Err }

// RegisterValue is the payload of [WriteRegister]: {"address": 10, "value": 1234}.
type RegisterValue struct {
	Address uint16 `json:"address"`
	Value   uint16 `json:"value"`
}

// RegisterValues is the payload of [WriteRegisters], and the read-back data
// of a verified register write: {"address": 10, "values": [1, 2, 3]}.
type RegisterValues struct {
	Address uint16   `json:"address"`
	Values  []uint16 `json:"values"`
}

// CoilValue is the payload of [WriteCoil]: {"address": 3, "value": true}.
type CoilValue struct {
	Address uint16 `json:"address"`
	Value   bool   `json:"value"`
}

// CoilValues is the payload of [WriteCoils], and the read-back data of a
// verified coil write: {"address": 3, "values": [true, false]}.
type CoilValues struct {
	Address uint16 `json:"address"`
	Values  []bool `json:"values"`
}

// write is one parsed command: what to write, where, with which function.
type write struct {
	action    Action
	address   uint16
	registers []uint16 // for the register actions
	coils     []bool   // for the coil actions
}

func (w write) quantity() int {
	if w.registers != nil {
		return len(w.registers)
	}
	return len(w.coils)
}

// parsePayload decodes and checks the payload of action. Every field is
// required, unknown fields are refused, and the written range must end
// within the 16-bit address space.
func parsePayload(action Action, payload []byte) (write, error) {
	bad := func(reason string, err error) (write, error) {
		return write{}, &PayloadError{Action: action, Reason: reason, Err: err}
	}
	if len(payload) > MaxPayloadBytes {
		return bad(fmt.Sprintf("%d bytes exceed the limit of %d", len(payload), MaxPayloadBytes), nil)
	}
	// One strict decode into pointers, so that a missing field, a null and
	// an unknown field (the other action's "value" or "values" included)
	// are all told apart from a zero.
	var address *uint16
	w := write{action: action}
	switch action {
	case WriteRegister:
		var in struct {
			Address *uint16 `json:"address"`
			Value   *uint16 `json:"value"`
		}
		if err := decodeStrict(payload, &in); err != nil {
			return bad(`want {"address": 0-65535, "value": 0-65535}`, err)
		}
		if in.Value == nil {
			return bad(`field "value" is required`, nil)
		}
		address, w.registers = in.Address, []uint16{*in.Value}
	case WriteCoil:
		var in struct {
			Address *uint16 `json:"address"`
			Value   *bool   `json:"value"`
		}
		if err := decodeStrict(payload, &in); err != nil {
			return bad(`want {"address": 0-65535, "value": true or false}`, err)
		}
		if in.Value == nil {
			return bad(`field "value" is required`, nil)
		}
		address, w.coils = in.Address, []bool{*in.Value}
	case WriteRegisters:
		var in struct {
			Address *uint16  `json:"address"`
			Values  []uint16 `json:"values"`
		}
		if err := decodeStrict(payload, &in); err != nil {
			return bad(`want {"address": 0-65535, "values": [0-65535, ...]}`, err)
		}
		if n := len(in.Values); n < 1 || n > maxWriteRegisters {
			return bad(fmt.Sprintf(`field "values" holds %d registers, want 1 to %d`, n, maxWriteRegisters), nil)
		}
		address, w.registers = in.Address, in.Values
	case WriteCoils:
		var in struct {
			Address *uint16 `json:"address"`
			Values  []bool  `json:"values"`
		}
		if err := decodeStrict(payload, &in); err != nil {
			return bad(`want {"address": 0-65535, "values": [true or false, ...]}`, err)
		}
		if n := len(in.Values); n < 1 || n > maxWriteCoils {
			return bad(fmt.Sprintf(`field "values" holds %d coils, want 1 to %d`, n, maxWriteCoils), nil)
		}
		address, w.coils = in.Address, in.Values
	default:
		return bad("unknown action", nil)
	}
	if address == nil {
		return bad(`field "address" is required`, nil)
	}
	w.address = *address
	if end := int(w.address) + w.quantity(); end > 1<<16 {
		return bad(fmt.Sprintf("%d values from address %d run past 65535", w.quantity(), w.address), nil)
	}
	return w, nil
}

// decodeStrict decodes exactly one JSON object into v, refusing unknown
// fields and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) != 0 {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
