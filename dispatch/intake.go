package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// RequestRecord is one committed record of the requests topic.
type RequestRecord struct {
	// Offset is the record's offset in its partition.
	Offset int64

	// Key is the record key, the command ID by convention; intake reads
	// the ID from the value.
	Key []byte

	// Value is [EncodeRequest]'s encoding of the command.
	Value []byte

	// Headers are the record headers; a W3C trace context among them
	// becomes the parent of the command's trace.
	Headers []coordination.Header

	// HighWatermark is the partition's high watermark when the record was
	// fetched, or 0 when the source does not know it. The dispatcher's
	// dispatch.intake.lag gauge is the latest one less the intake position.
	HighWatermark int64
}

// RequestSource reads one partition of the requests topic, read_committed.
// [KafkaRequestSource] reads a Kafka cluster; a test passes a fake.
type RequestSource interface {
	// ReadRequests returns the next committed records of partition at or
	// after offset from, in offset order. It blocks until there is at least
	// one, or ctx ends. The dispatcher calls it from one goroutine, with
	// from one past the last offset it was given, or at its recovered
	// intake position.
	ReadRequests(ctx context.Context, partition coordination.TopicPartition, from int64) ([]RequestRecord, error)
}

// intakeLoop reads the role's requests partition from the recovered intake
// position and queues each request, with its intake mark, for the next
// transaction. Each transaction writes the intake position of the last
// request it covers, so a new leader resumes right after it: exactly once.
//
// It stops reading when intake stops ([Dispatcher.StopIntake]): a request
// read and not yet queued is left for the next leader, which resumes at the
// committed intake position.
func (d *Dispatcher) intakeLoop() {
	ctx, cancel := context.WithCancel(d.haltCtx)
	defer cancel()
	defer context.AfterFunc(d.gate.context(), cancel)()
	next := d.commits.intakePosition()
	waits := doubling(d.cfg.writeRetryBackoff, d.cfg.maxRetryBackoff)
	d.tel.intakeSeen(next)
	for {
		records, err := d.cfg.requests.ReadRequests(ctx, d.requestTP, next)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			wait := waits.NextBackOff()
			d.cfg.logger.Warn("dispatch: reading the requests topic failed; trying again", "partition", d.requestTP, "from", next, "retry_in", wait, "err", err)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
			continue
		}
		waits.Reset()
		for _, rec := range records {
			d.tel.intakeSeen(max(rec.HighWatermark, rec.Offset+1))
			if rec.Offset < next {
				continue
			}
			if ctx.Err() != nil {
				return // intake stopped: the rest is the next leader's
			}
			if err := d.take(rec); err != nil {
				return // halted
			}
			next = rec.Offset + 1
		}
	}
}

// take queues one request. A request that is malformed, or meant for another
// role sharing the partition, advances the intake position and nothing else.
// A well-formed request whose command is invalid, or names an unknown
// device, is recorded as rejected, so its submitter learns why.
func (d *Dispatcher) take(rec RequestRecord) error {
	mark := &item{intake: true, intakeNext: rec.Offset + 1, counted: true}
	cmd, err := DecodeRequest(rec.Value)
	if cmd.Role == "" {
		cmd.Role = d.role
	}
	if cmd.Role != d.role {
		return d.queueMark(mark)
	}
	if err != nil {
		var invalid *InvalidCommandError
		if errors.As(err, &invalid) && checkCommandID(cmd.ID) == nil {
			return d.rejectAtIntake(cmd, err, mark)
		}
		d.cfg.logger.Warn("dispatch: skipping a malformed request", "partition", d.requestTP, "offset", rec.Offset, "err", err)
		return d.queueMark(mark)
	}
	// A request may leave its Deadline, and only that, for the dispatcher.
	cmd = d.complete(cmd, time.Now())
	span := d.tel.startIntake(rec.Headers, cmd, rec.Offset)
	defer span.End()
	_, err = d.accept(d.haltCtx, cmd, span.SpanContext(), mark)
	var taken *IDConflictError
	if errors.As(err, &taken) {
		// The ID's record belongs to the first command: a second outcome
		// under it would give the ID two histories. The request is
		// refused here, and its offset passes.
		d.cfg.logger.Warn("dispatch: rejected a request that reuses a command ID for a different command",
			"id", cmd.ID, "differs", taken.Differs, "partition", d.requestTP, "offset", rec.Offset, "reason", err)
		return d.queueMark(mark)
	}
	if errors.Is(err, ErrIntakeStopped) {
		// Intake stopped while the command waited for room: the request
		// and those after it are the next leader's.
		return err
	}
	if err != nil && !errors.Is(err, ErrHalted) && d.haltCtx.Err() == nil {
		// The command validated, so only an encoding fault lands here.
		d.cfg.logger.Warn("dispatch: skipping a request that cannot be recorded", "offset", rec.Offset, "err", err)
		return d.queueMark(mark)
	}
	return err
}

// queueMark queues a bare intake mark.
func (d *Dispatcher) queueMark(mark *item) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.waitRoom(d.haltCtx); err != nil {
		return err
	}
	d.commits.enqueue(mark)
	return nil
}

// rejectAtIntake records a request whose command is invalid as rejected, with
// no Issued record: it was never accepted.
func (d *Dispatcher) rejectAtIntake(cmd Command, reason error, mark *item) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.waitRoom(d.haltCtx); err != nil {
		return err
	}
	if _, ok := d.commands[cmd.ID]; ok {
		d.commits.enqueue(mark)
		return nil
	}
	c := &command{cmd: cmd, phase: phaseQueued, attempt: NoAttempt, settled: make(chan struct{})}
	it, err := d.outcomeItem(c, Outcome{Status: StatusRejected, Attempt: NoAttempt, Reason: reason.Error()})
	if err != nil {
		d.commits.enqueue(mark)
		return nil
	}
	it.counted = true
	it.intake, it.intakeNext = true, mark.intakeNext
	d.commands[cmd.ID] = c
	d.addPending(1)
	d.commits.enqueue(it)
	return nil
}
