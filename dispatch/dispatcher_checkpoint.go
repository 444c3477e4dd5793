package dispatch

import (
	"context"
	"slices"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.opentelemetry.io/otel/trace"
)

// checkpointProbe is how often an idle leader asks how far its log
// partition moved since its last checkpoint: the records of other roles that
// share the partition move it too, and a recovery reads back through them to
// find the checkpoint.
const checkpointProbe = 5 * time.Second

// checkpointDivisor sets how often a large dedup window is written whole: a
// full checkpoint is due after the larger of the checkpoint interval and one
// record for each checkpointDivisor compact IDs, so that the bytes written
// for checkpoints stay a bounded share of the log however large the window.
// In between, a delta checkpoint every interval holds the IDs added since
// the last full one, so that a recovery reads a bounded tail of records.
//
// Full checkpoints cost about checkpointDivisor compact IDs a record (16 to
// 19 bytes each), and the deltas between them, which hold the IDs added
// since the full one, about window/(4 x checkpointDivisor x interval) at
// one new ID every two records: three at a million IDs and the default
// interval. Four is near the fewest the two make together for windows of
// about a million (the least is where they are equal); at sixteen the full
// ones alone came to some 270 bytes a record, more than the records they
// covered.
const checkpointDivisor = 4

// probeLoop marks a checkpoint due when the log partition moved a checkpoint
// interval past the last checkpoint, even while this role writes nothing.
func (d *Dispatcher) probeLoop() {
	tick := time.NewTicker(checkpointProbe)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-d.haltCtx.Done():
			return
		}
		end, err := d.logEnd(d.haltCtx)
		if err != nil {
			d.cfg.logger.Debug("dispatch: cannot read the end of the log partition", "partition", d.logTP, "err", err)
			continue
		}
		d.mu.Lock()
		if d.cpAt >= 0 && end-d.cpAt >= int64(d.cfg.checkpointInterval) && !d.cpDue {
			d.cpDue = true
			d.commits.notify()
		}
		d.mu.Unlock()
	}
}

// logEnd returns the high watermark of the role's log partition, asked
// within one request timeout.
func (d *Dispatcher) logEnd(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultKafkaRequestTimeout)
	defer cancel()
	_, end, err := d.ranger.Bounds(ctx, d.logTP)
	return end, err
}

// checkpointDue reports whether a checkpoint is due; the committer asks it
// while its queue is empty.
func (d *Dispatcher) checkpointDue() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.checkpointDueLocked()
}

// checkpointDueLocked reports whether a checkpoint is due. The caller holds
// d.mu.
func (d *Dispatcher) checkpointDueLocked() bool {
	if d.ranger == nil || d.halted || d.loadingWindow() {
		return false
	}
	return d.cpDue || d.cpSince >= d.cfg.checkpointInterval
}

// fullCheckpointDueLocked reports whether the next checkpoint writes the
// window whole: with no full checkpoint to build a delta on, when the
// window is small enough to be written whole every interval (a quarter of
// its IDs at most an interval), or when the full one is as old as
// checkpointDivisor says. The first checkpoint after a takeover is a delta
// on the predecessor's base unless it would hold more than a quarter of the
// window: a whole window written right after a takeover would delay the
// next one's readiness and weigh on the new leader's memory, and would
// happen at every takeover. The caller holds d.mu.
func (d *Dispatcher) fullCheckpointDueLocked() bool {
	every := d.ids.len() / checkpointDivisor
	switch {
	case d.cpBase == nil || every <= d.cfg.checkpointInterval:
		return true
	case d.cpSeq == 0:
		// The first of this leadership: cpBase is the predecessor's.
		return len(d.cpAdded) > d.ids.len()/4
	}
	return d.cpFullSince >= every
}

