package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// LogReader reads one partition of the command log, read_committed, from its
// start past the high watermark taken when the read began, in offset order,
// waiting for any transaction that holds the last stable offset below it:
// the dispatcher calls it after its leadership fenced the predecessor, so the
// read holds every record the predecessor committed.
// [KafkaLogReader.ReadLog] does this over Kafka; a test passes a fake.
type LogReader interface {
	ReadLog(ctx context.Context, partition coordination.TopicPartition) ([]Entry, error)
}

// LogReaderFunc adapts a function to [LogReader].
type LogReaderFunc func(ctx context.Context, partition coordination.TopicPartition) ([]Entry, error)

// ReadLog calls f.
func (f LogReaderFunc) ReadLog(ctx context.Context, partition coordination.TopicPartition) ([]Entry, error) {
	return f(ctx, partition)
}

// recover rebuilds the role's state from its log partition, before any
// intake: every command ID inside the dedup window (so a duplicate is never
// issued again), the intake position, and the pending commands, which it
// settles as the package doc's "Takeover" describes. With a
// [LogRangeReader] it starts from the newest checkpoint and reads only the
// records after it; otherwise it reads the whole partition. The records it
// queues commit in the first transactions of the leadership, ahead of any
// new command.
func (d *Dispatcher) recover(ctx context.Context) error {
	began := time.Now()
	var state recovered
	var stats RecoveryStats
	if d.ranger != nil {
		var err error
		if state, stats, err = d.recoverFromCheckpoint(ctx); err != nil {
			return fmt.Errorf("dispatch: recover the log of role %s: %w", d.role, err)
		}
	} else {
		entries, err := d.readLog(ctx)
		if err != nil {
			return fmt.Errorf("dispatch: recover the log of role %s: %w", d.role, err)
		}
		state = foldLog(d.role, d.requestTP, entries)
		stats = RecoveryStats{RecordsRead: len(entries), CheckpointOffset: -1, BaseOffset: -1, TailRecords: len(entries)}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	d.recovery = stats
	d.commits.setIntake(state.intake)
	d.tel.intakeCommitted(state.intake)
	now := d.now()
	cutoff := now.Add(-d.cfg.dedupWindow - DedupClockSkew)
	if state.idsLater != nil {
		d.windowLater = state.idsLater
	} else {
		if err := d.ids.load(state.ids, cutoff); err != nil {
			return fmt.Errorf("dispatch: recover the log of role %s: %w", d.role, err)
		}
		close(d.windowLoaded)
	}
	for _, c := range state.order {
		switch {
		case c.phase.pending():
			d.addPending(1)
		case c.phase == phaseInDoubt:
			d.tel.inDoubtDelta(1)
		case c.phase == phaseTerminal:
			if d.windowTime(c, now).Before(cutoff) {
				continue // outside the window: its ID is let go
			}
			if d.compactCommand(c, now) {
				continue
			}
		}
		d.commands[c.cmd.ID] = c
	}
	d.lastSweep = now
	if d.ranger != nil {
		d.cpAt = stats.CheckpointOffset
		if d.cpAt < 0 {
			d.cpAt = stats.Start
		}
		// A checkpoint right away spares the next leader the records this
		// one read after the last checkpoint.
		d.cpDue = stats.TailRecords > 0 || stats.RecordsRead >= d.cfg.checkpointInterval/2
		// It may be a delta on the predecessor's newest full checkpoint,
		// with the IDs added since that one: those of the delta recovery
		// started from and those the records after it settled.
		if state.base != nil {
			d.cpBase = state.base
			d.cpAdded = append(addedIDs(state.sinceBase), d.cpAdded...)
			d.cpFullSince = 2 * len(d.cpAdded)
		}
	}
	wall := time.Now()
	pending := 0
	for _, c := range state.order {
		if !c.phase.pending() {
			continue
		}
		pending++
		if err := d.takeOver(c, wall); err != nil {
			return fmt.Errorf("dispatch: recover command %q: %w", c.cmd.ID, err)
		}
	}
	d.cfg.logger.Info("dispatch: recovered the role's log", "partition", d.logTP,
		"took", time.Since(began).Round(time.Millisecond), "records_read", stats.RecordsRead,
		"checkpoint_offset", stats.CheckpointOffset, "base_offset", stats.BaseOffset, "base_prefetched", stats.BasePrefetched, "checkpoint_prefetched", stats.CheckpointPrefetched, "tail_records", stats.TailRecords, "end", stats.End,
		"compact_ids", d.ids.len(), "window_loading", d.loadingWindow(), "taken_over", pending, "intake_next", state.intake,
		// The commit schedule in force, so that an operator sees what the
		// configuration made of it.
		"commit_gap", d.cfg.commitGap, "commit_linger", d.cfg.commitLinger, "outcome_linger", d.cfg.outcomeLinger)
	return nil
}

// RecoveryStats says what the recovery at takeover read.
type RecoveryStats struct {
	// RecordsRead counts the records of every role that recovery read from
	// the log partition, checkpoint parts included: about one checkpoint
	// interval, the records after the newest checkpoint and, when that is a
	// delta, the parts of its base unless BasePrefetched, with a
	// [LogRangeReader]; the whole partition without one.
	RecordsRead int

	// CheckpointOffset is the offset of the last part of the checkpoint
	// that recovery started from, or -1 when it found none.
	CheckpointOffset int64

	// BaseOffset is the offset of the last part of the full checkpoint
	// that the checkpoint builds on when it is a delta, else -1.
	BaseOffset int64

	// BasePrefetched reports that the base of the delta came from the
	// [Standby] of [WithStandby], read before the lease was taken, or that
	// the recovery ended while the Standby still read it and left its IDs
	// to load behind intake; its records are then not in RecordsRead.
	BasePrefetched bool

	// CheckpointPrefetched reports that the checkpoint, and the records
	// after it up to where the Standby's search read, came from that
	// search: recovery read only the offsets after those, and found no
	// checkpoint record of the role there. They are then not in
	// RecordsRead.
	CheckpointPrefetched bool

	// TailRecords counts the records of the role after that checkpoint
	// (every record of the role when it found none).
	TailRecords int

	// Start and End are the log start offset and the high watermark that
	// recovery read between; both are 0 without a [LogRangeReader].
	Start, End int64
}

// RecoveryStats returns what the recovery at takeover read. It is the zero
// value until [Dispatcher.Recovered] reports true.
func (d *Dispatcher) RecoveryStats() RecoveryStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.recovery
}

