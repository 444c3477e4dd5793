package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
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
	if c.Dispatch.SafetyMargin != DefaultSafetyMargin || c.Dispatch.ShutdownTimeout != DefaultShutdownTimeout || c.Dispatch.MaxPending != DefaultMaxPending {
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

// TestCommitWaits checks the keys that schedule the log's transactions:
// omitted, each is its dispatch default; 0s, it is off, not the default.
func TestCommitWaits(t *testing.T) {
	const head = "role: controller\nmember: node-1\nkafka:\n  brokers: [127.0.0.1:9092]\n"
	c, err := LoadBytes("commit.yaml", []byte(head))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Dispatch
	if d.CommitGap == nil || *d.CommitGap != dispatch.DefaultCommitGap || d.CommitLinger == nil || *d.CommitLinger != dispatch.DefaultCommitLinger ||
		d.OutcomeLinger == nil || *d.OutcomeLinger != dispatch.DefaultOutcomeLinger {
		t.Errorf("omitted: gap %v, linger %v, outcome linger %v; want the dispatch defaults", d.CommitGap, d.CommitLinger, d.OutcomeLinger)
	}
	c, err = LoadBytes("commit.yaml", []byte(head+"dispatch:\n  commit_gap: 0s\n  commit_linger: 1ms\n  outcome_linger: 0s\n"))
	if err != nil {
		t.Fatal(err)
	}
	d = c.Dispatch
	if *d.CommitGap != 0 || *d.CommitLinger != time.Millisecond || *d.OutcomeLinger != 0 {
		t.Errorf("set: gap %v, linger %v, outcome linger %v; want 0s, 1ms, 0s", *d.CommitGap, *d.CommitLinger, *d.OutcomeLinger)
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
// each lists the faults Load must report, all of them in one error: each
// as "field" or "field@line", the line being where the fault is in the file.
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
			wants, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("first line %q does not say which field is bad", first)
			}
			_, err = Load(file)
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Load = %v, want a *ValidationError", err)
			}
			if verr.File != file || !strings.HasPrefix(err.Error(), file+": ") {
				t.Errorf("the error does not name the file %s:\n%v", file, err)
			}
			for _, want := range strings.Fields(wants) {
				field, lineText, hasLine := strings.Cut(want, "@")
				fe := verr.Field(field)
				if fe == nil {
					t.Errorf("error does not name %s:\n%v", field, err)
					continue
				}
				if !strings.Contains(err.Error(), field+": ") {
					t.Errorf("message does not name %s:\n%v", field, err)
				}
				if fe.Problem == "" {
					t.Errorf("%s: empty problem", field)
				}
				if fe.File != file {
					t.Errorf("%s: file %q, want %q", field, fe.File, file)
				}
				if hasLine {
					line, aerr := strconv.Atoi(lineText)
					if aerr != nil {
						t.Fatalf("bad want %q", want)
					}
					if fe.Line != line || fe.Column < 1 {
						t.Errorf("%s: at %d:%d, want line %d", field, fe.Line, fe.Column, line)
					}
					if loc := fmt.Sprintf("%s:%d:%d: %s: ", file, fe.Line, fe.Column, field); !strings.Contains(err.Error(), loc) {
						t.Errorf("message lacks %q:\n%v", loc, err)
					}
				}
			}
			var asField *FieldError
			if !errors.As(err, &asField) {
				t.Errorf("errors.As finds no *FieldError")
			}
		})
	}
}

