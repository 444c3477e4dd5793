package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

const redacted = "<redacted>"

// validator collects faults.
type validator struct {
	problems []*FieldError
}

func (v *validator) add(field, value, problem string, args ...any) {
	v.problems = append(v.problems, &FieldError{Field: field, Value: value, Problem: fmt.Sprintf(problem, args...)})
}

// hint adds a fault with its fix apart.
func (v *validator) hint(field, value, problem, hint string) {
	v.problems = append(v.problems, &FieldError{Field: field, Value: value, Problem: problem, Hint: hint})
}

// Validate checks every field of a completed config and returns a
// *ValidationError that lists every fault, or nil. It reads the files and
// environment variables that the kafka section names for secrets and
// certificates, which every command that reaches the cluster needs, to
// report a missing one now rather than at the first connection. It does not
// resolve the member's own secrets: see [Config.CheckMemberSecrets].
func (c *Config) Validate() error {
	var v validator
	if _, err := coordination.NewRole(c.Role); err != nil {
		v.add("role", c.Role, "want a role name of 1 to %d bytes", coordination.MaxRoleLen)
	}
	if _, err := coordination.NewMemberID(c.Member); err != nil {
		v.add("member", c.Member, "want a member id of 1 to %d bytes", coordination.MaxMemberIDLen)
	}
	c.Kafka.validate(&v)
	c.Lease.validate(&v)
	c.Topics.validate(&v)
	c.HTTP.validate(&v)
	c.validateMembers(&v)
	c.Dispatch.validate(&v, c.Lease.Duration)
	c.validateDevices(&v)
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: v.problems}
}

// CheckMemberSecrets resolves the secrets only a running member uses (the
// HTTP API's bearer token from its file or environment variable, and the
// certificate, key and client authorities http.tls names) and returns a
// *ValidationError naming each one that does not resolve, or nil.
// [Config.Validate] leaves them alone, so an operator command that never
// serves the API does not need them.
func (c *Config) CheckMemberSecrets() error {
	var v validator
	h := c.HTTP
	secretSource(&v, "http.token", h.Token, h.TokenFile, h.TokenEnv, false, true)
	if h.TLS != nil && h.Listen != HTTPOff {
		h.TLS.checkServerFiles(&v)
	}
	return c.faults(&v)
}

// CheckToken resolves only the HTTP API's bearer token, as a command that
// calls the API with this file's token needs it, and returns a
// *ValidationError when it does not resolve, or nil.
func (c *Config) CheckToken() error {
	var v validator
	h := c.HTTP
	secretSource(&v, "http.token", h.Token, h.TokenFile, h.TokenEnv, false, true)
	return c.faults(&v)
}

// faults returns the faults v collected, placed in the file, or nil.
func (c *Config) faults(v *validator) error {
	if len(v.problems) == 0 {
		return nil
	}
	e := &ValidationError{Problems: v.problems}
	c.locate(e)
	sortProblems(e.Problems)
	return e
}

func (k *Kafka) validate(v *validator) {
	if len(k.Brokers) == 0 {
		v.add("kafka.brokers", "", "want at least one broker as host:port")
	}
	for i, b := range k.Brokers {
		if err := checkHostPort(b); err != nil {
			v.add(fmt.Sprintf("kafka.brokers[%d]", i), b, "%v", err)
		}
	}
	positive(v, "kafka.dial_timeout", k.DialTimeout)
	positive(v, "kafka.request_timeout", k.RequestTimeout)
	if t := k.TLS; t != nil {
		fileReadable(v, "kafka.tls.ca_file", t.CAFile)
		fileReadable(v, "kafka.tls.cert_file", t.CertFile)
		fileReadable(v, "kafka.tls.key_file", t.KeyFile)
		bothOrNeither(v, "kafka.tls.cert_file", t.CertFile, "kafka.tls.key_file", t.KeyFile)
		if t.InsecureSkipVerify && !t.AllowUnverifiedBrokers {
			v.hint("kafka.tls.insecure_skip_verify", "true",
				"turns off the check of the broker certificate, so anyone on the network path can pose as a broker and read or forge the command log",
				"trust the brokers' authority with kafka.tls.ca_file instead, or accept the risk with kafka.tls.allow_unverified_brokers: true")
		}
	}
	if s := k.SASL; s != nil {
		switch s.Mechanism {
		case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		default:
			v.add("kafka.sasl.mechanism", s.Mechanism, "want one of %s, %s, %s", MechanismPlain, MechanismScramSHA256, MechanismScramSHA512)
		}
		if s.Username == "" {
			v.add("kafka.sasl.username", "", "required with sasl")
		}
		secretSource(v, "kafka.sasl.password", s.Password, s.PasswordFile, s.PasswordEnv, true, true)
		if s.Mechanism == MechanismPlain && k.TLS == nil && !s.AllowPlaintextPassword {
			v.hint("kafka.sasl.mechanism", s.Mechanism,
				"PLAIN without kafka.tls sends the password in clear text, readable by anyone on the network path",
				"turn on kafka.tls, or use "+MechanismScramSHA512+", or accept the risk with kafka.sasl.allow_plaintext_password: true")
		}
	}
}