// recovered is the state of a role that its log holds.
type recovered struct {
	// order holds every command that the records hold whole, in the order
	// of its first record (those of a checkpoint first).
	order []*command

	// ids are the compact IDs of the checkpoint recovery started from, in
	// hash order, unless idsLater is set: then idsLater returns them, once
	// the Standby's read of them is over.
	ids      idBlocks
	idsLater func(context.Context) (idBlocks, error)

	// intake is the NextOffset of the role's last intake record of its
	// requests partition, or 0.
	intake int64

	// base names the role's newest full checkpoint when recovery started
	// from a checkpoint, and sinceBase holds the compact IDs that the delta
	// recovery started from added to it.
	base      *CheckpointBase
	sinceBase []compactID
}

// foldLog applies the records of role, in log order, to the command state
// machine (see command_state.go for its rules). It takes any sequence of
// decoded entries, sound or not, and never fails: records of other roles,
// entries without the body their Kind names, and records that the rules
// leave without effect are skipped. Every command it returns has its settled
// channel, closed when the command is in doubt or settled.
func foldLog(role string, requests coordination.TopicPartition, entries []Entry) recovered {
	f := newFolder(role, requests)
	for i := range entries {
		f.apply(&entries[i])
	}
	return f.finish()
}

// folder applies records to the command state machine, from an empty state
// or from a checkpoint.
type folder struct {
	role     string
	requests coordination.TopicPartition
	st       recovered
	commands map[string]*command
}

func newFolder(role string, requests coordination.TopicPartition) *folder {
	return &folder{role: role, requests: requests, commands: make(map[string]*command)}
}

// seed starts the fold from a checkpoint of the role and its compact IDs,
// in hash order.
func (f *folder) seed(cp Checkpoint, ids idBlocks) {
	if cp.IntakeTopic == f.requests.Topic && cp.IntakePartition == f.requests.Partition {
		f.st.intake = cp.IntakeNext
	}
	f.st.ids = ids
	for _, cc := range cp.Commands {
		c := &command{cmd: cc.Command, issued: cc.Issued, attempt: cc.Attempt, token: cc.Token,
			first: cc.First, outcomeAt: -1}
		switch {
		case cc.Status == StatusPending:
			c.phase = phaseIssued
		case cc.Status == StatusInDoubt:
			c.phase, c.outcome = phaseInDoubt, cc.Outcome
		default:
			c.phase, c.outcome = phaseTerminal, cc.Outcome
		}
		f.commands[c.cmd.ID] = c
		f.st.order = append(f.st.order, c)
	}
}

func (f *folder) get(id string, e *Entry) *command {
	c, ok := f.commands[id]
	if !ok {
		c = &command{cmd: Command{ID: id, Role: f.role}, first: e.Offset, outcomeAt: -1, seen: e.At}
		f.commands[id] = c
		f.st.order = append(f.st.order, c)
	}
	return c
}