// TestFaultHints checks the fix each kind of fault names.
func TestFaultHints(t *testing.T) {
	for _, tc := range []struct {
		file, field, problem, hint string
	}{
		{"three-misspelt", "leas", "unknown key", "did you mean `lease`?"},
		{"three-misspelt", "kafka.brokrs", "unknown key", "did you mean `brokers`?"},
		{"three-misspelt", "topics.partitons", "unknown key", "did you mean `partitions`?"},
		{"duration-fifteen", "lease.renew_interval", "not a duration", "a duration such as 15s"},
		{"duration-number", "lease.duration", "a bare number is not a duration", "a duration such as 15s"},
		{"duration-number", "dispatch.shutdown_timeout", "not a duration", "a duration such as 15s"},
		{"wrong-type", "kafka.brokers", "want a list", "[a, b]"},
		{"int-range", "devices[0].modbus.fence.address", "out of range", "0 to 65535"},
		{"mixed-shape-and-value", "http.listn", "unknown key", "did you mean `listen`?"},
		{"unknown-key", "kafka.bootstrap_servers", "unknown key", "known keys here: brokers, client_id"},
	} {
		t.Run(tc.file+"/"+tc.field, func(t *testing.T) {
			_, err := Load("testdata/invalid/" + tc.file + ".yaml")
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Load = %v, want a *ValidationError", err)
			}
			fe := verr.Field(tc.field)
			if fe == nil {
				t.Fatalf("no fault for %s:\n%v", tc.field, err)
			}
			if !strings.Contains(fe.Problem, tc.problem) || !strings.Contains(fe.Hint, tc.hint) {
				t.Errorf("fault = %q / hint %q, want %q / %q", fe.Problem, fe.Hint, tc.problem, tc.hint)
			}
			if !strings.Contains(fe.Error(), tc.hint) {
				t.Errorf("message %q lacks the hint", fe.Error())
			}
		})
	}
}

// TestFlowStyle loads a file written in YAML's flow style, with host:port
// and URL items unquoted inside flow sections.
func TestFlowStyle(t *testing.T) {
	c, err := Load("testdata/flow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1:9092", "kafka-2:9093", "kafka-3:9094"}; !slices.Equal(c.Kafka.Brokers, want) {
		t.Errorf("brokers = %q, want %q", c.Kafka.Brokers, want)
	}
	if c.Kafka.DialTimeout != 5*time.Second || c.Lease.Duration != 15*time.Second {
		t.Errorf("kafka = %+v, lease = %+v", c.Kafka, c.Lease)
	}
	if c.Members["node-1"] != "http://127.0.0.1:8081" || c.Members["node-2"] != "http://127.0.0.1:8082" {
		t.Errorf("members = %v", c.Members)
	}
	m, err := c.Devices[0].MQTTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Brokers, []string{"tcp://127.0.0.1:1883"}) || m.Topic != "d/{device}" {
		t.Errorf("mqtt = %+v", m)
	}
}

// TestUnparsableFiles: a YAML syntax error ends the parse; it is still one
// located fault of a *ValidationError.
func TestUnparsableFiles(t *testing.T) {
	for file, line := range map[string]int{
		"testdata/unparsable/syntax.yaml":        2,
		"testdata/unparsable/duplicate-key.yaml": 2,
	} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			_, err := Load(file)
			var verr *ValidationError
			if !errors.As(err, &verr) || len(verr.Problems) != 1 {
				t.Fatalf("Load = %v, want a *ValidationError with one fault", err)
			}
			if p := verr.Problems[0]; p.Line != line || p.Column < 1 || p.File != file {
				t.Errorf("fault at %s:%d:%d, want %s:%d", p.File, p.Line, p.Column, file, line)
			}
			if !strings.HasPrefix(err.Error(), file+": ") {
				t.Errorf("message does not start with the file name:\n%v", err)
			}
		})
	}
}

// TestMemberSecretsOnlyWhenAsked: Load accepts a file whose HTTP token
// variable is unset, since only a running member serves the API;
// CheckMemberSecrets names the variable, and its line.
func TestMemberSecretsOnlyWhenAsked(t *testing.T) {
	file := "testdata/member/http-token-env-unset.yaml"
	c, err := Load(file)
	if err != nil {
		t.Fatalf("Load = %v, want nil: the token is not needed to load", err)
	}
	err = c.CheckMemberSecrets()
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("CheckMemberSecrets = %v, want a *ValidationError", err)
	}
	fe := verr.Field("http.token_env")
	if fe == nil || fe.Line != 6 || fe.File != file {
		t.Fatalf("fault = %+v, want http.token_env at %s:6", fe, file)
	}
	t.Setenv("KRABKA_TEST_SURELY_UNSET_TOKEN", "tok")
	if err := c.CheckMemberSecrets(); err != nil {
		t.Fatalf("with the variable set: %v", err)
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
