package config

import (
	"time"

	"github.com/goccy/go-yaml"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Defaults of the settings a file may omit. Each is stated once, here, and
// the documentation of the field that takes it refers to it.
const (
	// DefaultHTTPListen is the address the HTTP API and the status page
	// listen on. It binds loopback only, so exposing the API is a choice.
	DefaultHTTPListen = "127.0.0.1:8080"

	// DefaultLogTopic is the topic of the command log.
	DefaultLogTopic = dispatch.DefaultLogTopic

	// DefaultRequestsTopic is the topic that takes submitted commands.
	DefaultRequestsTopic = dispatch.DefaultRequestsTopic

	// DefaultLogPartitions is the partition count the dispatcher assumes for
	// the log and requests topics. Every member passes the count the topics
	// were created with, because the count picks the partition of a role.
	DefaultLogPartitions = dispatch.DefaultTopicPartitions

	// DefaultDialTimeout bounds one connection attempt to a broker; it feeds
	// franz-go's DialTimeout.
	DefaultDialTimeout = 10 * time.Second

	// DefaultRequestTimeout bounds one short administrative call against the
	// cluster, such as a metadata or DescribeTransactions request.
	DefaultRequestTimeout = 10 * time.Second

	// DefaultShutdownTimeout bounds how long a stopping dispatcher lets the
	// commands already in flight finish before it cancels them.
	DefaultShutdownTimeout = 10 * time.Second

	// DefaultSafetyMargin is the part of its lease a leader keeps in reserve:
	// it dispatches only while more than this margin is left. It covers the
	// clock skew between members and one device write.
	DefaultSafetyMargin = dispatch.DefaultSafetyMargin

	// DefaultDedupWindow is how long command IDs are deduplicated, counted
	// from each command's SubmittedAt.
	DefaultDedupWindow = dispatch.DefaultDedupWindow

	// DefaultMaxPending bounds the commands a leader holds accepted and not
	// yet settled.
	DefaultMaxPending = dispatch.DefaultMaxPending

	// DefaultHealthInterval is the gap between two health checks of the
	// devices.
	DefaultHealthInterval = 10 * time.Second

	// DefaultHealthTimeout bounds one round of health checks of the
	// devices.
	DefaultHealthTimeout = 5 * time.Second
)

// Device types a file may name in [Device.Type].
const (
	// DeviceMQTT is a device driven over MQTT (package devices/mqtt).
	DeviceMQTT = "mqtt"

	// DeviceModbus is a device driven over Modbus TCP or RTU (package
	// devices/modbus).
	DeviceModbus = "modbus"
)

// SASL mechanisms a file may name in [SASL.Mechanism]. They are the names
// Kafka's sasl.mechanism setting uses.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// Config is the whole of dispatcher.yaml.
type Config struct {
	// Role is the role the members compete for. It becomes the Kafka
	// transactional.id, so a Kafka ACL on that transactional id decides who
	// may lead. Required.
	Role string `yaml:"role" json:"role"`

	// Member is this process's identity among the members of the role. A
	// member keeps its id across restarts. Required.
	Member string `yaml:"member" json:"member"`

	// Kafka says how to reach the cluster.
	Kafka Kafka `yaml:"kafka" json:"kafka"`

	// Lease holds the timings of the leadership lease.
	Lease Lease `yaml:"lease" json:"lease"`

	// Topics names the topics the dispatcher reads and writes.
	Topics Topics `yaml:"topics" json:"topics"`

	// HTTP configures the HTTP API, the status page and /metrics.
	HTTP HTTP `yaml:"http" json:"http"`

	// Members maps the id of every member of the role to the base URL of its
	// HTTP API. A member that does not lead answers a submission with the
	// leader's URL from this map, so every member should carry the same map.
	Members map[string]string `yaml:"members" json:"members,omitempty"`

	// Dispatch tunes the dispatcher loop.
	Dispatch Dispatch `yaml:"dispatch" json:"dispatch"`

	// Devices lists the devices this role drives.
	Devices []Device `yaml:"devices" json:"devices"`

	// file and at are where Load read the config and where each field sat
	// in it, so a fault found later names its line.
	file string
	at   map[string]position
}

// locate fills the place of each fault from where its field sat in the file.
func (c *Config) locate(e *ValidationError) {
	for _, p := range e.Problems {
		if p.Line == 0 && c.at != nil {
			pos := locateIn(c.at, p.Field)
			p.Line, p.Column = pos.line, pos.column
		}
		if p.File == "" {
			p.File = c.file
		}
	}
	if e.File == "" {
		e.File = c.file
	}
}

// Kafka says how to reach the cluster.
type Kafka struct {
	// Brokers lists seed brokers as host:port. Required.
	Brokers []string `yaml:"brokers" json:"brokers"`

	// ClientID is the client.id sent to the brokers; the member id when
	// empty.
	ClientID string `yaml:"client_id" json:"client_id,omitempty"`

	// DialTimeout bounds one connection attempt; DefaultDialTimeout when
	// zero.
	DialTimeout time.Duration `yaml:"dial_timeout" json:"dial_timeout"`

	// RequestTimeout bounds one administrative call; DefaultRequestTimeout
	// when zero.
	RequestTimeout time.Duration `yaml:"request_timeout" json:"request_timeout"`

	// TLS enables TLS to the brokers when present.
	TLS *TLS `yaml:"tls" json:"tls,omitempty"`

	// SASL enables SASL authentication when present.
	SASL *SASL `yaml:"sasl" json:"sasl,omitempty"`
}

// TLS configures TLS to the brokers. An empty section enables TLS with the
// host's root certificates.
type TLS struct {
	// CAFile is a PEM bundle of the certificate authorities to trust instead
	// of the host's roots.
	CAFile string `yaml:"ca_file" json:"ca_file,omitempty"`

	// CertFile and KeyFile are a PEM client certificate and its key, for
	// mutual TLS. Give both or neither.
	CertFile string `yaml:"cert_file" json:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file" json:"key_file,omitempty"`

	// ServerName overrides the name checked against the broker certificate.
	ServerName string `yaml:"server_name" json:"server_name,omitempty"`

	// InsecureSkipVerify disables the check of the broker certificate, so
	// anyone on the path can pose as a broker. For tests only: validation
	// refuses it unless AllowUnverifiedBrokers confirms it.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" json:"insecure_skip_verify,omitempty"`

	// AllowUnverifiedBrokers confirms InsecureSkipVerify: the operator
	// accepts that a party on the network path can impersonate the brokers
	// and read or forge the command log. It has no other effect.
	AllowUnverifiedBrokers bool `yaml:"allow_unverified_brokers" json:"allow_unverified_brokers,omitempty"`
}

// SASL configures SASL authentication, through franz-go's sasl packages.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. Required.
	Mechanism string `yaml:"mechanism" json:"mechanism"`

	// Username is the SASL user. Required.
	Username string `yaml:"username" json:"username"`

	// Password is the SASL password. Give exactly one of Password,
	// PasswordFile and PasswordEnv; the last two keep the secret out of the
	// file.
	Password string `yaml:"password" json:"-"`

	// PasswordFile names a file whose content (without a trailing newline)
	// is the password.
	PasswordFile string `yaml:"password_file" json:"password_file,omitempty"`

	// PasswordEnv names an environment variable that holds the password.
	PasswordEnv string `yaml:"password_env" json:"password_env,omitempty"`

	// AllowPlaintextPassword confirms the PLAIN mechanism without kafka.tls:
	// the operator accepts that the password crosses the network in clear
	// text, readable by anyone on the path. Validation refuses PLAIN
	// without TLS unless it is set; it has no other effect.
	AllowPlaintextPassword bool `yaml:"allow_plaintext_password" json:"allow_plaintext_password,omitempty"`
}

