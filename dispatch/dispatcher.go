package dispatch

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// Leader is the part of a leadership that a [Dispatcher] uses.
// *coordination.Leadership satisfies it. The dispatcher never reads the
// leadership's current token: it dispatches under the token that Write
// returns for the record that allows the dispatch.
type Leader interface {
	// Role is the role the leadership holds.
	Role() coordination.Role

	// Member is the member that holds it.
	Member() coordination.MemberID

	// Term orders this leadership among every leadership of the role. It
	// does not change while the leadership holds; every record that Write
	// commits carries it, and every dispatch hands it to the device.
	Term() coordination.Term

	// Done closes when the leadership ends; Err then says why.
	Done() <-chan struct{}

	// Err reports why the leadership ended, after Done closed.
	Err() error

	// Write runs one guarded transaction, serialised with the lease
	// renewals, and returns the token the records were written under. build
	// receives that token. An error that wraps coordination.ErrFenced or
	// coordination.ErrOutcomeUnknown ends the leadership.
	Write(ctx context.Context, build func(token coordination.FencingToken) ([]coordination.GuardedRecord, error)) (coordination.FencingToken, error)

	// ValidFor is the lease freshness: how long the lease has left, measured
	// on the monotonic clock from just before the last committed grant or
	// renewal was written.
	ValidFor() time.Duration

	// Renew writes a lease renewal now.
	Renew(ctx context.Context) error
}

// ErrHalted reports that the dispatcher stopped before the command's outcome
// was recorded: the leadership ended or Run's context ended. The outcome is
// unknown to this member; the next leader's recovery records it.
var ErrHalted = errors.New("dispatch: the dispatcher halted; the command's outcome is unknown here")

// ErrAlreadyRun reports a second call of [Dispatcher.Run]. A Dispatcher
// serves one leadership once; build a new one for the next.
var ErrAlreadyRun = errors.New("dispatch: Run was already called")

// Dispatcher drives devices for the role of one leadership, as the package
// doc's "Lifecycle" section describes. Build one with [NewDispatcher] each
// time the member acquires the role, and call Run.
//
// Run starts these goroutines, and returns only after every one of them has
// exited: the halt watcher, the log committer, intake from the requests topic
// (with [WithRequestSource]), one worker per device with queued commands,
// and, when the log reader is a [LogRangeReader], the checkpoint prober,
// which asks every few seconds how far the log partition moved since the
// last checkpoint.
//
// A Dispatcher is safe for concurrent use.
type Dispatcher struct {
	leader   Leader
	registry *Registry
	log      LogReader
	cfg      *config
	tel      *telemetry
	fresh    *freshness

	role      string
	member    string
	term      coordination.Term
	logTP     coordination.TopicPartition
	requestTP coordination.TopicPartition

	// haltCtx is cancelled the instant the dispatcher halts; every
	// transaction and every Dispatch call runs under it.
	haltCtx context.Context
	halt    context.CancelCauseFunc

	ready   chan struct{} // closed when recovery finished
	gate    intakeGate    // closed when intake stops (drain.go)
	devices chan struct{} // semaphore of the devices driven at once
	wg      sync.WaitGroup

	// commits writes the command log: its queue, batching and commit
	// loop, and the committed intake position. Its lock is taken after
	// d.mu, never before.
	commits *committer

	mu       sync.Mutex
	ran      bool
	halted   bool
	commands map[string]*command
	lanes    map[string]*lane
	// pending counts the commands in a pending phase; pendingRoom, when
	// set, is closed once it falls below the bound (see WithMaxPending).
	pending     int
	pendingRoom chan struct{}

	// ranger is the log reader's LogRangeReader, or nil; with it settled
	// commands are held as compact IDs in ids, and checkpoints are written.
	ranger    LogRangeReader
	ids       *idWindow
	lastSweep time.Time
	// windowLoaded is closed once ids holds the dedup window: at the end
	// of recovery, or, when recovery ended while the member's Standby
	// still read the IDs of its checkpoint, once windowLater returned them
	// (dispatcher_window.go). Until then windowLater is set
	// (loadingWindow): a new ID waits, and nothing is compacted, evicted
	// or checkpointed.
	windowLoaded chan struct{}
	windowLater  func(context.Context) (idBlocks, error)
	recovery     RecoveryStats
	cpSeq        int64 // the sequence of the last checkpoint written
	cpSince      int   // records of the role committed since the last checkpoint
	cpAt         int64 // offset of the last checkpoint's last part, or the log start
	cpDue        bool  // a checkpoint is due whatever cpSince says
	// cpEnded is closed and replaced each time the writing of a checkpoint
	// ends, committed or given up; cpEndedSeq is that checkpoint's
	// sequence. A drain waits on them for its closing checkpoint.
	cpEnded    chan struct{}
	cpEndedSeq int64

	// cpBase is the role's newest full checkpoint, that a delta builds on:
	// the one recovery started from (or its base), then each one this
	// leader commits; cpFullSince counts about the records of the role
	// since its snapshot, and cpAdded holds the IDs added to the window
	// since then (and since the snapshot of a full checkpoint on its way).
	cpBase      *CheckpointBase
	cpFullSince int
	cpAdded     []addedID
}

