package mqtt

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/krabka-io/krabka-dispatch/devices/fence"
)

// Defaults that New applies to the zero fields of a Config.
const (
	// DefaultQoS is the MQTT quality of service of a command publish.
	DefaultQoS = 1

	// DefaultConnectTimeout bounds one connection attempt (TCP, TLS and
	// CONNACK), and how long Dispatch waits for a connection before it fails
	// with a retryable error.
	DefaultConnectTimeout = 5 * time.Second

	// DefaultPublishTimeout bounds the wait for the broker's PUBACK (QoS 1)
	// or PUBCOMP (QoS 2) after a publish.
	DefaultPublishTimeout = 10 * time.Second

	// DefaultReplyTimeout bounds the wait for the device's reply after the
	// broker acknowledged the publish. It applies only with a reply topic.
	DefaultReplyTimeout = 30 * time.Second

	// DefaultKeepAlive is the MQTT keep-alive interval sent in CONNECT; the
	// client pings the broker at this interval and drops a silent
	// connection.
	DefaultKeepAlive = 30 * time.Second

	// DefaultReconnectMinInterval is the first pause after a failed
	// connection attempt; each further failure doubles it.
	DefaultReconnectMinInterval = 100 * time.Millisecond

	// DefaultReconnectMaxInterval caps the pause between connection
	// attempts.
	DefaultReconnectMaxInterval = 10 * time.Second

	// DefaultMaxPayloadBytes caps the size of an encoded envelope. A command
	// whose envelope is larger is rejected before it is published.
	DefaultMaxPayloadBytes = 256 << 10

	// maxPacketPayload is the largest payload that MQTT's remaining-length
	// field can carry.
	maxPacketPayload = 268435455
)

// Payload encodings for [Config.PayloadEncoding].
const (
	// PayloadAuto carries a payload that is valid JSON as a JSON value in
	// the envelope's "payload" field, and any other payload as base64 in
	// "payload_base64". It is the default.
	PayloadAuto = "auto"

	// PayloadJSON carries the payload as a JSON value and rejects a command
	// whose payload is not valid JSON.
	PayloadJSON = "json"

	// PayloadBase64 always carries the payload as base64, so the device
	// receives exactly the submitted bytes.
	PayloadBase64 = "base64"
)

// Config describes one MQTT device: the brokers to connect to, the
// credentials, and the topics the commands and replies travel on. The zero
// value of every optional field selects its Default constant. The yaml tags
// let the dispatcher load it from its configuration file.
type Config struct {
	// Brokers lists the broker URLs, tried in order at each connection
	// attempt: tcp:// or mqtt:// for plain TCP, ssl://, tls://, mqtts:// or
	// tcps:// for TLS, such as "tcp://127.0.0.1:1883". Required.
	Brokers []string `yaml:"brokers"`

	// ClientID is the MQTT client identifier. Two connections with one
	// client id make the broker drop the older one, so every dispatcher
	// member needs its own; empty selects a random id per Device, which is
	// the safe choice because the device uses a clean session.
	ClientID string `yaml:"client_id"`

	// Username and Password authenticate the client. A password without a
	// username is invalid in MQTT 3.1.1.
	Username string `yaml:"username"`
	Password string `yaml:"password"`

	// TLS configures certificate checks for the TLS broker URLs. It may be
	// nil for a TLS broker whose certificate the system roots verify; it
	// must be nil when every broker URL is plain TCP.
	TLS *TLSConfig `yaml:"tls"`

	// QoS is the quality of service of a command publish: 1 (at least once,
	// done at PUBACK) or 2 (exactly once to the broker, done at PUBCOMP).
	// Zero selects DefaultQoS. QoS 0 is not offered: it has no
	// acknowledgement that could end a dispatch.
	QoS int `yaml:"qos"`

	// Topic is the template of the command topic, such as
	// "devices/{device}/cmd". The placeholders {device}, {role} and
	// {action} take the command's fields, which must then be non-empty and
	// free of '/', '+', '#' and NUL. Required.
	Topic string `yaml:"topic"`

	// ReplyTopic is the optional template of the topic the device replies
	// on, such as "devices/{device}/reply". With it, Dispatch returns when
	// the reply with the command's ID arrives instead of at the broker's
	// acknowledgement. Each placeholder must fill a whole topic level,
	// because the device subscribes with a '+' wildcard in its place.
	ReplyTopic string `yaml:"reply_topic"`

	// ReplyTimeout bounds the wait for the reply after the acknowledgement.
	// Zero selects DefaultReplyTimeout.
	ReplyTimeout time.Duration `yaml:"reply_timeout"`

	// ConnectTimeout bounds one connection attempt, and the wait of Dispatch
	// for a connection. Zero selects DefaultConnectTimeout.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`

	// PublishTimeout bounds the wait for PUBACK or PUBCOMP. Zero selects
	// DefaultPublishTimeout.
	PublishTimeout time.Duration `yaml:"publish_timeout"`

	// KeepAlive is the MQTT keep-alive interval. Zero selects
	// DefaultKeepAlive.
	KeepAlive time.Duration `yaml:"keep_alive"`

	// ReconnectMinInterval and ReconnectMaxInterval bound the exponential
	// backoff between connection attempts. Zero selects
	// DefaultReconnectMinInterval and DefaultReconnectMaxInterval.
	ReconnectMinInterval time.Duration `yaml:"reconnect_min_interval"`
	ReconnectMaxInterval time.Duration `yaml:"reconnect_max_interval"`

	// MaxPayloadBytes caps the size of an encoded envelope; a larger command
	// is rejected without a publish. Zero selects DefaultMaxPayloadBytes.
	MaxPayloadBytes int `yaml:"max_payload_bytes"`

	// PayloadEncoding selects how the command payload travels in the
	// envelope: PayloadAuto (the default when empty), PayloadJSON or
	// PayloadBase64.
	PayloadEncoding string `yaml:"payload_encoding"`

	// RedispatchSafe declares that the device firmware deduplicates commands
	// by the envelope's command ID, so that a new leader may publish a
	// command again after a failover. Set it only when that holds: QoS 1
	// delivers at least once, and a redispatch reuses the command ID, so a
	// deduplicating device acts once either way. The default, false, leaves
	// such commands in doubt for an operator.
	RedispatchSafe bool `yaml:"redispatch_safe"`

	// Authenticate signs every command envelope with the device key and
	// verifies every reply (see "Authentication" in the package doc). Nil,
	// the default, means true: a device then needs Keys (or Verifier).
	// Set it to false only where every client that may publish to the
	// command and reply topics is trusted: without it, anyone who can
	// publish to a command topic drives the device and can lock out every
	// real leader with one forged term, and anyone who can publish to a
	// reply topic settles a command as succeeded.
	Authenticate *bool `yaml:"authenticate"`

	// Keys are the device keys: the first signs, every one verifies a
	// reply, so that during a rotation both keys are given. Each names its
	// secret by a file or an environment variable, never inline.
	Keys []KeyConfig `yaml:"keys"`

	// Verifier, for programs that build the Config in Go, holds keys
	// already loaded, in place of Keys.
	Verifier *fence.Verifier `yaml:"-"`
}

