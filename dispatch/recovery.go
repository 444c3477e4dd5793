package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.opentelemetry.io/otel/trace"
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
	var order []*command // issued commands, in log order
	intake := int64(0)
	for _, e := range entries {
		if e.Role != d.role {
			continue // another role that shares the partition
		}
		switch e.Kind {
		case EntryIssued:
			if e.Issued == nil {
				continue
			}
			id := e.Issued.Command.ID
			if _, ok := d.commands[id]; ok {
				continue // a second Issued is Verify's finding; the first stands
			}
			c := &command{cmd: e.Issued.Command, phase: phaseIssued, attempt: FirstAttempt, token: e.Token, settled: make(chan struct{})}
			d.commands[id] = c
			order = append(order, c)
		case EntryRedispatched:
			if e.Redispatched == nil {
				continue
			}
			c, ok := d.commands[e.Redispatched.CommandID]
			if !ok || c.cmd.Device == "" {
				continue
			}
			c.phase, c.attempt, c.token = phaseIssued, e.Redispatched.Attempt, e.Token
			c.settled = make(chan struct{})
		case EntryOutcome:
			if e.Outcome == nil {
				continue
			}
			id := e.Outcome.CommandID
			c, ok := d.commands[id]
			if !ok {
				// A request rejected at intake has an outcome and no Issued.
				c = &command{cmd: Command{ID: id}, settled: make(chan struct{})}
				d.commands[id] = c
			}
			c.outcome = *e.Outcome
			c.phase = phaseTerminal
			if e.Outcome.Status == StatusInDoubt {
				c.phase = phaseInDoubt
			}
			close(c.settled)
		case EntryIntake:
			if e.Intake != nil && e.Intake.Topic == d.requestTP.Topic && e.Intake.Partition == d.requestTP.Partition {
				intake = e.Intake.NextOffset
			}
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	d.intake = intake
	for _, c := range d.commands {
		switch c.phase {
		case phaseIssued:
			d.tel.pendingDelta(1)
		case phaseInDoubt:
			d.tel.inDoubtDelta(1)
		}
	}
	now := time.Now()
	for _, c := range order {
		if c.phase != phaseIssued {
			continue
		}
		if err := d.takeOver(c, now); err != nil {
			return fmt.Errorf("dispatch: recover command %q: %w", c.cmd.ID, err)
		}
	}
	return nil
}

// readLog reads the role's log partition, trying again after a failure
// that a retry may cure (a broker away, a timeout) for as long as ctx
// allows. A record that does not decode fails at once: a leader must not act
// on part of its log, and only an operator can repair it.
func (d *Dispatcher) readLog(ctx context.Context) ([]Entry, error) {
	backoff := d.cfg.writeRetryBackoff
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
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), err)
		}
		backoff = min(2*backoff, d.cfg.maxRetryBackoff)
	}
}

// takeOver queues the record that settles a command an earlier leader left
// pending. The caller holds d.mu.
func (d *Dispatcher) takeOver(c *command, now time.Time) error {
	_, span := d.tel.tracer.Start(context.Background(), "dispatch.takeover",
		trace.WithAttributes(commandAttributes(c.cmd)...))
	c.span = span.SpanContext()
	defer span.End()

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
	attempt := c.attempt + 1
	it, err := d.newItem(Entry{Kind: EntryRedispatched, Redispatched: &Redispatched{
		CommandID: c.cmd.ID, Attempt: attempt, Reason: reason,
	}}, c.span)
	if err != nil {
		return err
	}
	it.span = d.tel.startRecord(c.span, "dispatch.redispatch")
	it.committed = func(token coordination.FencingToken) {
		c.attempt, c.token = attempt, token
		c.resolving = false
		d.setPhase(c, phaseIssued)
		d.enqueueJob(c, token, attempt)
	}
	d.enqueue(it)
	return nil
}