// Lease holds the timings of the leadership lease. The lease decides when a
// standby challenges a quiet leader; it does not decide who may write, which
// the broker's producer fencing does.
type Lease struct {
	// Duration is the extent of one lease; coordination.DefaultLeaseDuration
	// when zero.
	Duration time.Duration `yaml:"duration" json:"duration"`

	// RenewInterval is the gap between two renewals by the leader;
	// coordination.DefaultRenewInterval when zero. At most a third of
	// Duration is recommended.
	RenewInterval time.Duration `yaml:"renew_interval" json:"renew_interval"`

	// ChallengeStagger is the extra wait one rank of succession adds;
	// coordination.DefaultChallengeStagger when zero.
	ChallengeStagger time.Duration `yaml:"challenge_stagger" json:"challenge_stagger"`

	// PollInterval is the longest gap between two reads of the coordination
	// topic by a standby; coordination.DefaultPollInterval when zero.
	PollInterval time.Duration `yaml:"poll_interval" json:"poll_interval"`
}

// Topics names the topics the dispatcher reads and writes.
type Topics struct {
	// Coordination is the compacted coordination topic;
	// coordination.StateTopic when empty.
	Coordination string `yaml:"coordination" json:"coordination"`

	// CoordinationPartitions is its partition count;
	// coordination.DefaultPartitions when zero.
	CoordinationPartitions int `yaml:"coordination_partitions" json:"coordination_partitions"`

	// Log is the command log; DefaultLogTopic when empty.
	Log string `yaml:"log" json:"log"`

	// Requests takes submitted commands; DefaultRequestsTopic when empty.
	Requests string `yaml:"requests" json:"requests"`

	// Partitions is the partition count of Log and Requests;
	// DefaultLogPartitions when zero.
	Partitions int `yaml:"partitions" json:"partitions"`
}

