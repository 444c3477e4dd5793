package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// firstSearchStep is the first step of the backward search for the role's
// newest checkpoint, of a recovery (unless the checkpoint interval is
// smaller) and of a lookup. It is smaller than the default checkpoint
// interval: a checkpoint usually lies near the end (a drained leader writes
// one last), and the doubling steps read at most about twice the offsets
// between it and the end, where a first step of an interval read an
// interval of other roles' records whatever the distance.
const firstSearchStep = 1024

// maxSearchStep bounds the offsets of one read of the backward search for a
// checkpoint, which doubles its step from firstSearchStep. Past it,
// the search reads on in steps of this size: whatever lies in a read before
// the checkpoint is read for nothing, and a step that kept doubling read
// more than the distance to the checkpoint (132,000 records of 300,000, at a
// million IDs), where a step of this size reads at most this many more. A
// partition without a checkpoint is read in more steps of this size than of
// doubling ones, at the cost of a short request each.
const maxSearchStep = 1 << 16

// recoverFromCheckpoint reads the role's state from the newest complete
// checkpoint of the role and the records after it, up to the high watermark
// taken when it began. It finds the checkpoint by reading backwards from the
// high watermark, one step of offsets at a time, starting with the smaller
// of firstSearchStep and the checkpoint interval and doubling: the leader
// writes a checkpoint at least every interval of offsets of the partition
// (see the package doc), so the search reads at most about twice that
// however many records of other roles the partition holds. A partition
// with no checkpoint of the role is read to its start, as without
// checkpoints.
func (d *Dispatcher) recoverFromCheckpoint(ctx context.Context) (recovered, RecoveryStats, error) {
	stats := RecoveryStats{CheckpointOffset: -1, BaseOffset: -1}
	var start, end int64
	err := d.retryRead(ctx, func() error {
		var err error
		start, end, err = d.ranger.Bounds(ctx, d.logTP)
		return err
	})
	if err != nil {
		return recovered{}, stats, err
	}
	state, stats, err := recoverState(ctx, d.role, d.requestTP, start, end, d.searchStep(), d.readRange, d.cfg.standby, true)
	if state.idsLater == nil {
		// Otherwise the window's loader lets the Standby go once it has
		// the IDs.
		d.cfg.standby.release()
	}
	stats.Start, stats.End = start, end
	return state, stats, err
}

// searchStep is the first step of the dispatcher's backward search for the
// role's newest checkpoint: firstSearchStep, or the checkpoint interval when
// that is less.
func (d *Dispatcher) searchStep() int64 {
	return min(int64(d.cfg.checkpointInterval), firstSearchStep)
}

// recoverState reads the state of role from the newest complete checkpoint
// in the offsets from start up to end and the records after it, as
// recoverFromCheckpoint describes, with read reading the log and bases, if
// not nil, handing over the IDs of a base it prefetched. With deferIDs set,
// IDs that bases still reads are left to the state's idsLater; otherwise it
// waits for them.
func recoverState(ctx context.Context, role string, requests coordination.TopicPartition, start, end, step int64,
	read rangeReader, bases *Standby, deferIDs bool) (recovered, RecoveryStats, error) {
	stats := RecoveryStats{CheckpointOffset: -1, BaseOffset: -1}
	s, err := searchCheckpoint(ctx, role, start, end, step, read, false, bases)
	stats.RecordsRead, stats.BasePrefetched, stats.CheckpointPrefetched = s.read, s.prefetched, s.ahead
	if err == nil && s.idsLater != nil && !deferIDs {
		s.ids, err = s.idsLater(ctx)
		s.idsLater = nil
	}
	if err != nil {
		return recovered{}, stats, err
	}
	if !s.found {
		stats.TailRecords = len(s.entries)
		return foldLog(role, requests, s.entries), stats, nil
	}
	f := newFolder(role, requests)
	f.seed(s.cp, s.ids)
	for i := range s.entries {
		stats.TailRecords++
		f.apply(&s.entries[i])
	}
	stats.CheckpointOffset, stats.BaseOffset = s.at, s.base
	st := f.finish()
	st.base, st.sinceBase, st.idsLater = s.newestFull, s.sinceBase, s.idsLater
	return st, stats, nil
}

