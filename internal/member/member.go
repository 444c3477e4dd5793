// Package member is the binary's member: the runtime of the public package
// [krabkamember] (campaign, lead, drain, resign, campaign again) wired to the
// daemon's config, with what only the daemon needs around it: the
// httpapi.Backend the HTTP API serves (submissions, recent commands, the
// leadership view, readiness), device health checks, and the member's
// metrics.
//
// It is the runtime behind `dispatcher run` and each member of the demo.
package member

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	krabkamember "github.com/krabka-io/krabka-dispatch/member"
	"go.opentelemetry.io/otel/metric"
)

// Defaults of a Config.
const (
	// DefaultShutdownTimeout bounds how long a stopping member lets
	// in-flight commands finish before it cancels them.
	DefaultShutdownTimeout = 10 * time.Second

	// DefaultResignTimeout bounds the tombstone write of a resignation.
	DefaultResignTimeout = krabkamember.DefaultResignTimeout

	// DefaultRecentCommands is how many commands the member remembers for
	// the API and the status page.
	DefaultRecentCommands = 500

	// DefaultHealthInterval is the gap between two health checks of the
	// devices.
	DefaultHealthInterval = 10 * time.Second

	// DefaultHealthTimeout bounds one round of health checks.
	DefaultHealthTimeout = 5 * time.Second
)

// Transport is what a member needs of the cluster: the coordination
// transport, with guarded writes for the dispatcher.
type Transport interface {
	coordination.Transport
	coordination.GuardedWriter
}

// Config configures a Member.
type Config struct {
	// Transport reaches the cluster. Required.
	Transport Transport
	// Role and Member name the role and this member. Required.
	Role   coordination.Role
	Member coordination.MemberID
	// Coordination are the options of AcquireLeadership and
	// DescribeRoleState (topic, partitions, lease timings).
	Coordination []coordination.Option
	// PollInterval is the gap between two reads of the role's state for the
	// API; coordination.DefaultPollInterval when zero.
	PollInterval time.Duration
	// Registry holds the devices. Required.
	Registry *dispatch.Registry
	// Log reads the command log at takeover. Required. When it can also
	// follow the log (as *dispatch.KafkaLogReader can), the member follows
	// its role's partition so the API's recent commands come from the log,
	// on every member, whoever submitted them.
	Log dispatch.LogReader
	// LogTopic and LogPartitions locate the role's partition of the log;
	// dispatch.DefaultLogTopic and dispatch.DefaultTopicPartitions when
	// zero. Pass what the dispatchers use.
	LogTopic      string
	LogPartitions int
	// Dispatch are the options of each dispatcher.
	Dispatch []dispatch.Option
	// Peers maps member ids to the base URLs of their HTTP APIs.
	Peers map[string]string
	// ShutdownTimeout bounds the drain of a stopping leader (see package
	// [krabkamember]); DefaultShutdownTimeout when zero.
	ShutdownTimeout time.Duration
	// HealthInterval is the gap between two health checks of the devices
	// (dispatch.Registry.CheckHealth); DefaultHealthInterval when zero.
	HealthInterval time.Duration
	// HealthTimeout bounds one round of health checks;
	// DefaultHealthTimeout when zero, and never above HealthInterval.
	HealthTimeout time.Duration
	// ReadyRequiresDevices makes Ready fail while a device's last health
	// check failed. Off, a device down shows in the leadership view and
	// the metrics and fails submissions to it, but not readiness.
	ReadyRequiresDevices bool
	// MeterProvider receives the member's metrics (see MetricLeading and
	// the names beside it); none when nil.
	MeterProvider metric.MeterProvider
	// Logger: discard when nil.
	Logger *slog.Logger
	// OnEvent, when set, is called for every event of the member, in order,
	// from the goroutine of Run. It must not block.
	OnEvent func(Event)
}

// Event is one change of the member; see package [krabkamember].
type Event = krabkamember.Event

// EventKind names what happened to the member.
type EventKind = krabkamember.EventKind

// The kinds of Event that the binary and the demo act on; every kind of
// package [krabkamember] reaches OnEvent.
const (
	EventElected   = krabkamember.EventElected
	EventReady     = krabkamember.EventReady
	EventDeposed   = krabkamember.EventDeposed
	EventDraining  = krabkamember.EventDraining
	EventResigned  = krabkamember.EventResigned
	EventAbandoned = krabkamember.EventAbandoned
	EventStopped   = krabkamember.EventStopped
)

// Member is one running member. It is safe for concurrent use.
type Member struct {
	cfg Config
	log *slog.Logger

	rt *krabkamember.Member

	mu       sync.Mutex
	state    coordination.RoleState
	stateAt  time.Time
	stateErr error
	recent   *recent
	submits  sync.WaitGroup // submissions in flight through this member
	// healthChecked reports whether a round of health checks finished.
	healthChecked bool
	tel           *telemetry
}

