package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// lane is the queue of one device: its commands in log order, driven one at
// a time by at most one worker goroutine.
type lane struct {
	name    string
	device  Device
	jobs    []job
	running bool
}

// job is one dispatch of a command under the token of the record that
// allowed it.
type job struct {
	c       *command
	token   coordination.FencingToken
	attempt int
}

// enqueueJob hands c to its device's lane, starting the lane's worker when it
// is idle. The caller holds d.mu, and the record that allows the dispatch has
// committed under token.
func (d *Dispatcher) enqueueJob(c *command, token coordination.FencingToken, attempt int) {
	l, ok := d.lanes[c.cmd.Device]
	if !ok {
		device, err := d.registry.Lookup(c.cmd.Device)
		if err != nil {
			// The device was checked when the command was accepted, and a
			// registry only grows, so only an operator's redispatch of a
			// command whose device is gone lands here: it goes back in doubt.
			if it, ierr := d.outcomeItem(c, Outcome{Status: StatusInDoubt, Attempt: attempt, Reason: err.Error()}); ierr == nil {
				d.commits.enqueue(it)
			}
			return
		}
		l = &lane{name: c.cmd.Device, device: device}
		d.lanes[c.cmd.Device] = l
	}
	l.jobs = append(l.jobs, job{c: c, token: token, attempt: attempt})
	if !l.running && !d.halted {
		l.running = true
		d.spawn("the worker of device "+l.name, func() { d.drive(l) })
	}
}

// drive runs the jobs of one lane until it is empty or the dispatcher halts.
// It takes a slot of the device bound for each job, so that one busy device
// does not starve the others.
func (d *Dispatcher) drive(l *lane) {
	for {
		d.mu.Lock()
		if len(l.jobs) == 0 || d.halted {
			l.running = false
			d.mu.Unlock()
			return
		}
		j := l.jobs[0]
		l.jobs = l.jobs[1:]
		d.mu.Unlock()

		select {
		case d.devices <- struct{}{}:
		case <-d.haltCtx.Done():
			continue
		}
		d.execute(l, j)
		<-d.devices
	}
}

// execute dispatches one job, retrying retryable device errors while the
// leadership holds, and queues its outcome. It returns without an outcome
// when the dispatcher halts: the command is then unknown here, and the next
// leader's recovery records it.
//
// The outcome of a device error:
//   - nil: StatusSucceeded, with the device's Result.
//   - Rejected: StatusRejected.
//   - Retryable: another attempt after a backoff, up to the max attempts;
//     then StatusFailed, because the device certainly did not act on any
//     attempt. A deadline that passes between attempts gives StatusExpired.
//   - any other error, a deadline that passes during Dispatch included:
//     StatusInDoubt.
//
// Each Dispatch call runs under a context that ends at the halt, at the
// command's deadline, and at the end of the leadership's freshness (see
// freshness.bound). A reason recorded for a call that the freshness cut says
// so, also when the device's error does not.
func (d *Dispatcher) execute(l *lane, j job) {
	c, cmd := j.c, j.c.cmd
	waits := doubling(d.cfg.retryBackoff, d.cfg.maxRetryBackoff)
	var lastErr error
	for try := 1; ; try++ {
		if d.haltCtx.Err() != nil {
			return
		}
		if !time.Now().Before(cmd.Deadline) {
			reason := "the deadline passed before the command was dispatched"
			if lastErr != nil {
				reason = fmt.Sprintf("the deadline passed after %d attempts that the device did not act on; last error: %v", try-1, lastErr)
			}
			d.record(c, Outcome{Status: StatusExpired, Reason: reason, Attempt: j.attempt})
			return
		}
		if err := d.fresh.wait(d.haltCtx); err != nil {
			return
		}
		if !time.Now().Before(cmd.Deadline) {
			continue // recorded expired above
		}

		ctx, span := d.tel.startDispatch(d.fresh.bound(), c.span, cmd, j.token, try)
		ctx, cancel := context.WithDeadline(ctx, cmd.Deadline)
		start := time.Now()
		result, err := dispatchUnder(ctx, l.device, cmd, coordination.Authority{Term: d.term, Token: j.token})
		// Cancelled first, so that a freshness end after the return does
		// not count as a cut.
		cancel()
		cut := errors.Is(context.Cause(ctx), ErrFreshnessExpired)
		d.tel.dispatchLatency(time.Since(start), cmd.Device)
		if err != nil {
			span.RecordError(err)
		}
		span.End()
		if d.haltCtx.Err() != nil {
			return
		}

		switch {
		case err == nil:
			d.record(c, Outcome{Status: StatusSucceeded, Result: result, Attempt: j.attempt})
		case IsRejected(err):
			d.record(c, Outcome{Status: StatusRejected, Reason: deviceReason(err, cut), Result: result, Attempt: j.attempt})
		case IsRetryable(err):
			lastErr = err
			if cut && !errors.Is(err, ErrFreshnessExpired) {
				lastErr = fmt.Errorf("%w: %w", err, ErrFreshnessExpired)
			}
			if try >= d.cfg.maxAttempts {
				d.record(c, Outcome{Status: StatusFailed, Attempt: j.attempt,
					Reason: fmt.Sprintf("%d attempts failed and the device did not act on any; last error: %v", try, lastErr)})
				return
			}
			d.cfg.logger.Debug("dispatch: retrying a command", "command", cmd.ID, "device", cmd.Device, "try", try, "err", err)
			select {
			case <-time.After(waits.NextBackOff()):
			case <-d.haltCtx.Done():
				return
			}
			continue
		default:
			d.record(c, Outcome{Status: StatusInDoubt, Reason: deviceReason(err, cut), Result: result, Attempt: j.attempt})
		}
		return
	}
}

// deviceReason is the reason recorded for a device error: the error's text,
// followed by [ErrFreshnessExpired] when the freshness cut the call and the
// error does not already say so.
func deviceReason(err error, cut bool) string {
	if cut && !errors.Is(err, ErrFreshnessExpired) {
		return fmt.Sprintf("%v: %v", err, ErrFreshnessExpired)
	}
	return err.Error()
}