// NewDispatcher checks its arguments and options and returns a Dispatcher
// for the leadership of leader. It starts nothing: call Run.
//
// log reads the role's partition of the command log at takeover; the
// registry resolves the device names of commands.
func NewDispatcher(leader Leader, registry *Registry, log LogReader, options ...Option) (*Dispatcher, error) {
	if leader == nil {
		return nil, errors.New("dispatch: leader is nil")
	}
	if registry == nil {
		return nil, errors.New("dispatch: registry is nil")
	}
	if log == nil {
		return nil, errors.New("dispatch: log reader is nil")
	}
	cfg, err := newConfig(options)
	if err != nil {
		return nil, err
	}
	role := leader.Role()
	logPartition, err := coordination.RolePartition(role, cfg.logPartitions)
	if err != nil {
		return nil, fmt.Errorf("dispatch: log partition: %w", err)
	}
	requestPartition, err := coordination.RolePartition(role, cfg.requestsPartitions)
	if err != nil {
		return nil, fmt.Errorf("dispatch: requests partition: %w", err)
	}
	tel, err := newTelemetry(cfg.tracerProvider, cfg.meterProvider, role.String(), leader.Member().String())
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		leader:       leader,
		registry:     registry,
		log:          log,
		cfg:          cfg,
		tel:          tel,
		role:         role.String(),
		member:       leader.Member().String(),
		term:         leader.Term(),
		logTP:        coordination.TopicPartition{Topic: cfg.logTopic, Partition: logPartition},
		requestTP:    coordination.TopicPartition{Topic: cfg.requestsTopic, Partition: requestPartition},
		ready:        make(chan struct{}),
		devices:      make(chan struct{}, cfg.maxParallelDevices),
		commands:     make(map[string]*command),
		lanes:        make(map[string]*lane),
		ids:          newIDWindow(),
		windowLoaded: make(chan struct{}),
		cpAt:         -1,
		cpEnded:      make(chan struct{}),
	}
	d.ranger, _ = log.(LogRangeReader)
	if s := cfg.standby; s != nil && (s.role != d.role || s.tp != d.logTP) {
		return nil, fmt.Errorf("dispatch: the standby reads ahead for role %q in %v, not for role %q in %v", s.role, s.tp, d.role, d.logTP)
	}
	d.haltCtx, d.halt = context.WithCancelCause(context.Background())
	d.fresh = newFreshness(d.haltCtx, leader, cfg.safetyMargin, cfg.writeRetryBackoff)
	d.commits = newCommitter(committerConfig{
		writer: leader,
		bounds: commitBounds{
			maxRecords: cfg.maxBatchRecords, maxBytes: cfg.maxBatchBytes, maxQueued: cfg.maxQueued,
			linger: cfg.commitLinger, gap: cfg.commitGap, ride: cfg.outcomeLinger,
		},
		role: d.role, member: d.member, logTP: d.logTP, requestTP: d.requestTP,
		retryBackoff: cfg.writeRetryBackoff, logger: cfg.logger, tel: tel,
		halt:      d.stop,
		committed: d.applyBatch,
	})
	if d.ranger != nil {
		d.commits.cfg.due = d.checkpointDue
		d.commits.cfg.lead = d.checkpointItems
	}
	return d, nil
}

