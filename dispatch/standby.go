package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// Standby reads ahead, for a member that campaigns for a role, the part of
// a recovery that grows with the dedup window: the role's newest full
// checkpoint, which holds every compact ID of the window (about 17 MB in
// some 15 records at a million commands), so that the recovery of a
// leadership the member wins does not read and decode it after the lease is
// taken. A member calls [Standby.Prefetch] when it starts to campaign and
// now and then while it waits, and gives the Standby to each of its
// dispatchers with [WithStandby].
//
// The Standby also keeps what its search found: the newest checkpoint of
// the role below the high watermark it read up to, and the role's records
// after it. Its reads wait, as every read of the log does, until the last
// stable offset passes that watermark, so every offset below it was decided
// when read: its committed records never change, and no transaction holds
// records on both sides of it. A recovery then reads, with its leadership,
// only the offsets from that watermark to its own, and builds on the
// Standby's search unless a checkpoint record of the role lies among them;
// then it searches on down as without a Standby. Everything after the
// Standby's read, which is all a deposed leader may have added, is read
// with the lease held.
//
// A recovery takes the prefetched IDs only when its checkpoint is the
// prefetched one or a delta on it: a checkpoint is named by the token, the
// sequence and the offsets of its parts, and the committed records at those
// offsets never change, so IDs read before the lease are the ones a read
// after it would find. Otherwise (a newer full checkpoint, a base that
// retention took, a prefetch that failed) the recovery reads as it does
// without a Standby. The IDs are handed to one recovery, which lays the
// delta over them in place; the next leadership's recovery reads again, or
// takes what a later Prefetch read.
//
// A Standby is safe for concurrent use. From a Prefetch until the next
// recovery ends, which takes them or lets them go, it holds one full
// checkpoint's IDs at most, 24 bytes a command, and the newest checkpoint's
// head and records after it: the commands the checkpoint holds whole, the
// IDs of a delta, and about a checkpoint interval of the role's records.
type Standby struct {
	role   string
	tp     coordination.TopicPartition
	ranger LogRangeReader
	step   int64

	mu   sync.Mutex
	base *prefetched
	// searching, while a Prefetch searches, closes when its search is over:
	// a recovery that begins meanwhile waits for what it finds rather than
	// searching beside it.
	searching chan struct{}
	// ended counts the recoveries that ended: a Prefetch that began before
	// the last one keeps nothing, since a leader holds no copy.
	ended int
}

// prefetched is the read of one full checkpoint's IDs: done closes when
// ids or err is set. found, set before the read begins, is what the search
// that named the checkpoint found; a recovery takes it, or lets it go.
type prefetched struct {
	ref   CheckpointBase
	done  chan struct{}
	ids   idBlocks
	err   error
	found *foundAhead
}

// foundAhead is the newest checkpoint of a role that a Standby's search
// found below the offset end, with the role's records after it, up to end.
// The search read every offset below end after the last stable offset had
// passed end, so each of them was decided: the committed records there
// never change, and no transaction holds records on both sides of end.
type foundAhead struct {
	end    int64
	search checkpointSearch // lazy: the IDs of a delta undecoded, its base unread
}

// NewStandby returns a Standby of role that reads the command log with log,
// which must be a [LogRangeReader]. It takes the options of
// [NewDispatcher] and heeds those that place the role's records (the log
// topic and its partitions) and the checkpoint interval; give it the
// options its dispatchers get.
func NewStandby(role coordination.Role, log LogReader, options ...Option) (*Standby, error) {
	ranger, ok := log.(LogRangeReader)
	if !ok {
		return nil, errors.New("dispatch: a standby reads ranges of the log: the log reader is not a LogRangeReader")
	}
	if role == (coordination.Role{}) {
		return nil, errors.New("dispatch: standby: role is empty")
	}
	cfg, err := newConfig(options)
	if err != nil {
		return nil, err
	}
	partition, err := coordination.RolePartition(role, cfg.logPartitions)
	if err != nil {
		return nil, fmt.Errorf("dispatch: standby: log partition: %w", err)
	}
	return &Standby{
		role:   role.String(),
		tp:     coordination.TopicPartition{Topic: cfg.logTopic, Partition: partition},
		ranger: ranger,
		step:   min(int64(cfg.checkpointInterval), firstSearchStep),
	}, nil
}