// checkpointSearch is what a backward search for the newest checkpoint of a
// role found.
type checkpointSearch struct {
	// cp is the checkpoint, with its compact IDs apart in ids, in hash
	// order, and at the offset of its last part, when found. For a delta,
	// ids is the whole window, its base's IDs included, and base is the
	// offset of the base's last part; it is -1 for a full checkpoint.
	cp    Checkpoint
	ids   idBlocks
	at    int64
	first int64 // the offset of the checkpoint's first part
	base  int64
	found bool

	// idsLater, when set, returns ids: the recovery's search ended while
	// its Standby still read the base of the delta found, or the IDs of the
	// full checkpoint found, and idsLater waits for that read (or reads
	// them itself when the Standby's read fails) and lays the delta's IDs
	// over the base's.
	idsLater func(context.Context) (idBlocks, error)

	// idsLeft decodes the compact IDs of the checkpoint found by a lazy
	// search, which leaves them undecoded (ids is empty) until loadIDs; and
	// unread is set when the base of the delta found is not read yet: ids
	// holds the delta's IDs alone until loadBase reads it.
	idsLeft func() (idBlocks, error)
	unread  *unreadBase

	// newestFull names the role's newest full checkpoint, which a delta of
	// the next leader may build on: the checkpoint found, or its base; and
	// sinceBase holds the IDs of the delta found, added since that base.
	newestFull *CheckpointBase
	sinceBase  []compactID

	// entries are the role's records read, in offset order: those after
	// the checkpoint when found, else all from the lowest offset read up to
	// the end of the search.
	entries []Entry

	// read counts every record read, of any role; prefetched reports that
	// the base of the delta found came from a Standby, unread here, and
	// ahead that the checkpoint and the records after it, up to where the
	// Standby's search read, came from that search.
	read       int
	prefetched bool
	ahead      bool
}

// searchCheckpoint finds the newest complete checkpoint of role in the
// offsets from start up to end by reading backwards from end, step offsets
// at a time and doubling the step up to maxSearchStep, and keeps only the
// role's records on the way. Without a checkpoint it reads down to start.
// A delta checkpoint has its base read from the offsets it names, and its
// IDs laid over the base's; a delta whose base retention took counts as no
// checkpoint. With lazy set, the checkpoint's compact IDs are left
// undecoded and the base of a delta unread, for loadIDs and loadBase to
// read if a lookup needs them. Otherwise bases, when it holds the base's
// IDs, hands them over in place of a read; and when it holds what its own
// search found below an offset it read up to, the search reads only the
// offsets from there, and builds on what it found unless a checkpoint
// record of the role lies among them. It returns what it read so far with
// an error.
func searchCheckpoint(ctx context.Context, role string, start, end, step int64, read rangeReader, lazy bool, bases *Standby) (checkpointSearch, error) {
	s := checkpointSearch{at: -1, first: -1, base: -1}
	step = max(step, 1)
	var ahead *foundAhead
	if !lazy {
		ahead = bases.ahead(ctx, start, end)
	}
	for hi := end; hi > start; {
		if ahead != nil && hi == ahead.end {
			// No checkpoint record of the role came after the offsets
			// that the Standby's search read: build on what it found.
			return buildAhead(ctx, role, start, step, read, bases, ahead, s)
		}
		lo := max(start, hi-step)
		if ahead != nil {
			lo = max(lo, ahead.end)
		}
		entries, n, err := read(ctx, lo, hi)
		if err != nil {
			return s, err
		}
		s.read += n
		s.prepend(role, entries)
		if ahead != nil {
			if !holdsCheckpoint(role, s.entries) {
				hi = lo
				step = min(2*step, maxSearchStep)
				continue
			}
			// A checkpoint record of the role came after them: the search
			// goes on as without the Standby's.
			ahead = nil
		}
		if parts, ref, found := newestCheckpoint(role, s.entries); found {
			at := ref.Last
			s.first = ref.First
			var cp Checkpoint
			var ids idBlocks
			var err error
			if lazy {
				cp, s.idsLeft, err = assembleCheckpointHead(role, parts)
			} else {
				cp, ids, err = assembleCheckpoint(role, parts)
			}
			if err != nil {
				return s, fmt.Errorf("dispatch: checkpoint ending at offset %d: %w", at, err)
			}
			if cp.Base != nil {
				s.base, ref = cp.Base.Last, *cp.Base
				inHand, whole := baseParts(role, s.entries, ref)
				if !whole {
					inHand = nil
				}
				if lazy {
					// The base is read, or decoded from the parts that
					// the search read, when a lookup needs it.
					s.unread = &unreadBase{role: role, start: start, read: read, parts: inHand}
				} else if bases.reading(ref) {
					// The Standby still reads the base: the recovery ends
					// without it, and idsLater waits for it.
					s.sinceBase, s.prefetched = ids.all(), true
					s.idsLater = bases.laterBase(role, ref, start, read, inHand, ids)
					ids = idBlocks{}
				} else {
					base, n, prefetched, err := bases.readBase(ctx, role, *cp.Base, start, read, inHand)
					s.read, s.prefetched = s.read+n, prefetched
					switch {
					case errors.Is(err, errBaseGone):
						// Retention took the base: the records from the
						// log start are all there is, as without
						// checkpoints.
						s.base = -1
						return readDown(ctx, role, start, lo, read, s)
					case err != nil:
						return s, fmt.Errorf("dispatch: checkpoint ending at offset %d: %w", at, err)
					}
					s.sinceBase = ids.all()
					ids = overlay(base, ids)
				}
			}
			s.newestFull = &ref
			// Only the records after the checkpoint count from here: the
			// ones before it, and what they hold, are let go.
			i, _ := slices.BinarySearchFunc(s.entries, at+1, func(e Entry, o int64) int { return cmp.Compare(e.Offset, o) })
			s.entries = slices.Clone(s.entries[i:])
			s.cp, s.ids, s.at, s.found = cp, ids, at, true
			return s, nil
		}
		hi = lo
		step = min(2*step, maxSearchStep)
	}
	return s, nil
}

