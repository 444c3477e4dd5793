package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sweepEvery is how often, on the dispatcher's clock, the IDs that left the
// dedup window are let go.
const sweepEvery = time.Minute

// now reads the dispatcher's clock.
func (d *Dispatcher) now() time.Time { return time.UnixMilli(d.cfg.clock.NowMillis()) }

// windowTime is when c entered the dedup window: its SubmittedAt, or, for a
// command without one (a request rejected at intake), when its first record
// was written.
func (d *Dispatcher) windowTime(c *command, now time.Time) time.Time {
	switch {
	case !c.cmd.SubmittedAt.IsZero():
		return c.cmd.SubmittedAt
	case !c.seen.IsZero():
		return c.seen
	}
	return now
}

// outsideWindow returns the *OutsideWindowError of cmd when its SubmittedAt
// is older than the dedup window.
func (d *Dispatcher) outsideWindow(cmd Command, now time.Time) error {
	if now.Sub(cmd.SubmittedAt) <= d.cfg.dedupWindow {
		return nil
	}
	return &OutsideWindowError{CommandID: cmd.ID, SubmittedAt: cmd.SubmittedAt, Now: now, Window: d.cfg.dedupWindow}
}

// compactCommand holds c, a settled command, as a compact ID instead of
// whole, and reports whether it did: it needs a LogRangeReader to read the
// records back, the offsets of its first record and its outcome, and a hash
// that no other compact ID holds. The caller holds d.mu.
func (d *Dispatcher) compactCommand(c *command, now time.Time) bool {
	if d.ranger == nil || d.loadingWindow() || c.phase != phaseTerminal || c.first < 0 || c.outcomeAt < c.first {
		return false
	}
	id := CheckpointID{Hash: IDHash(c.cmd.ID), First: c.first, Outcome: c.outcomeAt, SubmittedAt: d.windowTime(c, now)}
	if timeProblem(id.SubmittedAt, true) != "" || !d.ids.add(id) {
		return false
	}
	d.cpAdded = append(d.cpAdded, addedID{hash: id.Hash, first: id.First})
	if d.commands[c.cmd.ID] == c {
		delete(d.commands, c.cmd.ID)
	}
	return true
}

// sweepLocked lets go of the settled commands whose IDs left the dedup
// window and its clock-skew margin, at most every sweepEvery unless forced.
// The caller holds d.mu.
func (d *Dispatcher) sweepLocked(now time.Time, force bool) {
	if !force && now.Sub(d.lastSweep) < sweepEvery {
		return
	}
	d.lastSweep = now
	cutoff := now.Add(-d.cfg.dedupWindow - DedupClockSkew)
	if !d.loadingWindow() {
		d.ids.evict(cutoff)
	}
	for id, c := range d.commands {
		if c.phase == phaseTerminal && d.windowTime(c, now).Before(cutoff) {
			delete(d.commands, id)
		}
	}
}

// Retained counts what a dispatcher holds in memory about commands.
type Retained struct {
	// Whole counts the commands held whole: pending, in doubt, queued, and
	// any settled one that could not be held as a compact ID.
	Whole int

	// Compact counts the settled commands inside the dedup window held as
	// compact IDs.
	Compact int
}

// Retained returns what the dispatcher holds about commands now: it grows
// with the commands inside the dedup window, not with the log's history.
func (d *Dispatcher) Retained() Retained {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Retained{Whole: len(d.commands), Compact: d.ids.len()}
}

