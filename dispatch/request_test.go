package dispatch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValidateNamesTheField(t *testing.T) {
	cases := map[string]struct {
		change func(c *Command)
		field  string
	}{
		"empty id":         {func(c *Command) { c.ID = "" }, "ID"},
		"long id":          {func(c *Command) { c.ID = strings.Repeat("i", MaxCommandIDLen+1) }, "ID"},
		"id not utf8":      {func(c *Command) { c.ID = "\xff" }, "ID"},
		"bad role":         {func(c *Command) { c.Role = strings.Repeat("r", 250) }, "Role"},
		"empty device":     {func(c *Command) { c.Device = "" }, "Device"},
		"long action":      {func(c *Command) { c.Action = strings.Repeat("a", MaxActionLen+1) }, "Action"},
		"large payload":    {func(c *Command) { c.Payload = make([]byte, MaxPayloadLen+1) }, "Payload"},
		"no submission":    {func(c *Command) { c.SubmittedAt = time.Time{} }, "SubmittedAt"},
		"no deadline":      {func(c *Command) { c.Deadline = time.Time{} }, "Deadline"},
		"deadline before":  {func(c *Command) { c.Deadline = c.SubmittedAt.Add(-time.Second) }, "Deadline"},
		"deadline same ms": {func(c *Command) { c.Deadline = c.SubmittedAt.Add(500 * time.Microsecond) }, "Deadline"},
		"empty attr key":   {func(c *Command) { c.Attributes[""] = "v" }, "Attributes"},
		"long attr value":  {func(c *Command) { c.Attributes["k"] = strings.Repeat("v", MaxAttributeValueLen+1) }, "Attributes"},
		"too many attrs": {func(c *Command) {
			for i := range MaxAttributes {
				c.Attributes[strings.Repeat("k", i+1)] = ""
			}
		}, "Attributes"},
	}
	for name, tc := range cases {
		c := sampleCommand()
		tc.change(&c)
		err := c.Validate()
		var ice *InvalidCommandError
		if !errors.As(err, &ice) {
			t.Errorf("%s: got %v, want an *InvalidCommandError", name, err)
			continue
		}
		if ice.Field != tc.field {
			t.Errorf("%s: field %q, want %q (%v)", name, ice.Field, tc.field, err)
		}
	}
	if err := sampleCommand().Validate(); err != nil {
		t.Errorf("the sample command is invalid: %v", err)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for name, cmd := range goldenRequests() {
		value, err := EncodeRequest(cmd)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := DecodeRequest(value)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Errorf("%s: round trip\n%+v\nwant\n%+v", name, got, cmd)
		}
	}
}

func TestRequestWithoutDeadline(t *testing.T) {
	cmd := Command{ID: "a", Device: "d", SubmittedAt: at}
	value, err := EncodeRequest(cmd)
	if err != nil {
		t.Fatalf("a request without a deadline was refused: %v", err)
	}
	got, err := DecodeRequest(value)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Deadline.IsZero() {
		t.Errorf("deadline %v, want the zero time", got.Deadline)
	}
	if err := got.Validate(); err == nil {
		t.Error("Validate accepted a command without a deadline")
	}
}

// TestDecodeRequestInvalidCommand checks that a well-formed request whose
// command is invalid comes back with its ID, so that it can be rejected.
func TestDecodeRequestInvalidCommand(t *testing.T) {
	w := wireWriter{}
	w.int16(requestVersion)
	writeCommand(&w, Command{ID: "poison", Device: "", SubmittedAt: at})
	cmd, err := DecodeRequest(w.buf)
	var ice *InvalidCommandError
	if !errors.As(err, &ice) || ice.Field != "Device" {
		t.Fatalf("got %v, want an *InvalidCommandError for Device", err)
	}
	var fe *LogFormatError
	if errors.As(err, &fe) {
		t.Errorf("a well-formed request reported as malformed: %v", err)
	}
	if cmd.ID != "poison" {
		t.Errorf("decoded ID %q, want poison", cmd.ID)
	}
}

func TestDecodeRequestFormatErrors(t *testing.T) {
	full, err := EncodeRequest(sampleCommand())
	if err != nil {
		t.Fatal(err)
	}
	// Attributes out of order: swap the two attribute pairs' keys.
	w := wireWriter{}
	w.int16(requestVersion)
	c := sampleCommand()
	c.Attributes = nil
	writeCommand(&w, c)
	w.buf = w.buf[:len(w.buf)-2]
	w.int16(2)
	w.string("b")
	w.string("")
	w.string("a")
	w.string("")
	unordered := w.buf
	dup := append([]byte(nil), unordered...)
	copy(dup[len(dup)-5:], "b") // second key becomes "b" too

	cases := map[string][]byte{
		"empty":            nil,
		"version":          append([]byte{0, 1}, full[2:]...),
		"truncated":        full[:len(full)-1],
		"trailing":         append(append([]byte(nil), full...), 0),
		"unordered attrs":  unordered,
		"duplicate attrs":  dup,
		"negative payload": append(append([]byte{0, 0, 0, 1, 'x', 0, 0, 0, 1, 'd', 0, 0}, 0xff, 0xff, 0xff, 0xff), make([]byte, 18)...),
	}
	for name, value := range cases {
		_, err := DecodeRequest(value)
		var fe *LogFormatError
		if !errors.As(err, &fe) || fe.Part != "request value" {
			t.Errorf("%s: got %v, want a *LogFormatError of the request value", name, err)
		}
	}
}