// buildAhead completes s, which holds the role's records read from
// ahead.end up, with what a Standby's search found below ahead.end: the
// checkpoint, its IDs laid over those of its base, and the role's records
// between the two. When the base is gone, or the Standby no longer holds
// the IDs of a full checkpoint, it searches below ahead.end as without the
// Standby.
func buildAhead(ctx context.Context, role string, start, step int64, read rangeReader, bases *Standby, ahead *foundAhead, s checkpointSearch) (checkpointSearch, error) {
	f := ahead.search
	if err := f.loadIDs(); err != nil {
		return s, err
	}
	ids := f.ids
	var sinceBase []compactID
	var prefetched bool
	var later func(context.Context) (idBlocks, error)
	switch {
	case f.cp.Base != nil && bases.reading(*f.cp.Base):
		// The Standby still reads the base: the recovery ends without it,
		// and later waits for it.
		var inHand []CheckpointPart
		if f.unread != nil {
			inHand = f.unread.parts
		}
		sinceBase, prefetched = ids.all(), true
		later = bases.laterBase(role, *f.cp.Base, start, read, inHand, ids)
		ids = idBlocks{}
	case f.cp.Base == nil && bases.reading(*f.newestFull):
		// The Standby still reads the IDs of the full checkpoint.
		later = bases.laterBase(role, *f.newestFull, start, read, nil, idBlocks{})
	case f.cp.Base != nil:
		var inHand []CheckpointPart
		if f.unread != nil {
			inHand = f.unread.parts
		}
		base, n, fromStandby, err := bases.readBase(ctx, role, *f.cp.Base, start, read, inHand)
		s.read += n
		switch {
		case errors.Is(err, errBaseGone):
			return searchBelow(ctx, role, start, ahead.end, step, read, s)
		case err != nil:
			return s, fmt.Errorf("dispatch: checkpoint ending at offset %d: %w", f.at, err)
		}
		sinceBase, prefetched = ids.all(), fromStandby
		ids = overlay(base, ids)
	default:
		var ok bool
		if ids, ok = bases.take(ctx, *f.newestFull); !ok {
			return searchBelow(ctx, role, start, ahead.end, step, read, s)
		}
	}
	s.entries = append(slices.Clip(f.entries), s.entries...)
	s.cp, s.ids, s.idsLater, s.at, s.first, s.base, s.found = f.cp, ids, later, f.at, f.first, f.base, true
	s.newestFull, s.sinceBase = f.newestFull, sinceBase
	s.prefetched, s.ahead = prefetched, true
	return s, nil
}

// searchBelow goes on with a search that holds the role's records from lo
// up, and found no checkpoint record of the role there, below lo without a
// Standby.
func searchBelow(ctx context.Context, role string, start, lo, step int64, read rangeReader, s checkpointSearch) (checkpointSearch, error) {
	below, err := searchCheckpoint(ctx, role, start, lo, step, read, false, nil)
	below.read += s.read
	below.entries = append(below.entries, s.entries...)
	return below, err
}

// holdsCheckpoint reports whether entries hold a checkpoint record of role.
func holdsCheckpoint(role string, entries []Entry) bool {
	for i := range entries {
		if entries[i].Role == role && entries[i].Kind == EntryCheckpoint {
			return true
		}
	}
	return false
}

// unreadBase is what loadBase needs to read the base of a delta: the
// parts of the base when the search read them whole, else where to read
// them.
type unreadBase struct {
	role  string
	start int64
	read  rangeReader
	parts []CheckpointPart
}

