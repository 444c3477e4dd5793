package config

import (
	"errors"
	"strings"
	"testing"
)

// validateText parses, completes and validates a file's text.
func validateText(t *testing.T, text string) error {
	t.Helper()
	c, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	c.Complete()
	return c.Validate()
}

// TestKafkaRisksNeedConfirmation: PLAIN without TLS and a skipped broker
// check are refused with the risk and the confirming setting in the
// message, and accepted once that setting confirms them.
func TestKafkaRisksNeedConfirmation(t *testing.T) {
	const head = "role: r\nmember: m\nkafka:\n  brokers: [h:1]\n"
	plain := "  sasl:\n    mechanism: PLAIN\n    username: u\n    password: p\n"
	skip := "  tls:\n    insecure_skip_verify: true\n"
	for _, tc := range []struct {
		name, text     string
		field, setting string // the fault expected, "" for none
		risk           string
	}{
		{"plain without tls", head + plain, "kafka.sasl.mechanism", "kafka.sasl.allow_plaintext_password: true", "clear text"},
		{"plain confirmed", head + plain + "    allow_plaintext_password: true\n", "", "", ""},
		{"plain over tls", head + plain + "  tls: {}\n", "", "", ""},
		{"scram without tls", head + "  sasl:\n    mechanism: SCRAM-SHA-512\n    username: u\n    password: p\n", "", "", ""},
		{"skip verify", head + skip, "kafka.tls.insecure_skip_verify", "kafka.tls.allow_unverified_brokers: true", "pose as a broker"},
		{"skip verify confirmed", head + skip + "    allow_unverified_brokers: true\n", "", "", ""},
		{"plain over unverified tls", head + plain + skip, "kafka.tls.insecure_skip_verify", "kafka.tls.allow_unverified_brokers: true", "pose as a broker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateText(t, tc.text)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var verr *ValidationError
			if !errors.As(err, &verr) || len(verr.Problems) != 1 || verr.Field(tc.field) == nil {
				t.Fatalf("Validate = %v, want one fault of %s", err, tc.field)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.setting) || !strings.Contains(msg, tc.risk) {
				t.Errorf("message does not name the setting %q and the risk %q:\n%s", tc.setting, tc.risk, msg)
			}
		})
	}
}