// bothOrNeither reports a pair of settings of which only one is set.
func bothOrNeither(v *validator, fieldA, a, fieldB, b string) {
	switch {
	case a == "" && b != "":
		v.add(fieldA, "", "%s is set: give %s too, or neither", leaf(fieldB), leaf(fieldA))
	case a != "" && b == "":
		v.add(fieldB, "", "%s is set: give %s too, or neither", leaf(fieldA), leaf(fieldB))
	}
}

func (l *Lease) validate(v *validator) {
	ok := positive(v, "lease.duration", l.Duration)
	ok = positive(v, "lease.renew_interval", l.RenewInterval) && ok
	ok = positive(v, "lease.challenge_stagger", l.ChallengeStagger) && ok
	positive(v, "lease.poll_interval", l.PollInterval)
	if ok && l.RenewInterval >= l.Duration {
		v.add("lease.renew_interval", l.RenewInterval.String(), "must be below lease.duration (%s); a third of it leaves two spare renewals", l.Duration)
	}
}

func (t *Topics) validate(v *validator) {
	checkTopicName(v, "topics.coordination", t.Coordination)
	checkTopicName(v, "topics.log", t.Log)
	checkTopicName(v, "topics.requests", t.Requests)
	if t.CoordinationPartitions <= 0 {
		v.add("topics.coordination_partitions", strconv.Itoa(t.CoordinationPartitions), "want a partition count above 0")
	}
	if t.Partitions <= 0 {
		v.add("topics.partitions", strconv.Itoa(t.Partitions), "want a partition count above 0")
	}
	if t.Log != "" && t.Log == t.Requests {
		v.add("topics.requests", t.Requests, "must differ from topics.log")
	}
	if t.Coordination != "" && (t.Coordination == t.Log || t.Coordination == t.Requests) {
		v.add("topics.coordination", t.Coordination, "must differ from topics.log and topics.requests")
	}
}

func (h *HTTP) validate(v *validator) {
	if h.Listen != HTTPOff {
		if err := checkListen(h.Listen); err != nil {
			v.add("http.listen", h.Listen, "%v (or %q to disable)", err, HTTPOff)
		}
	}
	secretSource(v, "http.token", h.Token, h.TokenFile, h.TokenEnv, false, false)
	if h.ProtectReads && h.Token == "" && h.TokenFile == "" && h.TokenEnv == "" {
		v.add("http.protect_reads", "true", "needs a token: set http.token, http.token_file or http.token_env")
	}
	if h.TLS != nil {
		h.TLS.validate(v, h.Listen != HTTPOff)
	}
}

func (c *Config) validateMembers(v *validator) {
	for id, base := range c.Members {
		field := "members." + id
		if _, err := coordination.NewMemberID(id); err != nil {
			v.add("members", id, "want member ids of 1 to %d bytes", coordination.MaxMemberIDLen)
			continue
		}
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(field, base, "want the base URL of the member's HTTP API, such as http://10.0.0.1:8080")
		}
	}
	if len(c.Members) > 0 && c.Member != "" {
		own, ok := c.Members[c.Member]
		switch {
		case !ok:
			v.add("members", c.Member, "lists other members but not this one (member %q)", c.Member)
		case c.HTTP.TLS != nil && c.HTTP.Listen != HTTPOff && strings.HasPrefix(own, "http://"):
			// Standbys redirect clients to this URL, which would then
			// speak plain HTTP to a server that answers only TLS.
			v.hint("members."+c.Member, own, "http.tls is on, so this member answers only https",
				"write its URL as https://")
		}
	}
}

func (d *Dispatch) validate(v *validator, lease time.Duration) {
	if positive(v, "dispatch.safety_margin", d.SafetyMargin) && lease > 0 && d.SafetyMargin >= lease {
		v.add("dispatch.safety_margin", d.SafetyMargin.String(), "must be below lease.duration (%s), or the leader never dispatches", lease)
	}
	positive(v, "dispatch.shutdown_timeout", d.ShutdownTimeout)
	positive(v, "dispatch.dedup_window", d.DedupWindow)
	notNegative(v, "dispatch.commit_gap", d.CommitGap)
	notNegative(v, "dispatch.commit_linger", d.CommitLinger)
	notNegative(v, "dispatch.outcome_linger", d.OutcomeLinger)
	if d.MaxPending <= 0 {
		v.add("dispatch.max_pending", strconv.Itoa(d.MaxPending), "want a count of commands above 0")
	}
	if positive(v, "dispatch.health_interval", d.HealthInterval) && positive(v, "dispatch.health_timeout", d.HealthTimeout) &&
		d.HealthTimeout > d.HealthInterval {
		v.add("dispatch.health_timeout", d.HealthTimeout.String(), "must not exceed dispatch.health_interval (%s)", d.HealthInterval)
	}
}