// Prefetch finds the role's newest checkpoint as a recovery does and keeps
// what it found, and reads and keeps the IDs of the full checkpoint it is or
// builds on, unless the Standby holds those already. A recovery that
// begins while Prefetch searches waits for what it finds, and one that
// needs the IDs while Prefetch reads them waits for that read, rather than
// starting its own. It returns an error when a read fails or ctx ends; what it held
// before stays unless it began to read another base.
func (s *Standby) Prefetch(ctx context.Context) error {
	s.mu.Lock()
	ended := s.ended
	searching := s.searching == nil
	if searching {
		s.searching = make(chan struct{})
	}
	s.mu.Unlock()
	searched := func() {
		if searching {
			s.mu.Lock()
			close(s.searching)
			s.searching = nil
			s.mu.Unlock()
			searching = false
		}
	}
	defer searched()
	start, end, err := s.ranger.Bounds(ctx, s.tp)
	if err != nil {
		return fmt.Errorf("dispatch: standby: %w", err)
	}
	cs, err := searchCheckpoint(ctx, s.role, start, end, s.step, roleRange(s.ranger, s.tp, s.role), true, nil)
	if err != nil {
		return fmt.Errorf("dispatch: standby: %w", err)
	}
	if !cs.found {
		return nil
	}
	ref := *cs.newestFull
	found := &foundAhead{end: end, search: cs}
	var inHand []CheckpointPart
	if cs.unread == nil {
		// A full checkpoint: its IDs are those of the base, which the
		// recovery takes; the parts' bytes are let go.
		found.search.idsLeft = nil
	} else if cs.unread.parts != nil {
		// The search read the base whole: its IDs are decoded from those
		// parts below, and the recovery takes them from here, so what it
		// finds holds no second copy of the parts.
		inHand = cs.unread.parts
		u := *cs.unread
		u.parts = nil
		found.search.unread = &u
	}
	s.mu.Lock()
	if s.ended != ended {
		// A recovery ended while this one searched: its member leads, or
		// led and campaigns again, and reads ahead anew.
		s.mu.Unlock()
		return nil
	}
	if s.base != nil && s.base.ref == ref {
		b := s.base
		b.found = found
		s.mu.Unlock()
		searched()
		select {
		case <-b.done:
			return b.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b := &prefetched{ref: ref, done: make(chan struct{}), found: found}
	s.base = b
	s.mu.Unlock()
	searched()

	if cs.unread == nil {
		// The newest checkpoint is the full one.
		b.err = cs.loadIDs()
		b.ids = cs.ids
	} else if inHand != nil {
		b.ids, b.err = baseIDs(s.role, ref, inHand)
	} else {
		// The base is decoded while it is read: the Standby's read is the
		// one a cold start's first command waits for.
		b.ids, _, b.err = streamBase(ctx, s.role, ref, start, roleStream(s.ranger, s.tp, s.role))
	}
	if b.err != nil {
		s.mu.Lock()
		if s.base == b {
			s.base = nil
		}
		s.mu.Unlock()
		b.err = fmt.Errorf("dispatch: standby: %w", b.err)
	}
	close(b.done)
	return b.err
}

// take hands over the IDs of the full checkpoint ref, waiting for a
// Prefetch that reads them, and lets go of them: ok is false when the
// Standby does not hold them, the read failed, another recovery took them
// first, or ctx ended. A nil Standby holds nothing.
func (s *Standby) take(ctx context.Context, ref CheckpointBase) (ids idBlocks, ok bool) {
	if s == nil {
		return idBlocks{}, false
	}
	s.mu.Lock()
	b := s.base
	s.mu.Unlock()
	if b == nil || b.ref != ref {
		return idBlocks{}, false
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return idBlocks{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base != b || b.err != nil {
		return idBlocks{}, false
	}
	s.base = nil
	return b.ids, true
}

// reading reports whether a Prefetch reads the IDs of the full checkpoint
// ref and has not finished. A nil Standby reads nothing.
func (s *Standby) reading(ref CheckpointBase) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	b := s.base
	s.mu.Unlock()
	if b == nil || b.ref != ref {
		return false
	}
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

// laterBase returns the function that waits for the IDs of the full
// checkpoint base that a Prefetch reads, or reads them itself when the
// Standby no longer holds them, as readBase does, and lays delta over them.
// A base that retention took meanwhile is an error: the recovery that
// deferred its IDs ended on the checkpoint, and cannot go back to read the
// records below it.
func (s *Standby) laterBase(role string, base CheckpointBase, logStart int64, rr rangeReader, inHand []CheckpointPart, delta idBlocks) func(context.Context) (idBlocks, error) {
	return func(ctx context.Context) (idBlocks, error) {
		ids, _, _, err := s.readBase(ctx, role, base, logStart, rr, inHand)
		if errors.Is(err, errBaseGone) {
			err = fmt.Errorf("the full checkpoint at offsets %d to %d, whose IDs a standby was reading, is below the log start now: %w", base.First, base.Last, err)
		}
		if err != nil {
			return idBlocks{}, err
		}
		if delta.count() == 0 {
			return ids, nil
		}
		return overlay(ids, delta), nil
	}
}

// ahead hands over what the last Prefetch's search found, when a recovery
// that reads the offsets from start up to end can build on it: the
// checkpoint lies at or after start (retention took no part of it) and the
// search read no offset at or after end. It waits for a Prefetch that is
// searching, unless ctx ends. The IDs of its base are taken apart, with
// readBase. A nil Standby holds nothing.
func (s *Standby) ahead(ctx context.Context, start, end int64) *foundAhead {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	searching := s.searching
	s.mu.Unlock()
	if searching != nil {
		select {
		case <-searching:
		case <-ctx.Done():
			return nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base == nil || s.base.found == nil {
		return nil
	}
	f := s.base.found
	s.base.found = nil
	if f.end > end || f.search.first < start {
		return nil
	}
	return f
}

// release lets go of what the Standby holds or reads, once a recovery is
// over: a leader does not hold a second copy of its window. A Prefetch that
// still reads finishes for nothing.
func (s *Standby) release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.base = nil
	s.ended++
	s.mu.Unlock()
}

// readBase is readBase of the package, with the IDs that the Standby
// prefetched when it holds those of base; prefetched reports that it did,
// and read counts only the records read here. NewDispatcher makes sure the
// Standby is of the dispatcher's role and partition.
func (s *Standby) readBase(ctx context.Context, role string, base CheckpointBase, logStart int64, rr rangeReader, inHand []CheckpointPart) (ids idBlocks, read int, prefetched bool, err error) {
	if base.First >= logStart {
		if ids, ok := s.take(ctx, base); ok {
			return ids, 0, true, nil
		}
	}
	ids, read, err = readBase(ctx, role, base, logStart, rr, inHand)
	return ids, read, false, err
}