// New checks the config and returns a member. It starts nothing: call Run.
func New(cfg Config) (*Member, error) {
	switch {
	case cfg.Transport == nil:
		return nil, errors.New("member: transport is nil")
	case cfg.Role == (coordination.Role{}):
		return nil, errors.New("member: role is empty")
	case cfg.Member == (coordination.MemberID{}):
		return nil, errors.New("member: member id is empty")
	case cfg.Registry == nil:
		return nil, errors.New("member: registry is nil")
	case cfg.Log == nil:
		return nil, errors.New("member: log reader is nil")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = coordination.DefaultPollInterval
	}
	if cfg.LogTopic == "" {
		cfg.LogTopic = dispatch.DefaultLogTopic
	}
	if cfg.LogPartitions <= 0 {
		cfg.LogPartitions = dispatch.DefaultTopicPartitions
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = DefaultHealthInterval
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = DefaultHealthTimeout
	}
	cfg.HealthTimeout = min(cfg.HealthTimeout, cfg.HealthInterval)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &Member{cfg: cfg, log: logger.With("member", cfg.Member.String()), recent: newRecent(DefaultRecentCommands)}
	rt, err := krabkamember.New(cfg.Transport, cfg.Role, cfg.Member,
		krabkamember.WithCoordination(cfg.Coordination...),
		krabkamember.WithDispatcher(cfg.Registry, cfg.Log, cfg.Dispatch...),
		krabkamember.WithDrainTimeout(cfg.ShutdownTimeout),
		krabkamember.WithResignTimeout(DefaultResignTimeout),
		krabkamember.WithLogger(m.log),
		krabkamember.WithEventHandler(m.onEvent))
	if err != nil {
		return nil, err
	}
	m.rt = rt
	tel, err := newTelemetry(cfg.MeterProvider, m)
	if err != nil {
		return nil, err
	}
	m.tel = tel
	return m, nil
}

// Run competes for the role until ctx ends, leading whenever it wins (see
// package [krabkamember]). Beside the runtime it runs one goroutine that
// reads the role's state for the API, one that checks the devices' health
// every health interval, and one that follows the command log when the log
// reader can. When ctx ends the runtime stops intake (the API answers "not
// the leader" and the requests topic is no longer read), lets in-flight
// commands finish for up to the shutdown timeout, halts the dispatcher and
// resigns. Run returns after every goroutine it started exited: nil, or the
// runtime's error when a dispatcher cannot be built.
func (m *Member) Run(ctx context.Context) error {
	defer m.tel.close()
	var wg sync.WaitGroup
	wg.Go(func() { m.watchState(ctx) })
	wg.Go(func() { m.checkHealth(ctx) })
	if f, ok := m.cfg.Log.(logFollower); ok {
		wg.Go(func() { m.followLog(ctx, f) })
	}
	defer wg.Wait()
	err := m.rt.Run(ctx)
	m.submits.Wait()
	return err
}

// onEvent counts the leaderships in the metrics and passes every event on.
func (m *Member) onEvent(e Event) {
	switch e.Kind {
	case krabkamember.EventElected:
		m.tel.elected()
	case krabkamember.EventReady:
		// Recovery decoded the newest checkpoint and the records after it;
		// none of that outlives it but the dispatcher's state. Hand the
		// garbage back to the system once, so the daemon's resident size
		// is that of its state, not of its takeover.
		debug.FreeOSMemory()
	case krabkamember.EventDeposed:
		reason := lossReason(e.Err)
		if errors.Is(e.Err, krabkamember.ErrDispatcherStopped) {
			reason = lossDispatcherStopped
		}
		m.tel.lost(reason)
	case krabkamember.EventResigned:
		m.tel.lost(lossResigned)
	case krabkamember.EventAbandoned:
		m.tel.lost(lossAbandoned)
	}
	if m.cfg.OnEvent != nil {
		m.cfg.OnEvent(e)
	}
}

// watchState reads the role's state every poll interval, for the API.
func (m *Member) watchState(ctx context.Context) {
	for {
		rctx, cancel := context.WithTimeout(ctx, m.cfg.PollInterval+5*time.Second)
		state, err := coordination.DescribeRoleState(rctx, m.cfg.Transport, m.cfg.Role, m.cfg.Coordination...)
		cancel()
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		if err == nil {
			m.state, m.stateAt = state, time.Now()
		}
		m.stateErr = err
		m.mu.Unlock()
		select {
		case <-time.After(m.cfg.PollInterval):
		case <-ctx.Done():
			return
		}
	}
}

// Leading reports whether the member leads now, and under which term and
// token.
func (m *Member) Leading() (coordination.Authority, bool) {
	s := m.rt.Status()
	if !s.Leading() {
		return coordination.Authority{Token: coordination.NoEpoch}, false
	}
	return s.Authority, true
}

// Status returns the runtime's snapshot: the phase, and whether the member
// leads and recovered, for the readiness.
func (m *Member) Status() krabkamember.Status { return m.rt.Status() }

// leader returns the dispatcher when the member leads and takes commands;
// nil when it stands by or drains.
func (m *Member) leader() *dispatch.Dispatcher {
	if m.rt.Status().Phase == krabkamember.PhaseDraining {
		return nil
	}
	return m.rt.Dispatcher()
}
