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
// A recovery still reads the newest checkpoint and the records after it,
// with its leadership, and takes the prefetched IDs only when that
// checkpoint is the prefetched one or a delta on it: a checkpoint is named
// by the token, the sequence and the offsets of its parts, and the
// committed records at those offsets never change, so IDs read before the
// lease are the ones a read after it would find. Otherwise (a newer full
// checkpoint, a base that retention took, a prefetch that failed) the
// recovery reads as it does without a Standby. The IDs are handed to one
// recovery, which lays the delta over them in place; the next leadership's
// recovery reads again, or takes what a later Prefetch read.
//
// A Standby is safe for concurrent use. It holds one full checkpoint's IDs
// at most, 32 bytes a command, from a Prefetch until the next
// recovery ends, which takes them or lets them go.
type Standby struct {
	role   string
	tp     coordination.TopicPartition
	ranger LogRangeReader
	step   int64

	mu   sync.Mutex
	base *prefetched
	// ended counts the recoveries that ended: a Prefetch that began before
	// the last one keeps nothing, since a leader holds no copy.
	ended int
}

// prefetched is the read of one full checkpoint's IDs: done closes when
// ids or err is set.
type prefetched struct {
	ref  CheckpointBase
	done chan struct{}
	ids  idBlocks
	err  error
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

// Prefetch finds the role's newest checkpoint as a recovery does, and reads
// and keeps the IDs of the full checkpoint it is or builds on, unless the
// Standby holds those already. A recovery that needs them while Prefetch
// reads them waits for that read rather than starting its own. It returns
// an error when a read fails or ctx ends; what it held before stays unless
// it began to read another base.
func (s *Standby) Prefetch(ctx context.Context) error {
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
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
	s.mu.Lock()
	if s.ended != ended {
		// A recovery ended while this one searched: its member leads, or
		// led and campaigns again, and reads ahead anew.
		s.mu.Unlock()
		return nil
	}
	if s.base != nil && s.base.ref == ref {
		b := s.base
		s.mu.Unlock()
		select {
		case <-b.done:
			return b.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b := &prefetched{ref: ref, done: make(chan struct{})}
	s.base = b
	s.mu.Unlock()

	if cs.unread == nil {
		// The newest checkpoint is the full one.
		b.err = cs.loadIDs()
		b.ids = cs.ids
	} else {
		b.ids, _, b.err = readBase(ctx, s.role, ref, start, roleRange(s.ranger, s.tp, s.role))
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
		return nil, false
	}
	s.mu.Lock()
	b := s.base
	s.mu.Unlock()
	if b == nil || b.ref != ref {
		return nil, false
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base != b || b.err != nil {
		return nil, false
	}
	s.base = nil
	return b.ids, true
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
func (s *Standby) readBase(ctx context.Context, role string, base CheckpointBase, logStart int64, rr rangeReader) (ids idBlocks, read int, prefetched bool, err error) {
	if base.First >= logStart {
		if ids, ok := s.take(ctx, base); ok {
			return ids, 0, true, nil
		}
	}
	ids, read, err = readBase(ctx, role, base, logStart, rr)
	return ids, read, false, err
}