// apply applies one record.
func (f *folder) apply(e *Entry) {
	if e.Role != f.role || !hasBody(e) {
		return
	}
	switch e.Kind {
	case EntryIssued:
		c := f.get(e.Issued.Command.ID, e)
		if c.issued {
			return // the first Issued record stands
		}
		c.cmd, c.issued, c.span = e.Issued.Command, true, e.Trace
		if c.attempt == NoAttempt && c.phase == phaseQueued {
			// Nothing named the command before: it opens attempt 1.
			c.phase, c.attempt, c.token = phaseIssued, FirstAttempt, e.Token
		}
	case EntryRedispatched:
		c := f.get(e.Redispatched.CommandID, e)
		c.redispatched(e.Redispatched.Attempt, e.Token)
	case EntryOutcome:
		c := f.get(e.Outcome.CommandID, e)
		if c.recorded(*e.Outcome) {
			if c.phase == phaseInDoubt && !c.issued {
				c.attempt = max(c.attempt, e.Outcome.Attempt)
			}
			if c.phase == phaseTerminal {
				c.outcomeAt = e.Offset
			}
		}
	case EntryIntake:
		if e.Intake.Topic == f.requests.Topic && e.Intake.Partition == f.requests.Partition {
			f.st.intake = e.Intake.NextOffset
		}
	}
}

// finish gives every command its settled channel and returns the state.
func (f *folder) finish() recovered {
	for _, c := range f.st.order {
		c.settled = make(chan struct{})
		if !c.phase.pending() {
			close(c.settled)
		}
	}
	return f.st
}

// readLog reads the role's log partition, trying again after a failure
// that a retry may cure (a broker away, a timeout) for as long as ctx
// allows. A record that does not decode fails at once: a leader must not act
// on part of its log, and only an operator can repair it.
func (d *Dispatcher) readLog(ctx context.Context) ([]Entry, error) {
	waits := doubling(d.cfg.writeRetryBackoff, d.cfg.maxRetryBackoff)
	for {
		entries, err := d.log.ReadLog(ctx, d.logTP)
		var malformed *MalformedRecordError
		var format *LogFormatError
		switch {
		case err == nil:
			return entries, nil
		case errors.As(err, &malformed), errors.As(err, &format), ctx.Err() != nil:
			return nil, err
		}
		d.cfg.logger.Warn("dispatch: reading the log failed; trying again", "partition", d.logTP, "err", err)
		select {
		case <-time.After(waits.NextBackOff()):
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), err)
		}
	}
}

// takeOver queues the record that settles a command an earlier leader left
// pending. The caller holds d.mu.
func (d *Dispatcher) takeOver(c *command, now time.Time) error {
	span := d.tel.startTakeover(c.span, c.cmd)
	c.span = span.SpanContext()
	defer span.End()

	if !c.issued {
		it, err := d.outcomeItem(c, Outcome{Status: StatusInDoubt, Attempt: max(c.attempt, FirstAttempt),
			Reason: "the log holds a Redispatched record of the command and no Issued record, so there is nothing to dispatch"})
		if err != nil {
			return err
		}
		d.commits.enqueue(it)
		return nil
	}
	if !now.Before(c.cmd.Deadline) {
		it, err := d.outcomeItem(c, Outcome{Status: StatusExpired, Attempt: c.attempt,
			Reason: "the deadline passed while the command had no outcome, at a change of leader"})
		if err != nil {
			return err
		}
		d.commits.enqueue(it)
		return nil
	}
	device, err := d.registry.Lookup(c.cmd.Device)
	if err == nil && redispatchSafe(device, c.cmd) {
		return d.redispatch(c, RedispatchTakeover)
	}
	reason := "issued by an earlier leader with no outcome; the device may have acted and does not declare a redispatch safe"
	if err != nil {
		reason = "issued by an earlier leader with no outcome, for a device that is not registered now"
	}
	it, err := d.outcomeItem(c, Outcome{Status: StatusInDoubt, Attempt: c.attempt, Reason: reason})
	if err != nil {
		return err
	}
	d.commits.enqueue(it)
	return nil
}

// redispatch queues a Redispatched record for c, and the dispatch under its
// token once it commits. The caller holds d.mu.
func (d *Dispatcher) redispatch(c *command, reason RedispatchReason) error {
	attempt := max(c.attempt, FirstAttempt) + 1
	it, err := d.newItem(Entry{Kind: EntryRedispatched, Redispatched: &Redispatched{
		CommandID: c.cmd.ID, Attempt: attempt, Reason: reason,
	}}, c.span)
	if err != nil {
		return err
	}
	it.span = d.tel.startRecord(c.span, "dispatch.redispatch")
	it.committed = func(token coordination.FencingToken, _ int64) {
		c.resolving = false
		was := c.phase
		if !c.redispatched(attempt, token) {
			d.cfg.logger.Error("dispatch: a Redispatched record of a settled command committed; it is not dispatched", "command", c.cmd.ID)
			select {
			case <-c.settled:
			default:
				close(c.settled)
			}
			return
		}
		d.phaseMoved(was, c.phase)
		d.enqueueJob(c, token, attempt)
	}
	d.commits.enqueue(it)
	return nil
}