// checkpointItems returns the parts of a checkpoint when one is due, for
// the committer to write first in its next transaction, before the records
// of that transaction's batch: the committer is the only writer of the log
// and calls it after the effects of every batch before applied and before
// the next one commits, so the state it takes is exactly what the records
// before its parts committed, and the records after them replay on it. It
// returns nil when none is due.
func (d *Dispatcher) checkpointItems() []*item {
	d.mu.Lock()
	now := d.now()
	d.sweepLocked(now, false)
	if !d.checkpointDueLocked() {
		d.mu.Unlock()
		return nil
	}
	d.sweepLocked(now, true)
	cp := d.snapshotLocked()
	full := d.fullCheckpointDueLocked()
	d.cpSeq++
	seq := d.cpSeq
	var ids idBlocks
	var added []compactID
	var covered int // the IDs of cpAdded that a full checkpoint holds
	if full {
		ids = d.ids.share()
		covered = len(d.cpAdded)
		d.cpFullSince = 0
	} else {
		base := *d.cpBase
		cp.Base = &base
		added = d.deltaIDsLocked()
	}
	// Whatever happens to this one, the next is due only after another
	// interval: a checkpoint that cannot be written must not stall intake.
	d.cpDue, d.cpSince = false, 0
	d.mu.Unlock()
	if !full {
		// A delta's IDs are a copy: they are sorted outside the lock.
		ids = blocksOf(sortedDelta(added))
	}

	// The window's own blocks are encoded as they are, in hash order, with
	// no copy of them and no sort. Each part goes straight into its record,
	// which holds a copy, and the next part is written into the same
	// buffer: the state is held once, in the records, not twice.
	var items []*item
	err := eachWindowCheckpointPart(d.role, seq, cp, ids, func(p CheckpointPart) error {
		it, err := d.newItem(Entry{Kind: EntryCheckpoint, Checkpoint: &p}, trace.SpanContext{})
		if err != nil {
			return err
		}
		it.checkpoint = true
		items = append(items, it)
		return nil
	})
	if full {
		d.mu.Lock()
		d.ids.release()
		d.mu.Unlock()
	}
	if err != nil {
		d.cfg.logger.Error("dispatch: cannot encode a checkpoint; recovery reads further back until one is written", "err", err)
		d.checkpointEnded(seq)
		return nil
	}
	first := int64(-1)
	items[0].committed = func(_ coordination.FencingToken, offset int64) { first = offset }
	last := items[len(items)-1]
	last.committed = func(token coordination.FencingToken, offset int64) {
		if len(items) == 1 {
			first = offset
		}
		if offset >= 0 {
			d.cpAt = offset
		}
		d.checkpointEndedLocked(seq)
		if !full {
			return
		}
		if first < 0 || offset < 0 {
			// A delta must build on the newest full checkpoint, and
			// cannot name this one: the next checkpoint is full again.
			d.cpBase = nil
			return
		}
		// Deltas build on this one from now on, and hold only the IDs
		// added since its snapshot.
		d.cpBase = &CheckpointBase{Token: token, Sequence: seq, First: first, Last: offset}
		d.cpAdded = slices.Clone(d.cpAdded[covered:])
	}
	return items
}

// snapshotLocked returns the committed state of the role but for its
// compact IDs: the commands whose records committed, held whole. The caller
// holds d.mu.
func (d *Dispatcher) snapshotLocked() Checkpoint {
	cp := Checkpoint{
		Window:          d.cfg.dedupWindow.Truncate(time.Millisecond),
		IntakeTopic:     d.requestTP.Topic,
		IntakePartition: d.requestTP.Partition,
		IntakeNext:      d.commits.intakePosition(),
	}
	if cp.Window <= 0 {
		cp.Window = time.Millisecond
	}
	for _, c := range d.commands {
		if c.phase == phaseQueued {
			continue // its first record has not committed
		}
		cc := checkpointCommandOf(c, d.role, d.windowTime(c, d.now()))
		cp.Commands = append(cp.Commands, cc)
	}
	return cp
}

// checkpointCommandOf returns c, whose first record committed, as a
// checkpoint holds it whole; at is when it entered the dedup window.
func checkpointCommandOf(c *command, role string, at time.Time) CheckpointCommand {
	cc := CheckpointCommand{Issued: c.issued, Attempt: c.attempt, Token: c.token, First: max(c.first, -1)}
	if c.issued {
		cc.Command = c.cmd
	} else {
		cc.Command = Command{ID: c.cmd.ID, Role: role, SubmittedAt: at}
	}
	if checkToken(cc.Token) != nil {
		cc.Token = standInToken()
	}
	if c.phase == phaseIssued || c.phase == phaseQueued {
		cc.Status = StatusPending
	} else {
		cc.Status, cc.Outcome = c.outcome.Status, c.outcome
	}
	return cc
}

// checkpointEnded records that the writing of checkpoint seq ended.
func (d *Dispatcher) checkpointEnded(seq int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checkpointEndedLocked(seq)
}

// checkpointEndedLocked records that the writing of checkpoint seq ended,
// and wakes whoever waits for one. The caller holds d.mu.
func (d *Dispatcher) checkpointEndedLocked(seq int64) {
	d.cpEndedSeq = max(d.cpEndedSeq, seq)
	close(d.cpEnded)
	d.cpEnded = make(chan struct{})
}

// closingCheckpoint writes a checkpoint of the drained state when the log
// partition moved half a search step or more past the last one, and waits
// until its writing ended, the dispatcher halted, or ctx ended. The next
// leader's recovery then finds it in its first read and reads no tail: a
// handover hands the role over with its state. A shorter tail is left to the
// next leader, whose first read holds the last checkpoint and the tail
// together: folding a few hundred records costs it less than a transaction
// costs the handover. It is best effort: without it, the next leader reads
// the tail instead.
func (d *Dispatcher) closingCheckpoint(ctx context.Context) {
	if d.ranger == nil {
		return
	}
	end, err := d.logEnd(ctx)
	d.mu.Lock()
	if d.halted || (err == nil && d.cpAt >= 0 && end-d.cpAt < d.searchStep()/2) {
		d.mu.Unlock()
		return
	}
	after := d.cpSeq
	d.cpDue = true
	d.mu.Unlock()
	d.commits.notify()
	for {
		d.mu.Lock()
		ended, done := d.cpEnded, d.cpEndedSeq > after
		d.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ended:
		case <-d.haltCtx.Done():
			return
		case <-ctx.Done():
			return
		}
	}
}