// readSettled reads the records of the compact ID hit back from the log and
// reports whether they are those of the command id (same): the hash matched,
// and the record at hit.First names the ID or another one. For id, it
// returns a settled command built from its Issued record (or, for a request
// rejected at intake, its ID alone) and its terminal outcome; it is not held
// by the dispatcher.
func (d *Dispatcher) readSettled(ctx context.Context, id string, hit CheckpointID) (c *command, same bool, err error) {
	if d.ranger == nil {
		return nil, false, fmt.Errorf("dispatch: command %q: no reader of log ranges", id)
	}
	first, err := d.readAt(ctx, hit.First)
	if err != nil {
		return nil, false, err
	}
	if first.CommandID() != id {
		return nil, false, nil
	}
	c = &command{cmd: Command{ID: id, Role: d.role}, phase: phaseTerminal, first: hit.First, outcomeAt: hit.Outcome,
		settled: make(chan struct{})}
	close(c.settled)
	if first.Kind == EntryIssued {
		c.cmd, c.issued = first.Issued.Command, true
	}
	out := first
	if hit.Outcome != hit.First {
		if out, err = d.readAt(ctx, hit.Outcome); err != nil {
			return nil, false, err
		}
	}
	if out.Kind != EntryOutcome || out.Outcome.CommandID != id || !out.Outcome.Status.Terminal() {
		return nil, false, fmt.Errorf("dispatch: command %q: the record at offset %d is not its terminal outcome", id, hit.Outcome)
	}
	c.outcome, c.attempt = *out.Outcome, out.Outcome.Attempt
	return c, true, nil
}

// compactResolveError turns the *UnknownCommandError of a resolve of a
// command held as a compact ID into the *NotInDoubtError it would have met
// had the command been held whole: it is settled.
func (d *Dispatcher) compactResolveError(ctx context.Context, id string, err error) error {
	var unknown *UnknownCommandError
	if !errors.As(err, &unknown) {
		return err
	}
	o, ok, lerr := d.LookupContext(ctx, id)
	if lerr != nil || !ok || !o.Status.Terminal() {
		return err
	}
	return &NotInDoubtError{ID: id, Status: o.Status}
}

// readAt reads the record of the role at offset.
func (d *Dispatcher) readAt(ctx context.Context, offset int64) (Entry, error) {
	entries, _, err := d.readRange(ctx, offset, offset+1)
	if err != nil {
		return Entry{}, err
	}
	for _, e := range entries {
		if e.Offset == offset && e.Role == d.role && hasBody(&e) {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("dispatch: the log holds no record of role %s at offset %d of %s-%d; was it deleted by retention?",
		d.role, offset, d.logTP.Topic, d.logTP.Partition)
}

// loadingWindow reports whether the dedup window is still to load behind
// intake. The caller holds d.mu.
func (d *Dispatcher) loadingWindow() bool { return d.windowLater != nil }

// waitWindow releases d.mu until the dedup window is loaded, and takes it
// again. It returns ErrHalted when the dispatcher halts first, and ctx's
// error when ctx ends first; a caller that takes a command asks the intake
// gate again after it. The caller holds d.mu.
func (d *Dispatcher) waitWindow(ctx context.Context) error {
	d.mu.Unlock()
	defer d.mu.Lock()
	return d.awaitClosed(ctx, d.windowLoaded)
}

// loadWindow loads the dedup window that recovery left to later, which
// waits for the member's Standby to finish reading it, and then holds the
// settled commands kept whole meanwhile as compact IDs. Recovery ends
// without the window when the Standby still reads it, as at a cold start,
// where the campaign wins before a read of a million IDs is over: intake
// opens at once, a command under an ID the dispatcher does not hold whole
// waits for the window, and everything else (the commands taken over, a
// duplicate of a command held whole, the outcomes) goes on. A failure
// halts the dispatcher: the next leadership's recovery reads again.
func (d *Dispatcher) loadWindow(later func(context.Context) (idBlocks, error)) {
	began := time.Now()
	held := 0
	ids, err := later(d.haltCtx)
	d.cfg.standby.release()
	if err == nil {
		d.mu.Lock()
		now := d.now()
		err = d.ids.load(ids, now.Add(-d.cfg.dedupWindow-DedupClockSkew))
		if err == nil {
			d.windowLater = nil
			for _, c := range d.commands {
				d.compactCommand(c, now)
			}
			close(d.windowLoaded)
			held = d.ids.len()
		}
		d.mu.Unlock()
	}
	if err != nil {
		d.stop(fmt.Errorf("dispatch: load the dedup window of role %s: %w", d.role, err))
		return
	}
	d.cfg.logger.Info("dispatch: loaded the role's dedup window", "partition", d.logTP,
		"took", time.Since(began).Round(time.Millisecond), "compact_ids", held)
}