// loadIDs decodes the compact IDs of the checkpoint that s found, when a
// lazy search left them undecoded.
func (s *checkpointSearch) loadIDs() error {
	if s.idsLeft == nil {
		return nil
	}
	ids, err := s.idsLeft()
	if err != nil {
		return fmt.Errorf("dispatch: checkpoint ending at offset %d: %w", s.at, err)
	}
	s.ids, s.idsLeft = ids, nil
	return nil
}

// loadBase reads the base of the delta that s found, when a lazy search
// left it unread, and lays the delta's IDs over it. A base that retention
// took leaves the delta's IDs alone: the commands it held are older than
// the log.
func (s *checkpointSearch) loadBase(ctx context.Context) error {
	u := s.unread
	if u == nil {
		return nil
	}
	if err := s.loadIDs(); err != nil {
		return err
	}
	base, n, err := readBase(ctx, u.role, *s.cp.Base, u.start, u.read, u.parts)
	s.read += n
	switch {
	case errors.Is(err, errBaseGone):
	case err != nil:
		return fmt.Errorf("dispatch: checkpoint ending at offset %d: %w", s.at, err)
	default:
		s.ids = overlay(base, s.ids)
	}
	s.unread = nil
	return nil
}

// readDown reads the role's records from start up to lo, below those s
// holds, and returns s with them and without a checkpoint.
func readDown(ctx context.Context, role string, start, lo int64, read rangeReader, s checkpointSearch) (checkpointSearch, error) {
	if lo <= start {
		return s, nil
	}
	entries, n, err := read(ctx, start, lo)
	s.read += n
	if err != nil {
		return s, err
	}
	s.prepend(role, entries)
	return s, nil
}

// prepend puts the records of role among entries, read just below those s
// holds, before them.
func (s *checkpointSearch) prepend(role string, entries []Entry) {
	mine := make([]Entry, 0, len(entries)+len(s.entries))
	for _, e := range entries {
		if e.Role == role {
			mine = append(mine, e)
		}
	}
	s.entries = append(mine, s.entries...)
}

// newestCheckpoint finds the newest complete checkpoint of role among
// entries, given in offset order, and returns its parts and where they are.
// The parts of one checkpoint share a token and a sequence
// and were written in one transaction, so they are all committed or none,
// and no record of the role lies between them; a checkpoint whose first
// parts lie before entries is not found, and the caller reads further back.
// It takes the parts out of their entries, so that the caller holds them
// only as long as it decodes them: a checkpoint whose parts are all there
// and do not decode is an error, since a leader must not act on part of its
// log.
func newestCheckpoint(role string, entries []Entry) (parts []CheckpointPart, ref CheckpointBase, found bool) {
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
			at := last.Offset
			for j := i; j < len(entries); j++ {
				if entries[j].Kind == EntryCheckpoint && entries[j].Offset <= at {
					entries[j].Checkpoint = nil
				}
			}
			return parts, CheckpointBase{Token: last.Token, Sequence: p.Sequence, First: e.Offset, Last: at}, true
		}
	}
	return nil, CheckpointBase{}, false
}

// roleRangeReader is a LogRangeReader that reads the records of one role
// alone, without decoding those of the other roles that share the
// partition; [KafkaLogReader] is one.
type roleRangeReader interface {
	readRoleRange(ctx context.Context, partition coordination.TopicPartition, rng LogRange, role string) ([]Entry, int, error)
}

// rangeReader reads the records of a role between two offsets of its log
// partition, and counts the records of every role it read.
type rangeReader func(ctx context.Context, from, to int64) (entries []Entry, read int, err error)

// roleRange returns the rangeReader of role over reader: the role's records
// alone when the reader can tell them apart without decoding the rest, all
// the records it read otherwise.
func roleRange(reader LogRangeReader, tp coordination.TopicPartition, role string) rangeReader {
	return func(ctx context.Context, from, to int64) ([]Entry, int, error) {
		rng := LogRange{From: from, Until: to}
		if rr, ok := reader.(roleRangeReader); ok {
			return rr.readRoleRange(ctx, tp, rng, role)
		}
		entries, err := reader.ReadRange(ctx, tp, rng)
		return entries, len(entries), err
	}
}

// readRange reads the role's records of the log partition between two
// offsets, trying again as readLog does, and counts the records of every
// role it read.
func (d *Dispatcher) readRange(ctx context.Context, from, to int64) ([]Entry, int, error) {
	var entries []Entry
	var read int
	rr := roleRange(d.ranger, d.logTP, d.role)
	err := d.retryRead(ctx, func() error {
		var err error
		entries, read, err = rr(ctx, from, to)
		return err
	})
	return entries, read, err
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
