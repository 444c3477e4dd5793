package mqtt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

func validConfig() Config {
	return Config{Brokers: []string{"tcp://127.0.0.1:1883"}, Topic: "devices/{device}/cmd", Verifier: testKeys}
}

func TestValidateAcceptsMinimalConfig(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Config)
		field string
		value string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "brokers", ""},
		{"bad scheme", func(c *Config) { c.Brokers = []string{"http://127.0.0.1:1883"} }, "brokers[0]", "http://127.0.0.1:1883"},
		{"no port", func(c *Config) { c.Brokers = append(c.Brokers, "tcp://127.0.0.1") }, "brokers[1]", "tcp://127.0.0.1"},
		{"port out of range", func(c *Config) { c.Brokers = []string{"tcp://127.0.0.1:70000"} }, "brokers[0]", "tcp://127.0.0.1:70000"},
		{"qos 3", func(c *Config) { c.QoS = 3 }, "qos", "3"},
		{"no topic", func(c *Config) { c.Topic = "" }, "topic", ""},
		{"unknown placeholder", func(c *Config) { c.Topic = "devices/{name}/cmd" }, "topic", "devices/{name}/cmd"},
		{"wildcard in topic", func(c *Config) { c.Topic = "devices/+/cmd" }, "topic", "devices/+/cmd"},
		{"unclosed brace", func(c *Config) { c.Topic = "devices/{device/cmd" }, "topic", "devices/{device/cmd"},
		{"partial level in reply", func(c *Config) { c.ReplyTopic = "devices/dev-{device}/reply" }, "reply_topic", "devices/dev-{device}/reply"},
		{"negative timeout", func(c *Config) { c.ReplyTimeout = -time.Second }, "reply_timeout", "-1s"},
		{"tiny keep alive", func(c *Config) { c.KeepAlive = time.Millisecond }, "keep_alive", "1ms"},
		{"min over max", func(c *Config) { c.ReconnectMinInterval, c.ReconnectMaxInterval = time.Minute, time.Second }, "reconnect_min_interval", "1m0s"},
		{"payload limit", func(c *Config) { c.MaxPayloadBytes = -1 }, "max_payload_bytes", "-1"},
		{"encoding", func(c *Config) { c.PayloadEncoding = "xml" }, "payload_encoding", "xml"},
		{"password alone", func(c *Config) { c.Password = "secret" }, "password", "(hidden)"},
		{"tls on plain broker", func(c *Config) { c.TLS = &TLSConfig{CAFile: "ca.pem"} }, "tls", ""},
		{"cert without key", func(c *Config) {
			c.Brokers = []string{"ssl://127.0.0.1:8883"}
			c.TLS = &TLSConfig{CertFile: "client.pem"}
		}, "tls.cert_file", "client.pem"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate = %v, want a *ConfigError", err)
			}
			if ce.Field != tc.field || ce.Value != tc.value {
				t.Fatalf("ConfigError names %s=%q, want %s=%q (%v)", ce.Field, ce.Value, tc.field, tc.value, err)
			}
			if tc.field == "password" && strings.Contains(err.Error(), "secret") {
				t.Fatalf("error repeats the password: %v", err)
			}
		})
	}
}

func TestValidateReportsEveryBadField(t *testing.T) {
	c := Config{QoS: 5, PayloadEncoding: "xml"}
	err := c.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *ConfigError
		if errors.As(e, &ce) {
			fields = append(fields, ce.Field)
		}
	}
	want := []string{"brokers", "qos", "topic", "payload_encoding", "keys"}
	if strings.Join(fields, ",") != strings.Join(want, ",") {
		t.Fatalf("fields %v, want %v", fields, want)
	}
}

func TestDefaults(t *testing.T) {
	c := validConfig().withDefaults()
	if c.QoS != DefaultQoS || c.ConnectTimeout != DefaultConnectTimeout || c.PublishTimeout != DefaultPublishTimeout ||
		c.ReplyTimeout != DefaultReplyTimeout || c.KeepAlive != DefaultKeepAlive ||
		c.ReconnectMinInterval != DefaultReconnectMinInterval || c.ReconnectMaxInterval != DefaultReconnectMaxInterval ||
		c.MaxPayloadBytes != DefaultMaxPayloadBytes || c.PayloadEncoding != PayloadAuto {
		t.Fatalf("withDefaults = %+v", c)
	}
	small := validConfig()
	small.ReconnectMaxInterval = 50 * time.Millisecond
	if got := small.withDefaults().ReconnectMinInterval; got != 50*time.Millisecond {
		t.Fatalf("min interval %v not capped by a max below the default min", got)
	}
}

// TestConfigFromYAML decodes the example of the package doc, so that the
// documented keys are the keys that work.
func TestConfigFromYAML(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	in := false
	for _, l := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(l, "//	brokers:"):
			in = true
		case in && !strings.HasPrefix(l, "//\t"):
			in = false
		}
		if in {
			lines = append(lines, strings.TrimPrefix(l, "//\t"))
		}
	}
	if len(lines) < 10 {
		t.Fatalf("no YAML example found in doc.go")
	}
	var c Config
	if err := yaml.UnmarshalWithOptions([]byte(strings.Join(lines, "\n")), &c, yaml.Strict()); err != nil {
		t.Fatalf("decode the documented YAML: %v", err)
	}
	if len(c.Brokers) != 2 || c.TLS == nil || c.TLS.CAFile != "/etc/krabka/mqtt-ca.pem" || c.ReplyTimeout != 15*time.Second ||
		c.ReconnectMinInterval != 100*time.Millisecond || c.QoS != 1 || !c.RedispatchSafe || c.PayloadEncoding != PayloadAuto {
		t.Fatalf("decoded %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the documented config does not validate: %v", err)
	}
}

func TestNewReportsUnreadableCertificates(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tls   TLSConfig
		field string
	}{
		{TLSConfig{CAFile: filepath.Join(dir, "missing.pem")}, "tls.ca_file"},
		{TLSConfig{CAFile: notPEM}, "tls.ca_file"},
		{TLSConfig{CertFile: notPEM, KeyFile: notPEM}, "tls.cert_file"},
	}
	for _, tc := range cases {
		c := validConfig()
		c.Brokers = []string{"ssl://127.0.0.1:8883"}
		c.TLS = &tc.tls
		d, err := New(c)
		if err == nil {
			d.Close()
			t.Fatalf("New with %+v succeeded", tc.tls)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Fatalf("New with %+v = %v, want a ConfigError for %s", tc.tls, err, tc.field)
		}
	}
}
