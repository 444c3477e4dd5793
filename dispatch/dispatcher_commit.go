package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.opentelemetry.io/otel/trace"
)

// item is one record that waits for a transaction of the command log, or a
// bare intake mark for a request that needs no record of its own.
type item struct {
	// key and value are encoded under a stand-in token; the transaction
	// writes its own token into value (see stampToken).
	key, value []byte
	headers    []coordination.Header

	// counted reports whether the item counts towards maxQueued.
	counted bool

	// intake reports that the item covers the request before intakeNext.
	intake     bool
	intakeNext int64

	// committed applies the record's effect, under d.mu, once the
	// transaction committed under token, at offset in the log partition (-1
	// when the writer cannot tell).
	committed func(token coordination.FencingToken, offset int64)

	// checkpoint reports a checkpoint part, which does not count towards
	// the next checkpoint.
	checkpoint bool

	// span ends when the record commits.
	span trace.Span

	// kind, commandID and outcome describe the record to the
	// WithOnCommitted callback; outcome is set for an Outcome record alone.
	kind      EntryKind
	commandID string
	outcome   *Outcome
}

// newItem encodes an entry of the given kind and body.
func (d *Dispatcher) newItem(e Entry, span trace.SpanContext) (*item, error) {
	e.Role = d.role
	e.Member = d.member
	e.Token = standInToken()
	if e.At.IsZero() {
		e.At = time.Now()
	}
	key, value, err := EncodeEntry(e)
	if err != nil {
		return nil, err
	}
	it := &item{key: key, value: value, headers: traceHeaders(span), kind: e.Kind}
	switch {
	case e.Issued != nil:
		it.commandID = e.Issued.Command.ID
	case e.Redispatched != nil:
		it.commandID = e.Redispatched.CommandID
	case e.Outcome != nil:
		it.commandID, it.outcome = e.Outcome.CommandID, e.Outcome
	}
	return it, nil
}

