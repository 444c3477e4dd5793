package dispatch

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// The bounds of a command. A record that exceeds one does not decode, so a
// hostile record cannot make a reader allocate more than these.
const (
	// MaxCommandIDLen is the longest command ID, in bytes.
	MaxCommandIDLen = 255

	// MaxDeviceLen is the longest device name, in bytes.
	MaxDeviceLen = 255

	// MaxActionLen is the longest action, in bytes.
	MaxActionLen = 255

	// MaxPayloadLen is the largest payload, in bytes. It keeps a command
	// record well inside Kafka's default max.message.bytes of about 1 MiB.
	MaxPayloadLen = 256 << 10

	// MaxAttributes is the largest number of attributes of a command.
	MaxAttributes = 32

	// MaxAttributeKeyLen is the longest attribute key, in bytes.
	MaxAttributeKeyLen = 255

	// MaxAttributeValueLen is the longest attribute value, in bytes.
	MaxAttributeValueLen = 4096
)

// requestVersion is the only version of the request layout today.
const requestVersion = 0

// InvalidCommandError reports a command that [Command.Validate] refuses. It
// names the field at fault.
type InvalidCommandError struct {
	// Field names the field of Command at fault, such as "ID", "Deadline",
	// or "Attributes".
	Field string

	// Problem says what is wrong with it.
	Problem string
}

// Error describes the fault.
func (e *InvalidCommandError) Error() string {
	return "dispatch: invalid command: " + e.Field + " " + e.Problem
}

