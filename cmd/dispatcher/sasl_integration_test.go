//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// The SASL listener of the real cluster, which scripts/services/10-kafka.sh
// starts with one SCRAM user.
const (
	EnvSASLBrokers   = "KRABKA_KAFKA_SASL_BROKERS"
	EnvSASLUser      = "KRABKA_KAFKA_SASL_USER"
	EnvSASLPassword  = "KRABKA_KAFKA_SASL_PASSWORD"
	EnvSASLMechanism = "KRABKA_KAFKA_SASL_MECHANISM" // default SCRAM-SHA-512
)

// TestSASLAuthentication reaches the cluster's SASL listener, a
// SASL_PLAINTEXT one, with the configuration's kafka.sasl section: the right
// password creates the topics, a wrong one is refused and exits 3. With
// PLAIN, which would send the password in clear text, the file is refused
// until kafka.sasl.allow_plaintext_password confirms the risk.
func TestSASLAuthentication(t *testing.T) {
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("%s is not set: the cluster needs a SASL/SCRAM listener for this test", name)
		}
		return v
	}
	brokers, user := env(EnvSASLBrokers), env(EnvSASLUser)
	env(EnvSASLPassword)
	mechanism := os.Getenv(EnvSASLMechanism)
	if mechanism == "" {
		mechanism = "SCRAM-SHA-512"
	}
	write := func(mechanism, passwordEnv string, allowPlaintext bool) string {
		cfg := fmt.Sprintf(`role: %s
member: sasl-1
kafka:
  brokers: [%s]
  sasl:
    mechanism: %s
    username: %s
    password_env: %s
    allow_plaintext_password: %t
topics:
  coordination: %s
  log: %s
  requests: %s
  partitions: 2
  coordination_partitions: 2
`, kafkatest.UniqueName(t, "sasl"), brokers, mechanism, user, passwordEnv, allowPlaintext,
			kafkatest.UniqueName(t, "coord"), kafkatest.UniqueName(t, "log"), kafkatest.UniqueName(t, "req"))
		path := filepath.Join(t.TempDir(), "sasl.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ctx := context.Background()
	// The listener speaks no TLS: PLAIN needs the confirmation, SCRAM not.
	confirm := mechanism == "PLAIN"
	if code, out, errOut := runCLI(t, ctx, "topics", "-c", write(mechanism, EnvSASLPassword, confirm)); code != 0 {
		t.Fatalf("topics over SASL %s: exit %d\n%s\n%s", mechanism, code, out, errOut)
	}
	t.Setenv("KRABKA_TEST_WRONG_PASSWORD", "not-the-password")
	if code, _, errOut := runCLI(t, ctx, "topics", "-c", write(mechanism, "KRABKA_TEST_WRONG_PASSWORD", confirm), "--timeout", "10s"); code != int(ExitUnavailable) {
		t.Fatalf("a wrong password: exit %d, want %d\n%s", code, ExitUnavailable, errOut)
	}

	// PLAIN over this listener: refused by the configuration, naming the
	// setting, until the setting confirms it; then it authenticates.
	if code, _, errOut := runCLI(t, ctx, "topics", "-c", write("PLAIN", EnvSASLPassword, false)); code != int(ExitUsage) || !strings.Contains(errOut, "kafka.sasl.allow_plaintext_password") {
		t.Fatalf("PLAIN without TLS, unconfirmed: exit %d, want %d naming the setting\n%s", code, ExitUsage, errOut)
	}
	if code, out, errOut := runCLI(t, ctx, "topics", "-c", write("PLAIN", EnvSASLPassword, true)); code != 0 {
		t.Fatalf("PLAIN without TLS, confirmed: exit %d\n%s\n%s", code, out, errOut)
	}
}