// KeyConfig names one device key. The secret is hexadecimal text of at
// least 64 digits (32 bytes, fence.MinKeyBytes), with surrounding white
// space ignored, as `openssl rand -hex 32` writes it.
type KeyConfig struct {
	// ID is the key id that envelopes carry in "kid". Required, unique.
	ID string `yaml:"id"`
	// KeyFile is a file holding the secret. Give exactly one of KeyFile
	// and KeyEnv.
	KeyFile string `yaml:"key_file"`
	// KeyEnv is an environment variable holding the secret.
	KeyEnv string `yaml:"key_env"`
}

// Authenticates reports whether c signs commands and verifies replies:
// true unless Authenticate is set to false.
func (c Config) Authenticates() bool { return c.Authenticate == nil || *c.Authenticate }

// TLSConfig holds the certificate files for TLS broker URLs.
type TLSConfig struct {
	// CAFile is a PEM file of the certificate authorities that verify the
	// broker. Empty selects the system roots.
	CAFile string `yaml:"ca_file"`

	// CertFile and KeyFile are the PEM client certificate and its key, for
	// brokers that require a client certificate. Give both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`

	// ServerName overrides the host name that the broker's certificate must
	// name. Empty selects the host of the broker URL.
	ServerName string `yaml:"server_name"`

	// InsecureSkipVerify turns off the verification of the broker's
	// certificate. It exists for tests only: with it, anyone on the path can
	// impersonate the broker and receive every command.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// ErrInvalidConfig is matched by every [ConfigError].
var ErrInvalidConfig = errors.New("mqtt: invalid configuration")

// ConfigError names a configuration field whose value is invalid.
type ConfigError struct {
	// Field is the YAML path of the field, such as "brokers[1]" or
	// "tls.cert_file".
	Field string
	// Value is the offending value, as text; secrets are not repeated.
	Value string
	// Reason says what is wrong with it.
	Reason string
	// Err is the underlying error, such as a file error, or nil.
	Err error
}

func (e *ConfigError) Error() string {
	s := fmt.Sprintf("mqtt: config field %s = %q: %s", e.Field, e.Value, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

func configErr(field, value, reason string) error {
	return &ConfigError{Field: field, Value: value, Reason: reason}
}

// brokerSchemes maps each accepted URL scheme to whether it uses TLS.
var brokerSchemes = map[string]bool{
	"tcp": false, "mqtt": false,
	"ssl": true, "tls": true, "mqtts": true, "tcps": true,
}

// Validate reports every invalid field of c, joined, each as a
// *[ConfigError]. It reads no file; [New] reports unreadable certificate
// files the same way.
func (c Config) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.Brokers) == 0 {
		add(configErr("brokers", "", "at least one broker URL is required"))
	}
	anyPlain := false
	for i, b := range c.Brokers {
		field := fmt.Sprintf("brokers[%d]", i)
		u, err := url.Parse(b)
		if err != nil {
			add(&ConfigError{Field: field, Value: b, Reason: "not a URL", Err: err})
			continue
		}
		secure, ok := brokerSchemes[strings.ToLower(u.Scheme)]
		if !ok {
			add(configErr(field, b, "scheme must be tcp, mqtt, ssl, tls, mqtts or tcps"))
			continue
		}
		if u.Hostname() == "" || u.Port() == "" {
			add(configErr(field, b, "host and port are required"))
			continue
		}
		if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
			add(configErr(field, b, "port must be 1-65535"))
		}
		if !secure {
			anyPlain = true
		}
	}
	if len(c.ClientID) > 65535 || !utf8.ValidString(c.ClientID) || strings.ContainsRune(c.ClientID, 0) {
		add(configErr("client_id", c.ClientID, "must be UTF-8 without NUL, at most 65535 bytes"))
	}
	if c.Password != "" && c.Username == "" {
		add(configErr("password", "(hidden)", "a password needs a username"))
	}
	if c.TLS != nil {
		if anyPlain {
			add(configErr("tls", "", "TLS settings given but a broker URL is plain tcp"))
		}
		if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
			add(configErr("tls.cert_file", c.TLS.CertFile, "cert_file and key_file go together"))
		}
	}
	if c.QoS != 0 && c.QoS != 1 && c.QoS != 2 {
		add(configErr("qos", strconv.Itoa(c.QoS), "must be 1 or 2"))
	}
	if c.Topic == "" {
		add(configErr("topic", "", "a command topic template is required"))
	} else if _, err := parseTemplate(c.Topic, false); err != nil {
		add(&ConfigError{Field: "topic", Value: c.Topic, Reason: "invalid topic template", Err: err})
	}
	if c.ReplyTopic != "" {
		if _, err := parseTemplate(c.ReplyTopic, true); err != nil {
			add(&ConfigError{Field: "reply_topic", Value: c.ReplyTopic, Reason: "invalid topic template", Err: err})
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"reply_timeout", c.ReplyTimeout},
		{"connect_timeout", c.ConnectTimeout},
		{"publish_timeout", c.PublishTimeout},
		{"keep_alive", c.KeepAlive},
		{"reconnect_min_interval", c.ReconnectMinInterval},
		{"reconnect_max_interval", c.ReconnectMaxInterval},
	} {
		if d.v < 0 {
			add(configErr(d.field, d.v.String(), "must not be negative"))
		}
	}
	if c.KeepAlive > 0 && c.KeepAlive < time.Second {
		add(configErr("keep_alive", c.KeepAlive.String(), "must be at least 1s"))
	}
	if c.ReconnectMinInterval > 0 && c.ReconnectMaxInterval > 0 && c.ReconnectMinInterval > c.ReconnectMaxInterval {
		add(configErr("reconnect_min_interval", c.ReconnectMinInterval.String(), "exceeds reconnect_max_interval"))
	}
	if c.MaxPayloadBytes < 0 || c.MaxPayloadBytes > maxPacketPayload {
		add(configErr("max_payload_bytes", strconv.Itoa(c.MaxPayloadBytes), "must be 0-268435455"))
	}
	switch c.PayloadEncoding {
	case "", PayloadAuto, PayloadJSON, PayloadBase64:
	default:
		add(configErr("payload_encoding", c.PayloadEncoding, "must be auto, json or base64"))
	}
	for _, err := range c.validateKeys() {
		add(err)
	}
	return errors.Join(errs...)
}

// withDefaults returns c with every zero optional field set to its default.
func (c Config) withDefaults() Config {
	if c.QoS == 0 {
		c.QoS = DefaultQoS
	}
	if c.ReplyTimeout == 0 {
		c.ReplyTimeout = DefaultReplyTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.ReconnectMinInterval == 0 {
		c.ReconnectMinInterval = DefaultReconnectMinInterval
	}
	if c.ReconnectMaxInterval == 0 {
		c.ReconnectMaxInterval = DefaultReconnectMaxInterval
	}
	if c.ReconnectMinInterval > c.ReconnectMaxInterval {
		c.ReconnectMinInterval = c.ReconnectMaxInterval
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.PayloadEncoding == "" {
		c.PayloadEncoding = PayloadAuto
	}
	return c
}