// enqueue appends items to the queue and wakes the committer. The caller
// holds d.mu.
func (d *Dispatcher) enqueue(items ...*item) {
	for _, it := range items {
		if it.counted {
			d.queued++
		}
	}
	if len(d.queue) == 0 {
		d.since = time.Now()
	}
	d.queue = append(d.queue, items...)
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// waitRoom waits, with d.mu held on entry and on return, until the queue has
// room for one more command.
func (d *Dispatcher) waitRoom(ctx context.Context) error {
	for d.queued >= d.cfg.maxQueued && !d.halted {
		room := d.room
		d.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			d.mu.Lock()
			return ctx.Err()
		}
		d.mu.Lock()
	}
	if d.halted {
		return ErrHalted
	}
	return nil
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
				d.enqueue(mark)
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
	if err := d.waitRoom(ctx); err != nil {
		return nil, nil, err
	}
	if c, ok := d.commands[cmd.ID]; ok {
		if err := conflict(c, cmd); err != nil {
			return nil, nil, err
		}
		if mark != nil {
			d.enqueue(mark)
		}
		return c, nil, nil
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
	c, err := d.acceptNew(cmd, span, mark, issued)
	return c, nil, err
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
	d.tel.pendingDelta(1)
	d.enqueue(it)
	return c, nil
}

// acceptNew registers cmd under a new ID, with issued, its encoded Issued
// record. The caller holds d.mu.
func (d *Dispatcher) acceptNew(cmd Command, span trace.SpanContext, mark *item, issued *item) (*command, error) {
	c := &command{cmd: cmd, issued: true, phase: phaseQueued, attempt: FirstAttempt, settled: make(chan struct{}), span: span, issuedAt: time.Now(),
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
	} else if !time.Now().Before(cmd.Deadline) {
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
	d.tel.pendingDelta(1)
	d.enqueue(items...)
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
	d.enqueue(it)
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
	pendingOf := func(p phase) int64 {
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
	d.tel.pendingDelta(pendingOf(p) - pendingOf(was))
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

// commitLoop runs one transaction at a time, each with every record that
// queued while the one before was in flight, up to the batch bounds. It
// starts the next transaction the commit gap after the one before ended,
// or later when the first record queued less than the commit linger ago
// (see lingerFor).
//
// Between two batches it writes a checkpoint when one is due (see
// maybeCheckpoint).
func (d *Dispatcher) commitLoop() {
	for {
		batch := d.takeBatch()
		if batch == nil {
			return
		}
		if len(batch) > 0 {
			d.commit(batch)
		}
		d.maybeCheckpoint()
	}
}

// takeBatch waits for queued records, and for the commit linger, and takes
// the next batch. It returns an empty batch when the queue is empty and a
// checkpoint is due, and nil when the dispatcher halted.
func (d *Dispatcher) takeBatch() []*item {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		d.mu.Lock()
		if d.halted {
			d.mu.Unlock()
			return nil
		}
		if len(d.queue) == 0 && d.checkpointDueLocked() {
			d.mu.Unlock()
			return []*item{}
		}
		var linger <-chan time.Time
		if len(d.queue) > 0 {
			wait := d.lingerFor()
			if wait <= 0 {
				break
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			linger = timer.C
		}
		d.mu.Unlock()
		select {
		case <-d.wake:
		case <-linger:
		case <-d.haltCtx.Done():
		}
	}
	defer d.mu.Unlock()
	n := d.batchLen()
	batch := d.queue[:n:n]
	d.queue = d.queue[n:]
	if len(d.queue) == 0 {
		d.queue = nil
	} else {
		// What is left waited as long as the batch; it goes next, with no
		// linger of its own.
		d.since = time.Time{}
	}
	for _, it := range batch {
		if it.counted {
			d.queued--
		}
	}
	close(d.room)
	d.room = make(chan struct{})
	return batch
}

// lingerFor returns how much longer the queued records wait before their
// transaction starts: the later of the commit linger after the first of them
// queued and the commit gap after the last transaction ended. The linger
// ends once the batch is full; neither holds while the queue is at its
// bound, where submitters wait for room. The caller holds d.mu, and the
// queue is not empty.
func (d *Dispatcher) lingerFor() time.Duration {
	if d.queued >= d.cfg.maxQueued {
		return 0
	}
	var gap time.Duration
	if d.cfg.commitGap > 0 && !d.committedAt.IsZero() {
		gap = d.cfg.commitGap - time.Since(d.committedAt)
	}
	if d.cfg.commitLinger <= 0 || d.since.IsZero() {
		return gap
	}
	wait := d.cfg.commitLinger - time.Since(d.since)
	if wait <= gap {
		return gap
	}
	if n, records, bytes := d.batchSize(); n < len(d.queue) || records >= d.cfg.maxBatchRecords || bytes >= d.cfg.maxBatchBytes {
		return gap
	}
	return wait
}

// batchLen returns how many queued items the next transaction takes.
func (d *Dispatcher) batchLen() int {
	n, _, _ := d.batchSize()
	return n
}

// batchSize returns how many queued items the next transaction takes, and the
// records and encoded bytes they come to, within the batch bounds. The
// caller holds d.mu.
func (d *Dispatcher) batchSize() (n, records, bytes int) {
	intake := false
	for _, it := range d.queue {
		add := 0
		if it.key != nil {
			add = 1
		}
		if it.intake && !intake {
			add++ // the intake record of the batch
		}
		size := len(it.key) + len(it.value)
		if n > 0 && (records+add > d.cfg.maxBatchRecords || bytes+size > d.cfg.maxBatchBytes) {
			break
		}
		records += add
		bytes += size
		intake = intake || it.intake
		n++
	}
	return n, records, bytes
}

// commit writes batch in one transaction, retrying a failure that leaves the
// leadership in place, and applies the effects once it committed.
func (d *Dispatcher) commit(batch []*item) {
	intakeNext, hasIntake := int64(0), false
	for _, it := range batch {
		if it.intake {
			intakeNext, hasIntake = it.intakeNext, true
		}
	}
	d.mu.Lock()
	intakeFrom := d.intake
	d.mu.Unlock()

	var intakeValue, intakeKey []byte
	if hasIntake {
		it, err := d.newItem(Entry{Kind: EntryIntake, Intake: &IntakePosition{
			Topic: d.requestTP.Topic, Partition: d.requestTP.Partition,
			FromOffset: intakeFrom, NextOffset: intakeNext,
		}}, trace.SpanContext{})
		if err != nil {
			d.cfg.logger.Error("dispatch: cannot encode the intake position", "err", err)
			d.stop(fmt.Errorf("dispatch: encode intake position: %w", err))
			return
		}
		intakeKey, intakeValue = it.key, it.value
	}

	// written and at keep the records of the last build, whose offsets the
	// writer sets once they commit, and the record of each item in batch.
	var written []coordination.GuardedRecord
	at := make([]int, len(batch))
	build := func(token coordination.FencingToken) ([]coordination.GuardedRecord, error) {
		common := []coordination.Header{
			{Key: HeaderToken, Value: []byte(token.String())},
			{Key: HeaderMember, Value: []byte(d.member)},
		}
		records := make([]coordination.GuardedRecord, 0, len(batch)+1)
		for i, it := range batch {
			at[i] = -1
			if it.key == nil {
				continue
			}
			at[i] = len(records)
			stampToken(it.value, token)
			records = append(records, coordination.GuardedRecord{
				Partition: d.logTP, Key: it.key, Value: it.value,
				Headers: append(append([]coordination.Header(nil), common...), it.headers...),
			})
		}
		if hasIntake {
			stampToken(intakeValue, token)
			records = append(records, coordination.GuardedRecord{
				Partition: d.logTP, Key: intakeKey, Value: intakeValue, Headers: common,
			})
		}
		written = records
		return records, nil
	}

	start := time.Now()
	var token coordination.FencingToken
	for {
		var err error
		token, err = d.leader.Write(d.haltCtx, build)
		if err == nil {
			break
		}
		if errors.Is(err, coordination.ErrFenced) {
			d.tel.countFenced()
		}
		if d.haltCtx.Err() != nil || errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrOutcomeUnknown) || errors.Is(err, coordination.ErrNotHeld) {
			// The leadership ends with these; the halt watcher stops the
			// rest. The records are in doubt and the next leader reads what
			// committed.
			d.endSpans(batch, err)
			return
		}
		d.cfg.logger.Warn("dispatch: a log transaction failed; trying again", "records", len(batch), "err", err)
		select {
		case <-time.After(d.cfg.writeRetryBackoff):
		case <-d.haltCtx.Done():
			d.endSpans(batch, err)
			return
		}
	}
	d.committedAt = time.Now()
	d.tel.commitLatency(d.committedAt.Sub(start))
	d.endSpans(batch, nil)

	var done []CommittedRecord
	d.mu.Lock()
	if d.halted {
		d.mu.Unlock()
		return
	}
	for i, it := range batch {
		offset := int64(-1)
		if at[i] >= 0 && at[i] < len(written) {
			offset = written[at[i]].Offset
		}
		if it.committed != nil {
			it.committed(token, offset)
		}
		if it.key != nil && !it.checkpoint {
			d.cpSince++
		}
		if d.cfg.onCommitted != nil && it.commandID != "" {
			done = append(done, CommittedRecord{Kind: it.kind, CommandID: it.commandID, Outcome: it.outcome, Offset: offset, Token: token})
		}
	}
	if hasIntake {
		d.intake = intakeNext
		d.tel.intakeCommitted(intakeNext)
	}
	d.mu.Unlock()
	if len(done) > 0 {
		d.cfg.onCommitted(done)
	}
}

func (d *Dispatcher) endSpans(batch []*item, err error) {
	for _, it := range batch {
		if it.span != nil {
			if err != nil {
				it.span.RecordError(err)
			}
			it.span.End()
		}
	}
}