// HTTP configures the HTTP API, the status page and /metrics.
type HTTP struct {
	// Listen is the host:port to listen on; DefaultHTTPListen when empty.
	// "off" disables the HTTP server.
	Listen string `yaml:"listen" json:"listen"`

	// Token is the bearer token that the API's write endpoints demand. Give
	// at most one of Token, TokenFile and TokenEnv; with none the API takes
	// submissions from anyone who reaches it.
	Token string `yaml:"token" json:"-"`

	// TokenFile names a file that holds the token.
	TokenFile string `yaml:"token_file" json:"token_file,omitempty"`

	// TokenEnv names an environment variable that holds the token.
	TokenEnv string `yaml:"token_env" json:"token_env,omitempty"`

	// ProtectReads also demands the token for the read endpoints, the
	// status page and /metrics. The health probes /livez, /readyz and
	// /leaderz stay open for load balancers and orchestrators.
	ProtectReads bool `yaml:"protect_reads" json:"protect_reads,omitempty"`

	// TLS serves the API over HTTPS when present.
	TLS *HTTPTLS `yaml:"tls" json:"tls,omitempty"`
}

// HTTPTLS serves the HTTP API over TLS 1.2 or later and says how the
// operator commands reach it. CertFile and KeyFile are the member's; CAFile,
// ClientCertFile and ClientKeyFile are what a command given this file
// (submit, resolve) uses to reach the members.
type HTTPTLS struct {
	// CertFile and KeyFile are the PEM certificate (with its chain) and key
	// the member serves. Required.
	CertFile string `yaml:"cert_file" json:"cert_file"`
	KeyFile  string `yaml:"key_file" json:"key_file"`

	// ClientCAFile is a PEM bundle of the authorities that sign client
	// certificates. When set, a client must present a certificate one of
	// them signed, or the handshake fails; when empty, no client
	// certificate is asked for.
	ClientCAFile string `yaml:"client_ca_file" json:"client_ca_file,omitempty"`

	// CAFile is a PEM bundle of the authorities an operator command trusts
	// for the members' certificates instead of the host's roots.
	CAFile string `yaml:"ca_file" json:"ca_file,omitempty"`

	// ClientCertFile and ClientKeyFile are the PEM certificate and key an
	// operator command presents to members that demand one. Give both or
	// neither.
	ClientCertFile string `yaml:"client_cert_file" json:"client_cert_file,omitempty"`
	ClientKeyFile  string `yaml:"client_key_file" json:"client_key_file,omitempty"`
}

// HTTPOff is the value of [HTTP.Listen] that disables the HTTP server.
const HTTPOff = "off"

