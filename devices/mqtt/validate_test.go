package mqtt

import (
	"errors"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

func TestValidateCommandRefusesWhatCannotBePublished(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	d := newTestDevice(t, b.URL(), func(c *Config) {
		c.MaxPayloadBytes = 1024
		c.PayloadEncoding = PayloadJSON
		c.Topic = "devices/{device}/{action}"
	})
	if err := d.ValidateCommand(testCommand("good")); err != nil {
		t.Errorf("a good command: %v", err)
	}
	big := testCommand("big")
	big.Payload = []byte(`"` + strings.Repeat("x", 2000) + `"`)
	var tl *PayloadTooLargeError
	if err := d.ValidateCommand(big); !errors.As(err, &tl) {
		t.Errorf("oversized: %v, want *PayloadTooLargeError", err)
	}
	bad := testCommand("bad")
	bad.Payload = []byte("{not json")
	if err := d.ValidateCommand(bad); !errors.Is(err, ErrMalformedPayload) {
		t.Errorf("not JSON: %v, want ErrMalformedPayload", err)
	}
	slash := testCommand("slash")
	slash.Action = "open/close"
	if err := d.ValidateCommand(slash); !errors.Is(err, ErrInvalidTopicValue) {
		t.Errorf("action with '/': %v, want ErrInvalidTopicValue", err)
	}
}