func invalid(field, format string, args ...any) error {
	return &InvalidCommandError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Validate reports whether the command can be recorded and dispatched. It
// returns an *InvalidCommandError naming the first field at fault:
//   - ID, Device: empty, longer than MaxCommandIDLen or MaxDeviceLen, or not
//     UTF-8;
//   - Role: not a valid [coordination.Role] name (an empty Role is allowed:
//     the dispatcher fills in its own);
//   - Action: longer than MaxActionLen, or not UTF-8;
//   - Payload: larger than MaxPayloadLen;
//   - SubmittedAt: zero, within the first millisecond after the zero time
//     (the log, which keeps milliseconds, would hold it as zero), or outside
//     the years 1 to 9999;
//   - Deadline: the same, or not after SubmittedAt at millisecond precision,
//     the precision of the log;
//   - Attributes: more than MaxAttributes, an empty key, a key or value over
//     its bound, or one that is not UTF-8.
func (c Command) Validate() error { return c.validate(true) }

// validate checks the command; a request may leave its Deadline zero, and the
// dispatcher then gives it one, so requireDeadline is false for requests.
func (c Command) validate(requireDeadline bool) error {
	if err := checkText("ID", c.ID, MaxCommandIDLen, true); err != nil {
		return err
	}
	if c.Role != "" {
		if _, err := coordination.NewRole(c.Role); err != nil {
			return &InvalidCommandError{Field: "Role", Problem: err.Error()}
		}
	}
	if err := checkText("Device", c.Device, MaxDeviceLen, true); err != nil {
		return err
	}
	if err := checkText("Action", c.Action, MaxActionLen, false); err != nil {
		return err
	}
	if len(c.Payload) > MaxPayloadLen {
		return invalid("Payload", "is %d bytes, above the limit of %d", len(c.Payload), MaxPayloadLen)
	}
	if p := timeProblem(c.SubmittedAt, true); p != "" {
		return invalid("SubmittedAt", "%s", p)
	}
	if p := timeProblem(c.Deadline, requireDeadline); p != "" {
		return invalid("Deadline", "%s", p)
	}
	if !c.Deadline.IsZero() && c.Deadline.UnixMilli() <= c.SubmittedAt.UnixMilli() {
		return invalid("Deadline", "%s is not after SubmittedAt %s", c.Deadline.UTC().Format(timeLayout), c.SubmittedAt.UTC().Format(timeLayout))
	}
	if len(c.Attributes) > MaxAttributes {
		return invalid("Attributes", "has %d entries, above the limit of %d", len(c.Attributes), MaxAttributes)
	}
	for _, k := range sortedKeys(c.Attributes) {
		if p := textProblem(k, MaxAttributeKeyLen, true); p != "" {
			return invalid("Attributes", "key %.32q %s", k, p)
		}
		if p := textProblem(c.Attributes[k], MaxAttributeValueLen, false); p != "" {
			return invalid("Attributes", "value of %.32q %s", k, p)
		}
	}
	return nil
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// checkText returns an *InvalidCommandError for a text field that is empty
// when required, over limit bytes, or not UTF-8.
func checkText(field, s string, limit int, required bool) error {
	if p := textProblem(s, limit, required); p != "" {
		return &InvalidCommandError{Field: field, Problem: p}
	}
	return nil
}

// textProblem says what is wrong with a text, or returns "".
func textProblem(s string, limit int, required bool) string {
	switch {
	case s == "" && required:
		return "is empty"
	case len(s) > limit:
		return fmt.Sprintf("is %d bytes, above the limit of %d", len(s), limit)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	return ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// EncodeRequest encodes the value of a record of the requests topic. The
// record's key is the command ID; the value holds the whole command, so a
// reader needs no key. It returns the *InvalidCommandError of
// [Command.Validate] for a command that would not be accepted, with one
// exception: a request may leave Deadline zero, and the dispatcher then sets
// it from its command timeout.
func EncodeRequest(cmd Command) ([]byte, error) {
	if err := cmd.validate(false); err != nil {
		return nil, err
	}
	w := wireWriter{buf: make([]byte, 0, commandSize(cmd)+2)}
	w.int16(requestVersion)
	writeCommand(&w, cmd)
	return w.buf, nil
}

// DecodeRequest decodes the value of a record of the requests topic.
//
// It returns a *LogFormatError with Part "request value" for a truncated
// buffer, trailing bytes, an unknown version, a negative length or one over
// its bound, and attributes out of order. For a value that is well formed but
// holds a command that Validate refuses (but for a zero Deadline, which a
// request may have), it returns the decoded command
// together with an error that wraps the *InvalidCommandError, so that the
// caller can record the rejection under the command's ID. It never panics.
func DecodeRequest(value []byte) (Command, error) {
	r := wireReader{buf: value}
	if v := r.int16("version"); r.err == nil && v != requestVersion {
		r.fail("unknown version %d", v)
	}
	cmd := readCommand(&r)
	r.end()
	if r.err != nil {
		return Command{}, newFormatError("request value", r.err)
	}
	if err := cmd.validate(false); err != nil {
		return cmd, fmt.Errorf("dispatch: request %q: %w", cmd.ID, err)
	}
	return cmd, nil
}

// commandSize is the encoded size of a valid command.
func commandSize(c Command) int {
	n := 2 + len(c.ID) + 2 + len(c.Role) + 2 + len(c.Device) + 2 + len(c.Action) +
		4 + len(c.Payload) + 8 + 8 + 2
	for k, v := range c.Attributes {
		n += 2 + len(k) + 2 + len(v)
	}
	return n
}

// writeCommand writes the command layout of the package doc. The command is
// valid, so every length fits its prefix.
func writeCommand(w *wireWriter, c Command) {
	w.string(c.ID)
	w.string(c.Role)
	w.string(c.Device)
	w.string(c.Action)
	w.bytes(c.Payload)
	w.time(c.SubmittedAt)
	w.time(c.Deadline)
	w.int16(int16(len(c.Attributes)))
	for _, k := range sortedKeys(c.Attributes) {
		w.string(k)
		w.string(c.Attributes[k])
	}
}

// readCommand reads the command layout. It checks the structure and the
// bounds; the caller runs Validate for the rest.
func readCommand(r *wireReader) Command {
	var c Command
	c.ID = r.string("command id", MaxCommandIDLen)
	c.Role = r.string("role", coordination.MaxRoleLen)
	c.Device = r.string("device", MaxDeviceLen)
	c.Action = r.string("action", MaxActionLen)
	c.Payload = r.bytes("payload", MaxPayloadLen)
	c.SubmittedAt = r.time("submitted at")
	c.Deadline = r.time("deadline")
	n := r.int16("attribute count")
	if r.err != nil {
		return Command{}
	}
	if n < 0 || n > MaxAttributes {
		r.fail("attribute count %d is outside 0..%d", n, MaxAttributes)
		return Command{}
	}
	if n > 0 {
		c.Attributes = make(map[string]string, n)
	}
	prev := ""
	for i := range int(n) {
		k := r.string("attribute key", MaxAttributeKeyLen)
		v := r.string("attribute value", MaxAttributeValueLen)
		if r.err != nil {
			return Command{}
		}
		if i > 0 && k <= prev {
			r.fail("attribute key %q does not follow %q in ascending order", k, prev)
			return Command{}
		}
		prev = k
		c.Attributes[k] = v
	}
	return c
}
