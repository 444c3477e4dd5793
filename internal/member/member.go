// Package member runs one member of a role: it competes for the role, runs a
// dispatcher for as long as it leads, competes again when it loses the role,
// and on shutdown lets in-flight commands finish for a bounded time, stops
// dispatching, and resigns so a standby takes over at once.
//
// It is the runtime behind `dispatcher run` and each member of the demo, and
// it implements the httpapi.Backend the HTTP API serves.
package member

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"go.opentelemetry.io/otel/metric"
)

// Defaults of a Config.
const (
	// DefaultShutdownTimeout bounds how long a stopping member lets
	// in-flight commands finish before it cancels them.
	DefaultShutdownTimeout = 10 * time.Second

	// DefaultResignTimeout bounds the tombstone write of a resignation.
	DefaultResignTimeout = 5 * time.Second

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
	// ShutdownTimeout: DefaultShutdownTimeout when zero.
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
	// OnEvent, when set, is called for every change of leadership, from the
	// goroutine of Run. It must not block.
	OnEvent func(Event)
}

// EventKind names a change of a member's leadership.
type EventKind int

// The kinds of Event.
const (
	// EventElected: the member acquired the role; Term and Token are its
	// term and its first token.
	EventElected EventKind = iota + 1
	// EventDeposed: the leadership ended without a resignation; Err says
	// why (a fence wraps coordination.ErrFenced).
	EventDeposed
	// EventResigned: the member gave the role up on shutdown.
	EventResigned
	// EventAbandoned: the member stopped while leading and could not
	// resign (Err says why); the standbys wait for its lease to run out.
	EventAbandoned
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case EventElected:
		return "elected"
	case EventDeposed:
		return "deposed"
	case EventResigned:
		return "resigned"
	case EventAbandoned:
		return "abandoned"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one change of a member's leadership.
type Event struct {
	At     time.Time
	Member string
	Kind   EventKind
	// Term is the term of the leadership the event is about; it orders
	// leaderships.
	Term coordination.Term
	// Token is the leadership's fencing token when the event happened.
	Token coordination.FencingToken
	Err   error
}

// Member is one running member. It is safe for concurrent use.
type Member struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	leadership *coordination.Leadership
	dispatcher *dispatch.Dispatcher
	draining   bool
	state      coordination.RoleState
	stateAt    time.Time
	stateErr   error
	recent     *recent
	submits    sync.WaitGroup // submissions in flight through this member
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
	tel, err := newTelemetry(cfg.MeterProvider, m)
	if err != nil {
		return nil, err
	}
	m.tel = tel
	return m, nil
}

// Run competes for the role until ctx ends, leading whenever it wins. It
// runs one goroutine that reads the role's state for the API, one that
// checks the devices' health every health interval, and while it leads, the
// dispatcher's. When ctx ends it lets in-flight submissions finish
// for up to the shutdown timeout, halts the dispatcher (cancelling what is
// left), resigns, and returns nil after every goroutine it started exited.
func (m *Member) Run(ctx context.Context) error {
	defer m.tel.close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		m.watchState(ctx)
	}()
	go func() {
		defer wg.Done()
		m.checkHealth(ctx)
	}()
	if f, ok := m.cfg.Log.(logFollower); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.followLog(ctx, f)
		}()
	}
	defer wg.Wait()
	for {
		l, err := coordination.AcquireLeadership(ctx, m.cfg.Transport, m.cfg.Role, m.cfg.Member, m.cfg.Coordination...)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			m.log.Warn("competing for the role failed; trying again", "err", err)
			select {
			case <-time.After(m.cfg.PollInterval):
				continue
			case <-ctx.Done():
				return nil
			}
		}
		if err := m.lead(ctx, l); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// lead runs a dispatcher for one leadership, until it ends or ctx ends.
func (m *Member) lead(ctx context.Context, l *coordination.Leadership) error {
	d, err := dispatch.NewDispatcher(l, m.cfg.Registry, m.cfg.Log, m.cfg.Dispatch...)
	if err != nil {
		_ = m.resign(l)
		return fmt.Errorf("member: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()

	m.mu.Lock()
	m.leadership, m.dispatcher, m.draining = l, d, false
	m.mu.Unlock()
	m.log.Info("leading the role", "role", m.cfg.Role.String(), "term", l.Term().String(), "token", l.Token().String())
	m.tel.elected()
	m.emit(Event{Kind: EventElected, Term: l.Term(), Token: l.Token()})

	select {
	case err := <-done:
		m.clear()
		cause := l.Err()
		reason := lossReason(cause)
		if cause == nil {
			// The dispatcher stopped on its own: give the role to a standby.
			cause, reason = err, lossDispatcherStopped
			_ = m.resign(l)
		}
		m.log.Warn("the leadership ended", "cause", cause)
		m.tel.lost(reason)
		m.emit(Event{Kind: EventDeposed, Term: l.Term(), Token: l.Token(), Err: cause})
		m.submits.Wait()
		return nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	m.draining = true
	m.mu.Unlock()
	m.drain(l)
	cancel()
	<-done
	m.clear()
	m.submits.Wait()
	if err := m.resign(l); err != nil {
		m.tel.lost(lossAbandoned)
		m.emit(Event{Kind: EventAbandoned, Term: l.Term(), Token: l.Token(), Err: err})
		return nil
	}
	m.log.Info("resigned the role", "term", l.Term().String(), "token", l.Token().String())
	m.tel.lost(lossResigned)
	m.emit(Event{Kind: EventResigned, Term: l.Term(), Token: l.Token()})
	return nil
}

// drain waits until the submissions in flight finished, the shutdown
// timeout passed, or the leadership ended.
func (m *Member) drain(l *coordination.Leadership) {
	finished := make(chan struct{})
	go func() {
		m.submits.Wait()
		close(finished)
	}()
	timer := time.NewTimer(m.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
		m.log.Warn("shutdown timeout: cancelling the commands still in flight")
	case <-l.Done():
	}
	// The waiter goroutine ends once the dispatcher halts and the
	// submissions return; lead waits for them after the halt.
}

func (m *Member) clear() {
	m.mu.Lock()
	m.leadership, m.dispatcher, m.draining = nil, nil, false
	m.mu.Unlock()
}

// resign gives the role up, bounded by DefaultResignTimeout, and reports a
// resignation that did not reach the cluster.
func (m *Member) resign(l *coordination.Leadership) error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultResignTimeout)
	defer cancel()
	if err := l.Resign(ctx); err != nil && !errors.Is(err, coordination.ErrNotHeld) {
		m.log.Warn("resign failed; the standbys wait for the lease to run out", "err", err)
		return err
	}
	return nil
}

func (m *Member) emit(e Event) {
	if m.cfg.OnEvent == nil {
		return
	}
	e.At = time.Now()
	e.Member = m.cfg.Member.String()
	m.cfg.OnEvent(e)
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leadership == nil {
		return coordination.Authority{Token: coordination.NoEpoch}, false
	}
	return m.leadership.Authority(), true
}
