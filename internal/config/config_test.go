package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

func TestLoadValid(t *testing.T) {
	t.Setenv("KRABKA_TEST_SASL_PASSWORD", "pw")
	c, err := Load("testdata/valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Role != "controller" || c.Member != "node-1" {
		t.Errorf("role, member = %q, %q", c.Role, c.Member)
	}
	if c.Lease.Duration != 6*time.Second || c.Lease.RenewInterval != 2*time.Second || c.Lease.ChallengeStagger != time.Second {
		t.Errorf("lease = %+v", c.Lease)
	}
	// Omitted settings take their defaults.
	if c.Lease.PollInterval != coordination.DefaultPollInterval {
		t.Errorf("poll interval = %v, want the default %v", c.Lease.PollInterval, coordination.DefaultPollInterval)
	}
	if c.Topics.Coordination != coordination.StateTopic || c.Topics.Log != DefaultLogTopic || c.Topics.Requests != DefaultRequestsTopic {
		t.Errorf("topics = %+v", c.Topics)
	}
	if c.Topics.Partitions != DefaultLogPartitions || c.Topics.CoordinationPartitions != coordination.DefaultPartitions {
		t.Errorf("partitions = %+v", c.Topics)
	}
	if c.Kafka.ClientID != "node-1" || c.Kafka.DialTimeout != DefaultDialTimeout {
		t.Errorf("kafka = %+v", c.Kafka)
	}
	if c.Dispatch.SafetyMargin != DefaultSafetyMargin || c.Dispatch.ShutdownTimeout != DefaultShutdownTimeout {
		t.Errorf("dispatch = %+v", c.Dispatch)
	}
	if len(c.Devices) != 2 || c.Devices[0].Type != DeviceMQTT || c.Devices[1].Type != DeviceModbus {
		t.Fatalf("devices = %+v", c.Devices)
	}
	if !strings.Contains(string(c.Devices[1].Modbus), "127.0.0.1:5020") {
		t.Errorf("modbus section = %q", c.Devices[1].Modbus)
	}
	tok, err := c.HTTP.ResolveToken()
	if err != nil || tok != "s3cret" {
		t.Errorf("token = %q, %v", tok, err)
	}
	opts, err := c.Kafka.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) < 3 {
		t.Errorf("ClientOptions gave %d options, want seed brokers, client id, dial timeout and SASL", len(opts))
	}
}

// TestExampleFileLoads keeps dispatcher.example.yaml at the root of the
// repository valid: it is the file the README tells people to copy.
func TestExampleFileLoads(t *testing.T) {
	t.Setenv("DISPATCHER_HTTP_TOKEN", "example")
	if _, err := Load(filepath.Join("..", "..", "dispatcher.example.yaml")); err != nil {
		t.Fatal(err)
	}
}

// TestInvalidFiles loads every file of testdata/invalid. The first line of
// each says which field the validation must name: "# want: field".
func TestInvalidFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("first line %q does not say which field is bad", first)
			}
			_, err = Load(file)
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Load = %v, want a *ValidationError", err)
			}
			fe := verr.Field(want)
			if fe == nil {
				t.Fatalf("error does not name %s:\n%v", want, err)
			}
			if !strings.Contains(err.Error(), want+": ") {
				t.Errorf("message does not name %s:\n%v", want, err)
			}
			if fe.Problem == "" {
				t.Errorf("%s: empty problem", want)
			}
			var asField *FieldError
			if !errors.As(err, &asField) {
				t.Errorf("errors.As finds no *FieldError")
			}
		})
	}
}

func TestUnparsableFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/unparsable/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			_, err := Load(file)
			var perr *ParseError
			if !errors.As(err, &perr) {
				t.Fatalf("Load = %v, want a *ParseError", err)
			}
			if !strings.HasPrefix(err.Error(), file+": ") {
				t.Errorf("message does not start with the file name:\n%v", err)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load = %v, want os.ErrNotExist", err)
	}
}

func TestSecretsAreNotQuoted(t *testing.T) {
	c, err := Parse([]byte("role: r\nmember: m\nkafka:\n  brokers: [h:1]\n  sasl:\n    mechanism: PLAIN\n    username: u\n    password: hunter2\n    password_env: HOME\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Complete()
	err = c.Validate()
	if err == nil {
		t.Fatal("two password sources validated")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the message quotes the password:\n%v", err)
	}
}

func TestAllFaultsReported(t *testing.T) {
	c, err := Parse([]byte("kafka:\n  brokers: [nohost]\ntopics:\n  partitions: -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Complete()
	var verr *ValidationError
	if !errors.As(c.Validate(), &verr) {
		t.Fatal("want a *ValidationError")
	}
	for _, f := range []string{"role", "member", "kafka.brokers[0]", "topics.partitions"} {
		if verr.Field(f) == nil {
			t.Errorf("no fault for %s in\n%v", f, verr)
		}
	}
}

func TestSASLMechanisms(t *testing.T) {
	for _, m := range []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512} {
		s := &SASL{Mechanism: m, Username: "u", Password: "p"}
		mech, err := s.NewMechanism()
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if mech.Name() != m {
			t.Errorf("mechanism %s builds %s", m, mech.Name())
		}
	}
	if _, err := (&SASL{Mechanism: "GSSAPI", Username: "u", Password: "p"}).NewMechanism(); err == nil {
		t.Error("GSSAPI built a mechanism")
	}
}

func TestSecretFromFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := HTTP{TokenFile: file}
	tok, err := h.ResolveToken()
	if err != nil || tok != "abc" {
		t.Fatalf("token = %q, %v", tok, err)
	}
}

func TestTLSConfig(t *testing.T) {
	if _, err := (&TLS{CAFile: "testdata/valid.yaml"}).Config(); err == nil {
		t.Error("a CA file without PEM was accepted")
	}
	cfg, err := (&TLS{ServerName: "kafka.example"}).Config()
	if err != nil || cfg.ServerName != "kafka.example" {
		t.Fatalf("Config = %+v, %v", cfg, err)
	}
}
