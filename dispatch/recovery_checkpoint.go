package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// maxSearchStep bounds the offsets of one read of the backward search for a
// checkpoint, which doubles its step from the checkpoint interval.
const maxSearchStep = 1 << 20

// recoverFromCheckpoint reads the role's state from the newest complete
// checkpoint of the role and the records after it, up to the high watermark
// taken when it began. It finds the checkpoint by reading backwards from the
// high watermark, one step of offsets at a time, starting with the
// checkpoint interval and doubling: the leader writes a checkpoint at least
// every interval of offsets of the partition (see the package doc), so the
// first step or two find it however many records of other roles the
// partition holds. A partition with no checkpoint of the role is read to its
// start, as without checkpoints.
func (d *Dispatcher) recoverFromCheckpoint(ctx context.Context) (recovered, RecoveryStats, error) {
	stats := RecoveryStats{CheckpointOffset: -1}
	var start, end int64
	err := d.retryRead(ctx, func() error {
		var err error
		start, end, err = d.ranger.Bounds(ctx, d.logTP)
		return err
	})
	if err != nil {
		return recovered{}, stats, err
	}
	stats.Start, stats.End = start, end
	s, err := searchCheckpoint(ctx, d.role, start, end, int64(d.cfg.checkpointInterval), d.readRange)
	stats.RecordsRead = s.read
	if err != nil {
		return recovered{}, stats, err
	}
	if !s.found {
		stats.TailRecords = len(s.entries)
		return foldLog(d.role, d.requestTP, s.entries), stats, nil
	}
	f := newFolder(d.role, d.requestTP)
	f.seed(s.cp)
	for i := range s.entries {
		if s.entries[i].Offset > s.at {
			stats.TailRecords++
			f.apply(&s.entries[i])
		}
	}
	stats.CheckpointOffset = s.at
	return f.finish(), stats, nil
}

// checkpointSearch is what a backward search for the newest checkpoint of a
// role found.
type checkpointSearch struct {
	// cp is the checkpoint, and at the offset of its last part, when found.
	cp    Checkpoint
	at    int64
	found bool

	// entries are the role's records read, in offset order: those from the
	// lowest offset read up to the end of the search.
	entries []Entry

	// read counts every record read, of any role.
	read int
}

// searchCheckpoint finds the newest complete checkpoint of role in the
// offsets from start up to end by reading backwards from end, step offsets
// at a time and doubling the step up to maxSearchStep, and keeps only the
// role's records on the way. Without a checkpoint it reads down to start.
// It returns what it read so far with an error.
func searchCheckpoint(ctx context.Context, role string, start, end, step int64,
	read func(ctx context.Context, from, to int64) ([]Entry, error)) (checkpointSearch, error) {
	s := checkpointSearch{at: -1}
	step = max(step, 1)
	for hi := end; hi > start; {
		lo := max(start, hi-step)
		entries, err := read(ctx, lo, hi)
		if err != nil {
			return s, err
		}
		s.read += len(entries)
		mine := make([]Entry, 0, len(entries)+len(s.entries))
		for _, e := range entries {
			if e.Role == role {
				mine = append(mine, e)
			}
		}
		s.entries = append(mine, s.entries...)
		cp, at, found, err := newestCheckpoint(role, s.entries)
		if err != nil {
			return s, err
		}
		if found {
			s.cp, s.at, s.found = cp, at, true
			return s, nil
		}
		hi = lo
		step = min(2*step, maxSearchStep)
	}
	return s, nil
}

// newestCheckpoint finds the newest complete checkpoint of role among
// entries, given in offset order, and returns it with the offset of its
// last part. The parts of one checkpoint share a token and a sequence and
// were written in one transaction, so they are all committed or none, and
// no record of the role lies between them; a checkpoint whose first parts
// lie before entries is not found, and the caller reads further back. A
// checkpoint whose parts are all there and do not decode is an error: a
// leader must not act on part of its log.
func newestCheckpoint(role string, entries []Entry) (cp Checkpoint, at int64, found bool, err error) {
	var parts []CheckpointPart
	var last *Entry
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		if e.Role != role || e.Kind != EntryCheckpoint || e.Checkpoint == nil {
			continue
		}
		p := *e.Checkpoint
		if last == nil || e.Token != last.Token || p.Sequence != last.Checkpoint.Sequence || p.Parts != last.Checkpoint.Parts {
			// A newer group that did not complete here is left for the
			// records after it; the fold ignores checkpoint records.
			parts, last = parts[:0], e
		}
		parts = append(parts, p)
		if len(parts) == p.Parts {
			// The dispatcher's load refuses a hash held twice.
			cp, err := assembleCheckpoint(role, parts, false)
			if err != nil {
				return Checkpoint{}, 0, false, fmt.Errorf("dispatch: checkpoint ending at offset %d: %w", last.Offset, err)
			}
			return cp, last.Offset, true, nil
		}
	}
	return Checkpoint{}, 0, false, nil
}

// readRange reads the log partition between two offsets, trying again as
// readLog does.
func (d *Dispatcher) readRange(ctx context.Context, from, to int64) ([]Entry, error) {
	var entries []Entry
	err := d.retryRead(ctx, func() error {
		var err error
		entries, err = d.ranger.ReadRange(ctx, d.logTP, LogRange{From: from, Until: to})
		return err
	})
	return entries, err
}

// retryRead runs read until it succeeds, fails for good (a record that does
// not decode), or ctx ends.
func (d *Dispatcher) retryRead(ctx context.Context, read func() error) error {
	waits := doubling(d.cfg.writeRetryBackoff, d.cfg.maxRetryBackoff)
	for {
		err := read()
		var malformed *MalformedRecordError
		var format *LogFormatError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &malformed), errors.As(err, &format), ctx.Err() != nil:
			return err
		}
		d.cfg.logger.Warn("dispatch: reading the log failed; trying again", "partition", d.logTP, "err", err)
		select {
		case <-time.After(waits.NextBackOff()):
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		}
	}
}
