package modbus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

func (e *PayloadError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("modbus: %s payload: %s: %v", e.Action, e.Reason, e.Err)
	}
	return fmt.Sprintf("modbus: %s payload: %s", e.Action, e.Reason)
}

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
	var fields struct {
		Address *uint16         `json:"address"`
		Value   json.RawMessage `json:"value"`
		Values  json.RawMessage `json:"values"`
	}
	if err := decodeStrict(payload, &fields); err != nil {
		return bad("malformed JSON", err)
	}
	if fields.Address == nil {
		return bad(`field "address" is required`, nil)
	}
	w := write{action: action, address: *fields.Address}
	single := action == WriteRegister || action == WriteCoil
	switch {
	case single && fields.Values != nil:
		return bad(`field "values" belongs to the plural action; use "value"`, nil)
	case single && fields.Value == nil:
		return bad(`field "value" is required`, nil)
	case !single && fields.Value != nil:
		return bad(`field "value" belongs to the singular action; use "values"`, nil)
	case !single && fields.Values == nil:
		return bad(`field "values" is required`, nil)
	}
	switch action {
	case WriteRegister:
		var v uint16
		if err := decodeStrict(fields.Value, &v); err != nil {
			return bad(`field "value" must be an integer from 0 to 65535`, err)
		}
		w.registers = []uint16{v}
	case WriteCoil:
		var v bool
		if err := decodeStrict(fields.Value, &v); err != nil {
			return bad(`field "value" must be true or false`, err)
		}
		w.coils = []bool{v}
	case WriteRegisters:
		if err := decodeStrict(fields.Values, &w.registers); err != nil {
			return bad(`field "values" must be an array of integers from 0 to 65535`, err)
		}
		if n := len(w.registers); n < 1 || n > maxWriteRegisters {
			return bad(fmt.Sprintf(`field "values" holds %d registers, want 1 to %d`, n, maxWriteRegisters), nil)
		}
	case WriteCoils:
		if err := decodeStrict(fields.Values, &w.coils); err != nil {
			return bad(`field "values" must be an array of true and false`, err)
		}
		if n := len(w.coils); n < 1 || n > maxWriteCoils {
			return bad(fmt.Sprintf(`field "values" holds %d coils, want 1 to %d`, n, maxWriteCoils), nil)
		}
	default:
		return bad("unknown action", nil)
	}
	if end := int(w.address) + w.quantity(); end > 1<<16 {
		return bad(fmt.Sprintf("%d values from address %d run past 65535", w.quantity(), w.address), nil)
	}
	return w, nil
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown
// fields, a null, and trailing data.
func decodeStrict(data []byte, v any) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return errors.New("null is not a value here")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