// LogPartition returns the partition of the command log that holds the
// role's records.
func (d *Dispatcher) LogPartition() coordination.TopicPartition { return d.logTP }

// RequestsPartition returns the partition of the requests topic that intake
// reads.
func (d *Dispatcher) RequestsPartition() coordination.TopicPartition { return d.requestTP }

// Run recovers the role's state from the command log (see "Lifecycle" in the
// package doc), then takes commands from intake and [Dispatcher.Submit] and
// dispatches them, until the leadership ends or ctx ends.
//
// When either ends, Run halts: it cancels the context of every Dispatch in
// flight at once, stops intake, writes nothing more, and fails every waiting
// Submit with [ErrHalted]. It returns after every goroutine it started has
// exited, which includes every Dispatch call returning. It returns an error
// that wraps the leadership's Err, or ctx's error, or the error that ended
// recovery, or a *[PanicError] when the dispatcher's code or a device
// panicked: a dispatcher that cannot go on halts and returns, so its caller
// gives the role up rather than hold it without dispatching.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.ran {
		d.mu.Unlock()
		return ErrAlreadyRun
	}
	d.ran = true
	d.mu.Unlock()
	// Deferred calls run last first: halt, so that every goroutine ends,
	// then wait for them, then stop the freshness timer and close the
	// telemetry.
	defer d.tel.close()
	defer d.fresh.close()
	defer d.wg.Wait()
	defer d.stop(ErrHalted)

	d.spawn("the halt watcher", func() { d.watch(ctx) })

	if err := d.guard("recovery", func() error { return d.recover(d.haltCtx) }); err != nil {
		d.stop(err)
		d.cfg.standby.release()
		return d.cause()
	}
	close(d.ready)
	if later := d.windowLater; later != nil {
		d.spawn("the dedup window loader", func() { d.loadWindow(later) })
	}
	d.spawn("the log committer", func() { d.commits.run(d.haltCtx) })
	if d.ranger != nil {
		d.spawn("the checkpoint prober", d.probeLoop)
	}
	if d.cfg.requests != nil {
		d.spawn("intake", d.intakeLoop)
	}
	<-d.haltCtx.Done()
	return d.cause()
}

// PanicError reports a panic in the dispatcher's code or in a device's
// Dispatch. The dispatcher halted on it: [Dispatcher.Run] returns it, and so
// does the Submit or Resolve that met it. The commands in flight are left
// without an outcome, for the next leader's recovery.
type PanicError struct {
	// Where names the goroutine or the call that panicked, such as "recovery"
	// or "the worker of device valve-1".
	Where string

	// Value is the value the panic carried.
	Value any

	// Stack is the stack of the panicking goroutine.
	Stack []byte
}

// Error names where the panic happened and its value.
func (e *PanicError) Error() string {
	return fmt.Sprintf("dispatch: panic in %s: %v", e.Where, e.Value)
}

// Unwrap returns the panic's value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// spawn runs f in a goroutine that Run waits for. A panic in f halts the
// dispatcher with a *PanicError instead of ending the process or leaving the
// goroutine's work undone while the leadership goes on.
func (d *Dispatcher) spawn(where string, f func()) {
	d.wg.Go(func() {
		var err error
		defer d.catch(where, &err)
		f()
	})
}

// guard runs f, and turns a panic in it into a *PanicError that halts the
// dispatcher.
func (d *Dispatcher) guard(where string, f func() error) (err error) {
	defer d.catch(where, &err)
	return f()
}

