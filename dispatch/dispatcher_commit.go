package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.opentelemetry.io/otel/trace"
)

// newItem encodes an entry of the dispatcher's role and member.
func (d *Dispatcher) newItem(e Entry, span trace.SpanContext) (*item, error) {
	return encodeItem(d.role, d.member, e, span)
}

// waitRoom waits, with d.mu held on entry and on return, until the queue has
// room for one more command. Every enqueuer holds d.mu, so the room it finds
// is still there when the caller enqueues.
func (d *Dispatcher) waitRoom(ctx context.Context) error {
	for !d.halted {
		room, full := d.commits.full()
		if !full {
			break
		}
		if err := d.waitUnlocked(ctx, room); err != nil {
			return err
		}
	}
	if d.halted {
		return ErrHalted
	}
	return nil
}

// waitUnlocked releases d.mu until room closes or ctx ends, and takes it
// again. The caller holds d.mu.
func (d *Dispatcher) waitUnlocked(ctx context.Context, room <-chan struct{}) error {
	d.mu.Unlock()
	defer d.mu.Lock()
	select {
	case <-room:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitPending releases d.mu until room closes, and takes it again. A
// command that waited is not taken once intake stopped: it returns
// ErrIntakeStopped then, and nothing is recorded. The caller holds d.mu.
func (d *Dispatcher) waitPending(ctx context.Context, room <-chan struct{}) error {
	d.mu.Unlock()
	defer d.mu.Lock()
	stopped := d.gate.context().Done()
	select {
	case <-room:
	case <-stopped:
	case <-ctx.Done():
		return ctx.Err()
	}
	return d.gate.open()
}

// pendingFull reports whether the pending commands are at their bound, and
// returns a channel that closes when they fall below it or the dispatcher
// halts. The caller holds d.mu.
func (d *Dispatcher) pendingFull() (room <-chan struct{}, full bool) {
	if d.pending < d.cfg.maxPending || d.halted {
		return nil, false
	}
	if d.pendingRoom == nil {
		d.pendingRoom = make(chan struct{})
	}
	return d.pendingRoom, true
}

// addPending adds n to the pending commands and their gauge, and releases
// the waiters of pendingFull once they fall below the bound. The caller
// holds d.mu.
func (d *Dispatcher) addPending(n int) {
	d.pending += n
	d.tel.pendingDelta(int64(n))
	if d.pendingRoom != nil && d.pending < d.cfg.maxPending {
		close(d.pendingRoom)
		d.pendingRoom = nil
	}
}

// accept registers cmd, a valid command, and queues its records. A command
// whose ID is known is returned as it stands when it repeats the command
// held, and refused with an *IDConflictError when it differs. A command
// whose ID is new and whose SubmittedAt is older than the dedup window is
// refused with an *OutsideWindowError, or, from the requests topic, recorded
// as rejected. mark, when set, is the intake mark of the request that
// carried cmd.
//
// An ID whose hash a compact ID holds is checked exactly by reading that
// ID's first record from the log, without d.mu: either it is the same ID,
// settled, or another one, and accept goes on as for a new ID.
func (d *Dispatcher) accept(ctx context.Context, cmd Command, span trace.SpanContext, mark *item) (*command, error) {
	other := int64(-1) // the First of a compact ID found to hold another ID
	// The Issued record is encoded before d.mu is taken, and dropped when
	// the ID turns out to be known.
	issued, encErr := d.newItem(Entry{Kind: EntryIssued, Issued: &Issued{Command: cmd}}, span)
	for {
		c, hit, err := d.acceptHeld(ctx, cmd, span, mark, other, issued, encErr)
		if hit == nil || err != nil {
			return c, err
		}
		held, same, err := d.readSettled(ctx, cmd.ID, *hit)
		if err != nil {
			return nil, fmt.Errorf("dispatch: command %q: read the settled command that may hold its ID: %w", cmd.ID, err)
		}
		if !same {
			other = hit.First
			continue
		}
		if err := conflict(held, cmd); err != nil {
			return nil, err
		}
		if mark != nil {
			d.mu.Lock()
			err := d.waitRoom(ctx)
			if err == nil {
				d.commits.enqueue(mark)
			}
			d.mu.Unlock()
			if err != nil {
				return nil, err
			}
		}
		return held, nil
	}
}

// acceptHeld is accept under d.mu. It returns the compact ID that holds the
// hash of cmd's ID, unless its First is other, for the caller to check
// without d.mu.
func (d *Dispatcher) acceptHeld(ctx context.Context, cmd Command, span trace.SpanContext, mark *item, other int64, issued *item, encErr error) (*command, *CheckpointID, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acceptLocked(ctx, cmd, span, mark, other, issued, encErr)
}

// acceptLocked is acceptHeld for a caller that holds d.mu. It may let d.mu
// go while it waits for room, and holds it again when it returns.
func (d *Dispatcher) acceptLocked(ctx context.Context, cmd Command, span trace.SpanContext, mark *item, other int64, issued *item, encErr error) (*command, *CheckpointID, error) {
	for {
		if err := d.waitRoom(ctx); err != nil {
			return nil, nil, err
		}
		if c, ok := d.commands[cmd.ID]; ok {
			if err := conflict(c, cmd); err != nil {
				return nil, nil, err
			}
			if mark != nil {
				d.commits.enqueue(mark)
			}
			return c, nil, nil
		}
		if d.loadingWindow() {
			// A new ID is known to be new only once the window is in.
			if err := d.waitWindow(ctx); err != nil {
				return nil, nil, err
			}
			if err := d.gate.open(); err != nil {
				return nil, nil, err
			}
			continue
		}
		if hit, ok := d.ids.find(IDHash(cmd.ID)); ok && hit.First != other {
			return nil, &hit, nil
		}
		if err := d.outsideWindow(cmd, d.now()); err != nil {
			if mark == nil {
				return nil, nil, err
			}
			c, err := d.rejectOutside(cmd, err, mark)
			return c, nil, err
		}
		if encErr != nil {
			return nil, nil, encErr
		}
		// A new command waits for a pending one to settle; d.mu is let go
		// meanwhile, so everything above is asked again.
		if room, full := d.pendingFull(); full {
			if err := d.waitPending(ctx, room); err != nil {
				return nil, nil, err
			}
			continue
		}
		c, err := d.acceptNew(cmd, span, mark, issued)
		return c, nil, err
	}
}

// rejectOutside records a request outside the dedup window as rejected,
// with no Issued record: it was never accepted, and its ID may be that of
// a command the log holds. The caller holds d.mu.
func (d *Dispatcher) rejectOutside(cmd Command, reason error, mark *item) (*command, error) {
	c := &command{cmd: cmd, phase: phaseQueued, attempt: NoAttempt, settled: make(chan struct{}), first: -1, outcomeAt: -1}
	it, err := d.outcomeItem(c, Outcome{Status: StatusRejected, Attempt: NoAttempt, Reason: reason.Error()})
	if err != nil {
		return nil, err
	}
	it.counted = true
	it.intake, it.intakeNext = true, mark.intakeNext
	d.commands[cmd.ID] = c
	d.addPending(1)
	d.commits.enqueue(it)
	return c, nil
}

// acceptNew registers cmd under a new ID, with issued, its encoded Issued
// record. The caller holds d.mu.
func (d *Dispatcher) acceptNew(cmd Command, span trace.SpanContext, mark *item, issued *item) (*command, error) {
	now := time.Now()
	c := &command{cmd: cmd, issued: true, phase: phaseQueued, attempt: FirstAttempt, settled: make(chan struct{}), span: span, issuedAt: now,
		first: -1, outcomeAt: -1}

	// A command that may not be dispatched is recorded with its outcome in
	// the same transaction, or the next.
	var final *Outcome
	check := func() error { _, err := d.registry.Lookup(cmd.Device); return err }
	if mark != nil {
		// Submit checked its command before; a request from the topic is
		// checked here, and recorded as rejected: no one waits to be told.
		check = func() error { return validateFor(d.registry, cmd) }
	}
	if err := check(); err != nil {
		final = &Outcome{Status: StatusRejected, Reason: err.Error()}
	} else if !now.Before(cmd.Deadline) {
		final = &Outcome{Status: StatusExpired, Reason: "the deadline passed before the command was issued"}
	}

	issued.counted = true
	issued.span = d.tel.startRecord(span, "dispatch.issue")
	if mark != nil {
		issued.intake, issued.intakeNext = true, mark.intakeNext
	}
	issued.committed = func(token coordination.FencingToken, offset int64) {
		c.token, c.first = token, offset
		d.setPhase(c, phaseIssued)
		if final == nil {
			d.enqueueJob(c, token, FirstAttempt)
		}
	}
	items := []*item{issued}
	if final != nil {
		final.Attempt = FirstAttempt
		out, err := d.outcomeItem(c, *final)
		if err != nil {
			return nil, err
		}
		items = append(items, out)
	}
	d.commands[cmd.ID] = c
	d.addPending(1)
	d.commits.enqueue(items...)
	return c, nil
}

// errSettled reports an outcome for a command that a terminal outcome
// settled: the log never gets a second one.
var errSettled = errors.New("dispatch: the command is settled; no outcome may follow its terminal outcome")

// outcomeItem builds the record of o for c; it settles c when it commits. It
// refuses a command that is settled already. The caller holds d.mu.
func (d *Dispatcher) outcomeItem(c *command, o Outcome) (*item, error) {
	if err := settledErr(c, o); err != nil {
		return nil, err
	}
	it, err := d.encodeOutcome(c, o)
	if err != nil {
		return nil, err
	}
	it.span = d.tel.startRecord(c.span, "dispatch.outcome")
	return it, nil
}

// settledErr refuses an outcome of a command that a terminal outcome
// settled. The caller holds d.mu.
func settledErr(c *command, o Outcome) error {
	if c.phase == phaseTerminal {
		return fmt.Errorf("dispatch: outcome %s of command %q: %w", o.Status, c.cmd.ID, errSettled)
	}
	return nil
}

// encodeOutcome builds the record of o for c, whatever c's phase; it
// settles c when it commits. It reads only what never changes in c, so the
// caller need not hold d.mu.
func (d *Dispatcher) encodeOutcome(c *command, o Outcome) (*item, error) {
	o.CommandID = c.cmd.ID
	o.Reason = clipText(o.Reason, MaxReasonLen)
	o.Result.Detail = clipText(o.Result.Detail, MaxDetailLen)
	if len(o.Result.Data) > MaxResultDataLen {
		o.Result.Data = o.Result.Data[:MaxResultDataLen]
	}
	it, err := d.newItem(Entry{Kind: EntryOutcome, Outcome: &o}, c.span)
	if err != nil {
		return nil, err
	}
	it.committed = func(_ coordination.FencingToken, offset int64) { d.settle(c, o, offset) }
	it.rides = true
	return it, nil
}

// record queues the outcome o of c. It reports false when the dispatcher
// halted, or the outcome could not be encoded, which leaves c pending for
// the next leader. The record is encoded before d.mu is taken.
func (d *Dispatcher) record(c *command, o Outcome) bool {
	it, err := d.encodeOutcome(c, o)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.halted {
		return false
	}
	if err == nil {
		err = settledErr(c, o)
	}
	if err != nil {
		d.cfg.logger.Error("dispatch: cannot encode an outcome", "command", c.cmd.ID, "err", err)
		return false
	}
	it.span = d.tel.startRecord(c.span, "dispatch.outcome")
	d.commits.enqueue(it)
	return true
}

// setPhase moves c to p and keeps the gauges. The caller holds d.mu.
func (d *Dispatcher) setPhase(c *command, p phase) {
	was := c.phase
	c.phase = p
	d.phaseMoved(was, p)
}

// phaseMoved keeps the gauges of a command that moved from phase was to p.
// The caller holds d.mu.
func (d *Dispatcher) phaseMoved(was, p phase) {
	pendingOf := func(p phase) int {
		if p.pending() {
			return 1
		}
		return 0
	}
	inDoubtOf := func(p phase) int64 {
		if p == phaseInDoubt {
			return 1
		}
		return 0
	}
	d.addPending(pendingOf(p) - pendingOf(was))
	d.tel.inDoubtDelta(inDoubtOf(p) - inDoubtOf(was))
}

// settle applies an outcome committed at offset; an outcome of a command
// that a terminal outcome settled before changes nothing (see
// command_state.go). A command it settles for good is held as a compact ID
// from then on, when it can be. The caller holds d.mu.
func (d *Dispatcher) settle(c *command, o Outcome, offset int64) {
	c.resolving = false
	was := c.phase
	if was == phaseQueued && !c.issued {
		// A request rejected at intake: its outcome is its first record.
		c.first, c.seen = offset, d.now()
	}
	if !c.recorded(o) {
		d.cfg.logger.Error("dispatch: an outcome of a settled command committed; the first terminal outcome stands",
			"command", c.cmd.ID, "status", o.Status, "first", c.outcome.Status)
	} else {
		d.phaseMoved(was, c.phase)
		d.tel.countOutcome(o.Status)
		if c.phase == phaseTerminal {
			c.outcomeAt = offset
			d.compactCommand(c, d.now())
		}
	}
	select {
	case <-c.settled:
	default:
		close(c.settled)
	}
}

// applyBatch applies the effects of a committed batch, in log order, and
// reports its command records to the WithOnCommitted callback. It is the
// committer's one callback and runs on the commit loop.
func (d *Dispatcher) applyBatch(b committedBatch) {
	if done := d.applyEffects(b); len(done) > 0 {
		d.cfg.onCommitted(done)
	}
}

// applyEffects applies the effects of b under d.mu, released by defer should
// an effect panic, and returns the records to report to WithOnCommitted.
func (d *Dispatcher) applyEffects(b committedBatch) []CommittedRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.halted {
		return nil
	}
	var done []CommittedRecord
	for i, it := range b.items {
		offset := b.offsets[i]
		if it.committed != nil {
			it.committed(b.token, offset)
		}
		if it.key != nil && !it.checkpoint {
			d.cpSince++
			d.cpFullSince++
		}
		if d.cfg.onCommitted != nil && it.commandID != "" {
			done = append(done, CommittedRecord{Kind: it.kind, CommandID: it.commandID, Outcome: it.outcome, Offset: offset, Token: b.token})
		}
	}
	return done
}
