package member

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// ErrDispatcherStopped is wrapped by the cause of an [EventDeposed] when the
// dispatcher stopped on its own while the leadership held (its error is
// wrapped beside it); the member then resigned.
var ErrDispatcherStopped = errors.New("member: the dispatcher stopped while the leadership held")

// ErrAlreadyRunning reports a second call of [Member.Run] while one runs.
var ErrAlreadyRunning = errors.New("member: Run is already running")

// leadership is what a member needs of a leadership;
// *coordination.Leadership satisfies it.
type leadership interface {
	dispatch.Leader
	Token() coordination.FencingToken
	Lease() coordination.Lease
	Resign(ctx context.Context) error
}

// work is what a member runs while it leads; *dispatch.Dispatcher
// satisfies it.
type work interface {
	Run(ctx context.Context) error
	Ready() <-chan struct{}
	StopIntake()
	Drain(ctx context.Context) error
}

// Member is one member of a role. Build it with [New] and call Run. Its
// methods are safe for concurrent use.
type Member struct {
	role    coordination.Role
	id      coordination.MemberID
	cfg     *settings
	log     *slog.Logger
	waits   *backoff.ExponentialBackOff
	acquire func(ctx context.Context) (leadership, error)
	build   func(l leadership) (work, *dispatch.Dispatcher, error)

	// standby reads the role's newest full checkpoint ahead while the
	// member does not lead (see prefetch); nil without a dispatcher.
	standby *dispatch.Standby
	wake    chan struct{}

	mu         sync.Mutex
	running    bool
	status     Status
	ready      <-chan struct{} // of the leadership's work; nil outside one
	leadership leadership
	dispatcher *dispatch.Dispatcher
}

// New checks its arguments and options and returns a member of role. It
// starts nothing: call Run.
func New(transport coordination.Transport, role coordination.Role, id coordination.MemberID, options ...Option) (*Member, error) {
	switch {
	case transport == nil:
		return nil, errors.New("member: transport is nil")
	case role == (coordination.Role{}):
		return nil, errors.New("member: role is empty")
	case id == (coordination.MemberID{}):
		return nil, errors.New("member: member id is empty")
	}
	cfg, err := newSettings(options)
	if err != nil {
		return nil, err
	}
	m := newMember(role, id, cfg)
	m.acquire = func(ctx context.Context) (leadership, error) {
		l, err := coordination.AcquireLeadership(ctx, transport, role, id, cfg.coordination...)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	if cfg.registry != nil {
		if _, ok := transport.(coordination.GuardedWriter); !ok {
			return nil, errors.New("member: a dispatcher needs a transport that writes guarded transactions (coordination.GuardedWriter)")
		}
		opts := cfg.dispatch
		if _, ok := cfg.log.(dispatch.LogRangeReader); ok {
			if m.standby, err = dispatch.NewStandby(role, cfg.log, cfg.dispatch...); err != nil {
				return nil, fmt.Errorf("member: %w", err)
			}
			opts = append(slices.Clip(opts), dispatch.WithStandby(m.standby))
		}
		m.build = func(l leadership) (work, *dispatch.Dispatcher, error) {
			d, err := dispatch.NewDispatcher(l, cfg.registry, cfg.log, opts...)
			if err != nil {
				return nil, nil, err
			}
			return d, d, nil
		}
	}
	return m, nil
}

// newMember returns a member whose campaign and work the caller sets.
func newMember(role coordination.Role, id coordination.MemberID, cfg *settings) *Member {
	logger := cfg.logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &Member{
		role: role,
		id:   id,
		cfg:  cfg,
		log:  logger,
		waits: &backoff.ExponentialBackOff{
			InitialInterval:     cfg.backoffFirst,
			RandomizationFactor: backoff.DefaultRandomizationFactor,
			Multiplier:          2,
			MaxInterval:         cfg.backoffMax,
		},
		build: func(l leadership) (work, *dispatch.Dispatcher, error) { return newHoldOnly(l), nil, nil },
		wake:  make(chan struct{}, 1),
	}
	m.waits.Reset()
	m.status = Status{Role: role.String(), Member: id.String(), Phase: PhaseIdle, Since: time.Now(),
		Authority: coordination.Authority{Term: coordination.NoTerm, Token: coordination.NoEpoch}}
	return m
}

// Role returns the member's role.
func (m *Member) Role() coordination.Role { return m.role }

// ID returns the member's id.
func (m *Member) ID() coordination.MemberID { return m.id }

// Run campaigns for the role until ctx ends, leading whenever it wins, as
// the package doc describes. When ctx ends while the member leads, it stops
// intake, drains for up to the drain timeout, halts the dispatcher and
// resigns; Run returns after that, and after the goroutine it started for the
// leadership exited. It returns nil when ctx ended, and an error only when a
// dispatcher cannot be built from the options (the member resigned first) or
// Run is already running.
func (m *Member) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return ErrAlreadyRunning
	}
	m.running = true
	m.mu.Unlock()
	if m.standby != nil {
		pctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { m.prefetch(pctx) })
		defer wg.Wait()
		defer stop()
	}
	defer func() {
		m.setPhase(PhaseStopped, nil)
		m.emit(Event{Kind: EventStopped, Term: coordination.NoTerm, Token: coordination.NoEpoch})
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
	}()
	for ctx.Err() == nil {
		m.setPhase(PhaseCampaigning, nil)
		select {
		case m.wake <- struct{}{}:
		default:
		}
		l, err := m.campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			pause := m.nextPause()
			m.log.Warn("member: campaigning for the role failed; trying again", "role", m.role.String(), "retry_in", pause, "err", err)
			m.setPhase(PhasePausing, err)
			m.emit(Event{Kind: EventCampaignFailed, Term: coordination.NoTerm, Token: coordination.NoEpoch, Err: err, Pause: pause})
			m.pause(ctx, pause)
			continue
		}
		m.waits.Reset()
		pause, ended, err := m.lead(ctx, l)
		if err != nil {
			return err
		}
		if !ended {
			return nil // stopped: drained and resigned
		}
		m.pause(ctx, pause)
	}
	return nil
}