func (c *Config) validateDevices(v *validator) {
	seen := make(map[string]int, len(c.Devices))
	for i, d := range c.Devices {
		prefix := fmt.Sprintf("devices[%d]", i)
		switch {
		case d.Name == "":
			v.add(prefix+".name", "", "required")
		case strings.ContainsAny(d.Name, " \t\n/{}"):
			v.add(prefix+".name", d.Name, "want a name without blanks, slashes or braces")
		default:
			if j, dup := seen[d.Name]; dup {
				v.add(prefix+".name", d.Name, "already names devices[%d]", j)
			}
			seen[d.Name] = i
		}
		switch d.Type {
		case DeviceMQTT:
			if len(d.MQTT) == 0 {
				v.add(prefix+".mqtt", "", "required for a device of type %s", DeviceMQTT)
			}
			if len(d.Modbus) != 0 {
				v.add(prefix+".modbus", "set", "not allowed for a device of type %s", DeviceMQTT)
			}
		case DeviceModbus:
			if len(d.Modbus) == 0 {
				v.add(prefix+".modbus", "", "required for a device of type %s", DeviceModbus)
			}
			if len(d.MQTT) != 0 {
				v.add(prefix+".mqtt", "set", "not allowed for a device of type %s", DeviceModbus)
			}
		default:
			v.add(prefix+".type", d.Type, "want %s or %s", DeviceMQTT, DeviceModbus)
			continue
		}
		if err := checkDevice(d); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				field := prefix + "." + d.Type
				if fe.Field != "" {
					field += "." + fe.Field
				}
				v.add(field, fe.Value, "%s", fe.Problem)
			} else {
				v.add(prefix+"."+d.Type, "", "%v", err)
			}
		}
	}
}

// positive reports a negative or zero duration and returns whether d is
// positive.
func positive(v *validator, field string, d time.Duration) bool {
	if d <= 0 {
		v.hint(field, d.String(), "must be above 0", "a duration such as 10s")
		return false
	}
	return true
}

// notNegative checks a duration whose zero turns a wait off; nil is
// omitted.
func notNegative(v *validator, field string, d *time.Duration) {
	if d != nil && *d < 0 {
		v.hint(field, d.String(), "must not be negative", "a duration such as 5ms, or 0s to turn it off")
	}
}

func fileReadable(v *validator, field, path string) {
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		v.add(field, path, "cannot be read: %v", errors.Unwrap(err))
		return
	}
	_ = f.Close()
}

// secretSource checks that at most one (or, when required, exactly one) of
// the three places of a secret is set, and, when resolve is set, that the
// one set resolves.
func secretSource(v *validator, field, inline, file, env string, required, resolve bool) {
	n := 0
	for _, s := range []string{inline, file, env} {
		if s != "" {
			n++
		}
	}
	switch {
	case n > 1:
		v.add(field, redacted, "give only one of %s, %s_file and %s_env", leaf(field), leaf(field), leaf(field))
		return
	case n == 0 && required:
		v.add(field, "", "required: set %s, %s_file or %s_env", leaf(field), leaf(field), leaf(field))
		return
	}
	if !resolve {
		return
	}
	if file != "" {
		fileReadable(v, field+"_file", file)
	}
	if env != "" {
		if val, ok := os.LookupEnv(env); !ok || val == "" {
			v.add(field+"_env", env, "the environment variable is unset or empty")
		}
	}
}

func leaf(field string) string {
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		return field[i+1:]
	}
	return field
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" {
		return errors.New("want host:port with a host")
	}
	return checkPort(port)
}

func checkListen(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want host:port, such as 127.0.0.1:8080 or :8080")
	}
	if port == "0" {
		return nil
	}
	return checkPort(port)
}

func checkPort(port string) error {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return nil
}

// checkTopicName applies Kafka's rule for topic names.
func checkTopicName(v *validator, field, name string) {
	if name == "" {
		v.add(field, name, "required")
		return
	}
	if name == "." || name == ".." || len(name) > 249 {
		v.add(field, name, "want 1 to 249 characters, not . or ..")
		return
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			v.add(field, name, "want only letters, digits, '.', '_' and '-' (Kafka's rule for names)")
			return
		}
	}
}
