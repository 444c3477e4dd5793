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
// intake: every command ID the log holds (so a duplicate is never issued
// again), the intake position, and the pending commands, which it settles
// as the package doc's "Takeover" describes. The records it queues commit
// in the first transactions of the leadership, ahead of any new command.
func (d *Dispatcher) recover(ctx context.Context) error {
	entries, err := d.readLog(ctx)
	if err != nil {
		return fmt.Errorf("dispatch: recover the log of role %s: %w", d.role, err)
	}
	state := foldLog(d.role, d.requestTP, entries)

	d.mu.Lock()
	defer d.mu.Unlock()
	d.intake = state.intake
	d.tel.intakeCommitted(state.intake)
	for _, c := range state.order {
		d.commands[c.cmd.ID] = c
		switch {
		case c.phase.pending():
			d.tel.pendingDelta(1)
		case c.phase == phaseInDoubt:
			d.tel.inDoubtDelta(1)
		}
	}
	now := time.Now()
	for _, c := range state.order {
		if !c.phase.pending() {
			continue
		}
		if err := d.takeOver(c, now); err != nil {
			return fmt.Errorf("dispatch: recover command %q: %w", c.cmd.ID, err)
		}
	}
	return nil
}

// recovered is the state of a role that its log holds.
type recovered struct {
	// order holds every command of the role, in the order of its first
	// record.
	order []*command

	// intake is the NextOffset of the role's last intake record of its
	// requests partition, or 0.
	intake int64
}

// foldLog applies the records of role, in log order, to the command state
// machine (see command_state.go for its rules). It takes any sequence of
// decoded entries, sound or not, and never fails: records of other roles,
// entries without the body their Kind names, and records that the rules
// leave without effect are skipped. Every command it returns has its settled
// channel, closed when the command is in doubt or settled.
func foldLog(role string, requests coordination.TopicPartition, entries []Entry) recovered {
	var st recovered
	commands := make(map[string]*command)
	get := func(id string) *command {
		c, ok := commands[id]
		if !ok {
			c = &command{cmd: Command{ID: id, Role: role}}
			commands[id] = c
			st.order = append(st.order, c)
		}
		return c
	}
	for i := range entries {
		e := &entries[i]
		if e.Role != role || !hasBody(e) {
			continue
		}
		switch e.Kind {
		case EntryIssued:
			c := get(e.Issued.Command.ID)
			if c.issued {
				continue // the first Issued record stands
			}
			c.cmd, c.issued, c.span = e.Issued.Command, true, e.Trace
			if c.attempt == NoAttempt && c.phase == phaseQueued {
				// Nothing named the command before: it opens attempt 1.
				c.phase, c.attempt, c.token = phaseIssued, FirstAttempt, e.Token
			}
		case EntryRedispatched:
			c := get(e.Redispatched.CommandID)
			c.redispatched(e.Redispatched.Attempt, e.Token)
		case EntryOutcome:
			c := get(e.Outcome.CommandID)
			if c.recorded(*e.Outcome) && c.phase == phaseInDoubt && !c.issued {
				c.attempt = max(c.attempt, e.Outcome.Attempt)
			}
		case EntryIntake:
			if e.Intake.Topic == requests.Topic && e.Intake.Partition == requests.Partition {
				st.intake = e.Intake.NextOffset
			}
		}
	}
	for _, c := range st.order {
		c.settled = make(chan struct{})
		if !c.phase.pending() {
			close(c.settled)
		}
	}
	return st
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
		d.enqueue(it)
		return nil
	}
	if !now.Before(c.cmd.Deadline) {
		it, err := d.outcomeItem(c, Outcome{Status: StatusExpired, Attempt: c.attempt,
			Reason: "the deadline passed while the command had no outcome, at a change of leader"})
		if err != nil {
			return err
		}
		d.enqueue(it)
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
	d.enqueue(it)
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
	it.committed = func(token coordination.FencingToken) {
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
	d.enqueue(it)
	return nil
}