// catch recovers a panic of its caller's goroutine, sets *err to a
// *PanicError, and halts the dispatcher. The halt cancels haltCtx first,
// without d.mu, so that every goroutine and Run see it; every section under
// d.mu that runs code which could panic releases the lock by defer, so the
// lock is free again by the time catch runs.
func (d *Dispatcher) catch(where string, err *error) {
	v := recover()
	if v == nil {
		return
	}
	perr := &PanicError{Where: where, Value: v, Stack: debug.Stack()}
	*err = perr
	d.cfg.logger.Error("dispatch: halting after a panic", "where", where, "panic", v, "stack", string(perr.Stack))
	d.halt(perr)
	d.stop(perr)
}

// cause returns why the dispatcher halted.
func (d *Dispatcher) cause() error {
	err := context.Cause(d.haltCtx)
	if errors.Is(err, errLeadershipEnded) {
		if lerr := d.leader.Err(); lerr != nil {
			return fmt.Errorf("%w: %w", errLeadershipEnded, lerr)
		}
	}
	return err
}

var errLeadershipEnded = errors.New("dispatch: the leadership ended")

// watch halts the dispatcher the instant the leadership or ctx ends.
func (d *Dispatcher) watch(ctx context.Context) {
	select {
	case <-d.leader.Done():
		d.stop(errLeadershipEnded)
	case <-ctx.Done():
		d.stop(ctx.Err())
	case <-d.haltCtx.Done():
	}
}

// stop halts the dispatcher: every Dispatch context and every transaction in
// flight is cancelled, and every waiter is released. It is idempotent.
func (d *Dispatcher) stop(cause error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.halted {
		return
	}
	d.halted = true
	d.halt(cause)
	d.commits.stop()
	if d.pendingRoom != nil {
		close(d.pendingRoom)
		d.pendingRoom = nil
	}
}

// Submit records cmd in the command log and waits for its outcome: the
// device's result, or a rejection, an expiry, or an in-doubt outcome. It
// fills in an empty Role with the dispatcher's role, a zero SubmittedAt with
// now, and a zero Deadline with SubmittedAt plus the command timeout
// ([WithCommandTimeout]).
//
// A command whose ID the log already holds is not dispatched again: when it
// is the same command ([Command.SameAs]) Submit returns (or waits for) the
// outcome of the first, and when it differs Submit returns an
// *[IDConflictError] and records nothing. A command that [Command.Validate]
// refuses returns its *InvalidCommandError, a command for a device that the
// registry lacks an *[UnknownDeviceError], and a command that the device's
// [CommandValidator] refuses an *[UnsupportedCommandError]. A command for a
// device whose last health check ([Registry.CheckHealth]) failed, and which
// still fails when asked again ([Registry.Unavailable]), returns a
// *[DeviceUnavailableError]. None of them is
// recorded.
//
// Submit returns [ErrHalted] when the dispatcher halts first; the command
// may then have been recorded and even dispatched. A panic inside the
// dispatcher's own code halts it, and Submit returns the *[PanicError]. When
// ctx ends first it returns ctx's error, and the command goes on without the
// caller. After [Dispatcher.StopIntake] it returns [ErrIntakeStopped].
func (d *Dispatcher) Submit(ctx context.Context, cmd Command) (Outcome, error) {
	ctx, span := d.tel.startSubmit(ctx, cmd)
	defer span.End()
	if err := d.gate.open(); err != nil {
		return Outcome{}, err
	}
	cmd, err := d.prepare(ctx, cmd, d.now())
	if err != nil {
		span.RecordError(err)
		return Outcome{}, err
	}
	if err := d.awaitClosed(ctx, d.ready); err != nil {
		return Outcome{}, err
	}
	var c *command
	err = d.guard("Submit", func() (err error) {
		if err := d.admit(cmd); err != nil {
			return err
		}
		c, err = d.accept(ctx, cmd, span.SpanContext(), nil)
		return err
	})
	if err != nil {
		span.RecordError(err)
		return Outcome{}, err
	}
	return d.await(ctx, c)
}

// Recovered reports whether the dispatcher finished reading its role's log
// at takeover and takes commands.
func (d *Dispatcher) Recovered() bool {
	select {
	case <-d.ready:
		return true
	default:
		return false
	}
}