// Dispatch tunes the dispatcher loop.
type Dispatch struct {
	// SafetyMargin is the part of its lease a leader keeps in reserve;
	// DefaultSafetyMargin when zero. It must stay below the lease duration.
	SafetyMargin time.Duration `yaml:"safety_margin" json:"safety_margin"`

	// DedupWindow is how long command IDs are deduplicated, counted from
	// each command's SubmittedAt; a command submitted longer ago is refused.
	// DefaultDedupWindow when zero. See dispatch.WithDedupWindow.
	DedupWindow time.Duration `yaml:"dedup_window" json:"dedup_window"`

	// MaxPending bounds the commands accepted and not yet settled; a new
	// submission waits, and intake stops reading the requests topic, while
	// it is reached. DefaultMaxPending when zero. See
	// dispatch.WithMaxPending.
	MaxPending int `yaml:"max_pending" json:"max_pending"`

	// CommitGap, CommitLinger and OutcomeLinger schedule the transactions
	// of the command log: see dispatch.WithCommitGap, WithCommitLinger and
	// WithOutcomeLinger. Omitted, each is its dispatch default; 0s turns it
	// off. A broker whose add.partitions.to.txn.retry.backoff.ms is lowered
	// commits sooner after the last commit, and wants a smaller gap.
	CommitGap     *time.Duration `yaml:"commit_gap" json:"commit_gap"`
	CommitLinger  *time.Duration `yaml:"commit_linger" json:"commit_linger"`
	OutcomeLinger *time.Duration `yaml:"outcome_linger" json:"outcome_linger"`

	// ShutdownTimeout bounds how long a stopping dispatcher lets in-flight
	// commands finish before it cancels them; DefaultShutdownTimeout when
	// zero.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`

	// HealthInterval is the gap between two health checks of the devices;
	// DefaultHealthInterval when zero.
	HealthInterval time.Duration `yaml:"health_interval" json:"health_interval"`

	// HealthTimeout bounds one round of health checks;
	// DefaultHealthTimeout when zero. It must not exceed HealthInterval.
	HealthTimeout time.Duration `yaml:"health_timeout" json:"health_timeout"`

	// ReadyRequiresDevices makes /readyz fail while a device's last health
	// check failed. Off by default: a device down shows in the status, the
	// metrics and the refusal of submissions to it, not in readiness.
	ReadyRequiresDevices bool `yaml:"ready_requires_devices" json:"ready_requires_devices"`
}

// Device is one device the role drives. Exactly the section that Type names
// is set.
type Device struct {
	// Name is the name commands address. Required, unique.
	Name string `yaml:"name" json:"name"`

	// Type is DeviceMQTT or DeviceModbus. Required.
	Type string `yaml:"type" json:"type"`

	// MQTT is the configuration of an MQTT device, in the schema of package
	// devices/mqtt.
	MQTT yaml.RawMessage `yaml:"mqtt" json:"mqtt,omitempty"`

	// Modbus is the configuration of a Modbus device, in the schema of
	// package devices/modbus.
	Modbus yaml.RawMessage `yaml:"modbus" json:"modbus,omitempty"`
}

// Complete fills every omitted setting with its default. It changes nothing
// that the file set.
func (c *Config) Complete() {
	if c.Kafka.ClientID == "" {
		c.Kafka.ClientID = c.Member
	}
	setDuration(&c.Kafka.DialTimeout, DefaultDialTimeout)
	setDuration(&c.Kafka.RequestTimeout, DefaultRequestTimeout)
	setDuration(&c.Lease.Duration, coordination.DefaultLeaseDuration)
	setDuration(&c.Lease.RenewInterval, coordination.DefaultRenewInterval)
	setDuration(&c.Lease.ChallengeStagger, coordination.DefaultChallengeStagger)
	setDuration(&c.Lease.PollInterval, coordination.DefaultPollInterval)
	setString(&c.Topics.Coordination, coordination.StateTopic)
	setInt(&c.Topics.CoordinationPartitions, coordination.DefaultPartitions)
	setString(&c.Topics.Log, DefaultLogTopic)
	setString(&c.Topics.Requests, DefaultRequestsTopic)
	setInt(&c.Topics.Partitions, DefaultLogPartitions)
	setString(&c.HTTP.Listen, DefaultHTTPListen)
	setDuration(&c.Dispatch.SafetyMargin, DefaultSafetyMargin)
	setDuration(&c.Dispatch.DedupWindow, DefaultDedupWindow)
	setInt(&c.Dispatch.MaxPending, DefaultMaxPending)
	setDurationOrOff(&c.Dispatch.CommitGap, dispatch.DefaultCommitGap)
	setDurationOrOff(&c.Dispatch.CommitLinger, dispatch.DefaultCommitLinger)
	setDurationOrOff(&c.Dispatch.OutcomeLinger, dispatch.DefaultOutcomeLinger)
	setDuration(&c.Dispatch.ShutdownTimeout, DefaultShutdownTimeout)
	setDuration(&c.Dispatch.HealthInterval, DefaultHealthInterval)
	setDuration(&c.Dispatch.HealthTimeout, DefaultHealthTimeout)
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// setDurationOrOff sets an omitted duration whose zero means off.
func setDurationOrOff(d **time.Duration, def time.Duration) {
	if *d == nil {
		*d = &def
	}
}

func setString(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func setInt(i *int, def int) {
	if *i == 0 {
		*i = def
	}
}