// prefetch has the member's standby read the role's newest full checkpoint
// ahead whenever the member starts to campaign, and every PrefetchInterval
// while it does not lead, until ctx ends. A leader reads nothing ahead: its
// own recovery is over, and the standby lets go of what it held then.
func (m *Member) prefetch(ctx context.Context) {
	tick := time.NewTicker(PrefetchInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-tick.C:
		}
		m.mu.Lock()
		leading := m.leadership != nil
		m.mu.Unlock()
		if leading {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, PrefetchInterval)
		err := m.standby.Prefetch(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			m.log.Warn("member: reading the role's checkpoint ahead failed; a recovery reads it itself", "role", m.role.String(), "err", err)
		}
	}
}

// campaign acquires the role, holding a campaign slot when the member has
// them.
func (m *Member) campaign(ctx context.Context) (leadership, error) {
	if m.cfg.slots != nil {
		select {
		case m.cfg.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		defer func() { <-m.cfg.slots }()
	}
	return m.acquire(ctx)
}

// nextPause is the next jittered pause, never above the longest.
func (m *Member) nextPause() time.Duration {
	return min(m.waits.NextBackOff(), m.cfg.backoffMax)
}

// pause waits d or until ctx ends.
func (m *Member) pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// lead runs the work of one leadership until the leadership ends (ended is
// true, and the member campaigns again after pause) or ctx ends (ended is
// false: the member drained and resigned).
func (m *Member) lead(ctx context.Context, l leadership) (pause time.Duration, ended bool, err error) {
	w, d, err := m.build(l)
	if err != nil {
		_ = m.resign(l)
		return 0, false, fmt.Errorf("member: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()

	m.mu.Lock()
	m.leadership, m.dispatcher, m.ready = l, d, w.Ready()
	m.status.Elections++
	m.status.Phase, m.status.Since = PhaseRecovering, time.Now()
	m.mu.Unlock()
	m.log.Info("member: leading the role", "role", m.role.String(), "term", l.Term().String(), "token", l.Token().String())
	m.emit(Event{Kind: EventElected, Term: l.Term(), Token: l.Token(), Lease: l.Lease()})

	ready := w.Ready()
	for stopping := false; !stopping; {
		select {
		case <-ready:
			ready = nil
			m.setPhase(PhaseLeading, nil)
			m.emit(Event{Kind: EventReady, Term: l.Term(), Token: l.Token()})
		case runErr := <-done:
			return m.deposed(l, runErr, true), true, nil
		case <-ctx.Done():
			stopping = true
		}
	}

	// Stopping while leading: intake first, then the drain, then the halt,
	// then the resignation. Intake stops before the phase and the event say
	// so: whoever acts on EventDraining finds it closed.
	w.StopIntake()
	m.setPhase(PhaseDraining, nil)
	m.emit(Event{Kind: EventDraining, Term: l.Term(), Token: l.Token()})
	dctx, dcancel := context.WithTimeout(context.Background(), m.cfg.drainTimeout)
	drainErr := w.Drain(dctx)
	dcancel()
	if drainErr != nil && !errors.Is(drainErr, dispatch.ErrHalted) {
		m.log.Warn("member: drain timeout: halting with commands in flight; the next leader's recovery settles them", "err", drainErr)
	}
	cancel()
	runErr := <-done
	if l.Err() != nil {
		// The leadership ended during the drain: nothing to resign.
		m.deposed(l, runErr, false)
		return 0, false, nil
	}
	m.leave(PhaseResigning, nil)
	if err := m.resign(l); err != nil {
		m.setPhase(PhaseResigning, err)
		m.emit(Event{Kind: EventAbandoned, Term: l.Term(), Token: l.Token(), Err: err})
		return 0, false, nil
	}
	m.log.Info("member: resigned the role", "role", m.role.String(), "term", l.Term().String())
	m.emit(Event{Kind: EventResigned, Term: l.Term(), Token: l.Token()})
	return 0, false, nil
}

// deposed reports a leadership that ended while the member meant to keep
// it, and returns the pause before the next campaign when again says the
// member campaigns again. A dispatcher that stopped on its own makes the
// member resign.
func (m *Member) deposed(l leadership, runErr error, again bool) time.Duration {
	cause := l.Err()
	var pause time.Duration
	if again {
		pause = m.nextPause()
	}
	m.leave(PhasePausing, cause)
	if cause == nil {
		cause = fmt.Errorf("%w: %w", ErrDispatcherStopped, runErr)
		m.setPhase(PhasePausing, cause)
		_ = m.resign(l)
	}
	m.log.Warn("member: the leadership ended", "role", m.role.String(), "term", l.Term().String(), "err", cause)
	m.emit(Event{Kind: EventDeposed, Term: l.Term(), Token: l.Token(), Err: cause, Pause: pause})
	return pause
}

// leave forgets the leadership and moves the member to p at once, so that
// Status never shows a leading phase without a leadership. A non-nil err
// becomes LastErr.
func (m *Member) leave(p Phase, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leadership, m.dispatcher, m.ready = nil, nil, nil
	m.status.Phase, m.status.Since = p, time.Now()
	if err != nil {
		m.status.LastErr = err
	}
}

// resign gives the role up, bounded by the resign timeout. A leadership that
// ended already is not an error.
func (m *Member) resign(l leadership) error {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.resignTimeout)
	defer cancel()
	if err := l.Resign(ctx); err != nil && !errors.Is(err, coordination.ErrNotHeld) {
		m.log.Warn("member: resigning failed; the standbys wait for the lease to run out", "role", m.role.String(), "err", err)
		return err
	}
	return nil
}

// setPhase moves the member to p; a non-nil err becomes LastErr.
func (m *Member) setPhase(p Phase, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status.Phase, m.status.Since = p, time.Now()
	if err != nil {
		m.status.LastErr = err
	}
}

func (m *Member) emit(e Event) {
	if m.cfg.onEvent == nil {
		return
	}
	e.At = time.Now()
	e.Role = m.role.String()
	e.Member = m.id.String()
	m.cfg.onEvent(e)
}

// Status returns a snapshot of the member.
func (m *Member) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.status
	s.Authority = coordination.Authority{Term: coordination.NoTerm, Token: coordination.NoEpoch}
	s.Lease = coordination.Lease{}
	if m.leadership != nil {
		s.Authority = coordination.Authority{Term: m.leadership.Term(), Token: m.leadership.Token()}
		s.Lease = m.leadership.Lease()
	}
	if m.ready != nil {
		select {
		case <-m.ready:
			s.recovered = true
		default:
		}
	}
	return s
}

// Dispatcher returns the dispatcher of the leadership the member holds now
// (recovering, leading or draining), or nil. Submit to it, look commands up
// in it; it refuses new commands with [dispatch.ErrIntakeStopped] once the
// member drains, and with [dispatch.ErrHalted] once the leadership ended.
func (m *Member) Dispatcher() *dispatch.Dispatcher {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dispatcher
}

// holdOnly is the work of a member without a dispatcher: it holds the role
// until the leadership or ctx ends.
type holdOnly struct {
	l     leadership
	ready chan struct{} // closed: the member is ready when elected
}

func newHoldOnly(l leadership) holdOnly {
	h := holdOnly{l: l, ready: make(chan struct{})}
	close(h.ready)
	return h
}

func (h holdOnly) Ready() <-chan struct{} { return h.ready }

func (h holdOnly) StopIntake() {}

func (h holdOnly) Drain(context.Context) error { return nil }

func (h holdOnly) Run(ctx context.Context) error {
	select {
	case <-h.l.Done():
		return h.l.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}