// prepare completes cmd and refuses it, before anything is written, when it
// does not validate or its device is unavailable.
func (d *Dispatcher) prepare(ctx context.Context, cmd Command, now time.Time) (Command, error) {
	cmd = d.complete(cmd, now)
	if err := cmd.Validate(); err != nil {
		return cmd, err
	}
	return cmd, d.registry.Unavailable(ctx, cmd.Device)
}

// awaitClosed waits until ch closes (d.ready, when recovery is over, or
// d.windowLoaded), and returns ErrHalted when the dispatcher halts first and
// ctx's error when ctx ends first.
func (d *Dispatcher) awaitClosed(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-d.haltCtx.Done():
		return ErrHalted
	case <-ctx.Done():
		return ctx.Err()
	}
}

// complete fills in the fields a submitter may leave empty.
func (d *Dispatcher) complete(cmd Command, now time.Time) Command {
	if cmd.Role == "" {
		cmd.Role = d.role
	}
	if cmd.SubmittedAt.IsZero() {
		cmd.SubmittedAt = now
	}
	if cmd.Deadline.IsZero() {
		cmd.Deadline = cmd.SubmittedAt.Add(d.cfg.commandTimeout)
	}
	return cmd
}

// await waits for c to settle.
func (d *Dispatcher) await(ctx context.Context, c *command) (Outcome, error) {
	d.mu.Lock()
	settled := c.settled
	d.mu.Unlock()
	select {
	case <-settled:
		d.mu.Lock()
		defer d.mu.Unlock()
		return c.outcome, nil
	case <-d.haltCtx.Done():
		// A settle that committed just before the halt still counts.
		d.mu.Lock()
		defer d.mu.Unlock()
		if (c.phase == phaseTerminal || c.phase == phaseInDoubt) && !c.resolving {
			return c.outcome, nil
		}
		return Outcome{}, ErrHalted
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
}

// Lookup returns the latest outcome of the command with this ID. ok is false
// for an ID the dispatcher does not hold: one the log never held, or one
// whose command left the dedup window ([WithDedupWindow]). An outcome with
// StatusPending means the command is queued, issued or in dispatch.
//
// A settled command inside the window may be held only as a compact ID; its
// outcome is then read from the log at its recorded offset, a read of one
// record bounded by [DefaultKafkaRequestTimeout]. When that read fails,
// Lookup reports ok false; [Dispatcher.LookupContext] returns the error.
func (d *Dispatcher) Lookup(id string) (outcome Outcome, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultKafkaRequestTimeout)
	defer cancel()
	o, ok, err := d.LookupContext(ctx, id)
	if err != nil {
		d.cfg.logger.Warn("dispatch: cannot read a settled command's outcome from the log", "command", id, "err", err)
		return Outcome{}, false
	}
	return o, ok
}

// LookupContext is [Dispatcher.Lookup] under ctx, which bounds the read of a
// settled command's records from the log; it returns the error of that
// read.
func (d *Dispatcher) LookupContext(ctx context.Context, id string) (outcome Outcome, ok bool, err error) {
	d.mu.Lock()
	c, ok := d.commands[id]
	if !ok && d.loadingWindow() {
		if err := d.waitWindow(ctx); err != nil {
			d.mu.Unlock()
			return Outcome{}, false, err
		}
		c, ok = d.commands[id]
	}
	var hit CheckpointID
	var held bool
	if !ok {
		hit, held = d.ids.find(IDHash(id))
	}
	d.mu.Unlock()
	if !ok {
		if !held {
			return Outcome{}, false, nil
		}
		c, same, err := d.readSettled(ctx, id, hit)
		if err != nil || !same {
			return Outcome{}, false, err
		}
		return c.outcome, true, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.phase == phaseQueued || c.phase == phaseIssued {
		return Outcome{CommandID: id, Status: StatusPending, Attempt: c.attempt}, true, nil
	}
	return c.outcome, true, nil
}

// InDoubt returns the IDs of the commands recorded in doubt and not yet
// resolved, in sorted order, for an operator to [Dispatcher.Resolve].
func (d *Dispatcher) InDoubt() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for id, c := range d.commands {
		if c.phase == phaseInDoubt && !c.resolving {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
