package dispatch

import (
	"context"
	"fmt"
	"sync"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// rangeStream reads the role's records between two offsets as a
// rangeReader does, but hands them to each, in offset order, as they come
// rather than all at the end. It returns the count of the records of every
// role that it read.
type rangeStream func(ctx context.Context, from, to int64, each func([]Entry)) (read int, err error)

// roleRangeStreamer is a LogRangeReader that can hand a role's records over
// as they come; KafkaLogReader is one.
type roleRangeStreamer interface {
	streamRoleRange(ctx context.Context, partition coordination.TopicPartition, rng LogRange, role string, each func([]Entry)) (int, error)
}

// roleStream returns the rangeStream of role over reader: one that hands
// the records over as they come when the reader can, and all at once
// otherwise.
func roleStream(reader LogRangeReader, tp coordination.TopicPartition, role string) rangeStream {
	if rs, ok := reader.(roleRangeStreamer); ok {
		return func(ctx context.Context, from, to int64, each func([]Entry)) (int, error) {
			return rs.streamRoleRange(ctx, tp, LogRange{From: from, Until: to}, role, each)
		}
	}
	read := roleRange(reader, tp, role)
	return func(ctx context.Context, from, to int64, each func([]Entry)) (int, error) {
		entries, n, err := read(ctx, from, to)
		if err == nil && len(entries) > 0 {
			each(entries)
		}
		return n, err
	}
}

// streamBase is readBase of a base that no search has read: it reads the
// offsets of base in two halves at once, as readBase does, and decodes the
// base's parts as they come rather than after the last, so that the decode
// of a large window overlaps its read, and each part is let go once
// decoded rather than all of them held until the end.
func streamBase(ctx context.Context, role string, base CheckpointBase, logStart int64, read rangeStream) (idBlocks, int, error) {
	if base.First < logStart {
		return idBlocks{}, 0, errBaseGone
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := newPartFeed(role, base)
	hs := halves(base.First, base.Last+1)
	f.reads = len(hs)
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() {
			n, err := read(ctx, h[0], h[1], f.add)
			f.done(n, err)
		})
	}
	r := wireReader{more: f.next}
	cp, ids, err := decodeCheckpointState(role, r)
	readFailed, over := f.state()
	if err != nil && !readFailed {
		// The decode failed on what the reads brought: they have nothing
		// left to do, and what ends them now is not the cause.
		cancel()
	}
	wg.Wait()
	n, come := f.read, f.come()
	switch {
	case f.err != nil && (readFailed || err == nil):
		return idBlocks{}, n, f.err
	case f.fault != nil:
		err = f.fault
	case come == 0 && f.above():
		// The read began above the base's first offset: the log start
		// moved past it while the read went on.
		return idBlocks{}, n, errBaseGone
	case come == 0:
		return idBlocks{}, n, newFormatError("checkpoint", fmt.Errorf("offsets %d to %d hold no part of the base checkpoint %d under token %s",
			base.First, base.Last, base.Sequence, base.Token))
	case over && come < f.parts:
		err = newFormatError("checkpoint", fmt.Errorf("%d parts of a checkpoint of %d", come, f.parts))
	case err != nil:
		err = newFormatError("checkpoint", err)
	case cp.Base != nil:
		return idBlocks{}, n, newFormatError("checkpoint", fmt.Errorf("the base checkpoint at offsets %d to %d is a delta itself", base.First, base.Last))
	}
	if err != nil {
		return idBlocks{}, n, fmt.Errorf("the base checkpoint at offsets %d to %d: %w", base.First, base.Last, err)
	}
	return ids, n, nil
}

// partFeed gathers the parts of one base checkpoint from the reads of its
// offsets, in any order, and hands their data to a decoder in part order.
type partFeed struct {
	role string
	base CheckpointBase

	mu    sync.Mutex
	cond  sync.Cond
	data  map[int][]byte // parts come but not yet taken, by index
	parts int            // the count of parts, from the first part come; 0 before
	taken int            // parts handed to the decoder, which are 0 to taken-1
	least int64          // the lowest offset read, -1 before any
	reads int            // reads not yet done
	read  int            // records read
	err   error          // the first read error
	fault error          // the first part that does not belong
}

func newPartFeed(role string, base CheckpointBase) *partFeed {
	f := &partFeed{role: role, base: base, data: make(map[int][]byte), least: -1}
	f.cond.L = &f.mu
	return f
}

// add takes the parts of the base among entries, read in offset order.
func (f *partFeed) add(entries []Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.cond.Broadcast()
	if len(entries) > 0 && (f.least < 0 || entries[0].Offset < f.least) {
		f.least = entries[0].Offset
	}
	for i := range entries {
		if f.fault != nil || !isBasePart(f.role, &entries[i], f.base) {
			continue
		}
		p := *entries[i].Checkpoint
		n := f.parts
		if n == 0 {
			n = p.Parts
		}
		if err := checkPartOf(p, n, f.base.Sequence, f.came); err != nil {
			f.fault = newFormatError("checkpoint", err)
			continue
		}
		f.parts, f.data[p.Part] = n, p.Data
	}
	// The entries are let go here: the feed holds the parts' data alone.
	clear(entries)
}

// done records the end of one read.
func (f *partFeed) done(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads--
	f.read += n
	if err != nil && f.err == nil {
		f.err = err
	}
	f.cond.Broadcast()
}

// next hands the data of the next part to the decoder, waiting for it to
// come, with a bound of the bytes of the parts after it; ok is false once
// every part is taken, or when the next part will not come: the reads are
// over without it, one failed, or a part did not belong.
func (f *partFeed) next() (b []byte, unread int, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if f.err != nil || f.fault != nil || (f.parts != 0 && f.taken == f.parts) {
			return nil, 0, false
		}
		if d, ok := f.data[f.taken]; ok {
			delete(f.data, f.taken)
			f.taken++
			return d, (f.parts - f.taken) * MaxCheckpointPartLen, true
		}
		if f.reads == 0 {
			return nil, 0, false
		}
		f.cond.Wait()
	}
}

// state reports whether a read failed, and whether the reads are over.
func (f *partFeed) state() (failed, over bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err != nil, f.reads == 0
}

// came reports whether part came already: it was taken, or waits to be.
// The caller holds f.mu.
func (f *partFeed) came(part int) bool {
	_, waits := f.data[part]
	return part < f.taken || waits
}

// come counts the parts that came. The caller holds f.mu, or the reads are
// over.
func (f *partFeed) come() int { return f.taken + len(f.data) }

// above reports whether the reads found no record at or below the base's
// first offset.
func (f *partFeed) above() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.least < 0 || f.least > f.base.First
}
