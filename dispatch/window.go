package dispatch

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// ErrOutsideDedupWindow reports a command whose SubmittedAt is older than
// the dedup window ([WithDedupWindow]) and whose ID the dispatcher does not
// hold: it may repeat a command whose ID has left the window, so it is
// refused and never dispatched. Submit returns an *[OutsideWindowError]
// that wraps it; a request from the requests topic is recorded as rejected
// with its message.
var ErrOutsideDedupWindow = errors.New("dispatch: the command was submitted before the dedup window, so it cannot be told from a duplicate")

// OutsideWindowError is the error of a command refused by the dedup window.
// It wraps [ErrOutsideDedupWindow].
type OutsideWindowError struct {
	// CommandID names the command.
	CommandID string

	// SubmittedAt is the command's SubmittedAt; Now is when it was refused.
	SubmittedAt, Now time.Time

	// Window is the dedup window.
	Window time.Duration
}

// Error names the command, its age and the window.
func (e *OutsideWindowError) Error() string {
	return fmt.Sprintf("dispatch: command %q was submitted %s ago, before the dedup window of %s: %v",
		e.CommandID, e.Now.Sub(e.SubmittedAt).Round(time.Millisecond), e.Window, ErrOutsideDedupWindow)
}

// Unwrap returns [ErrOutsideDedupWindow].
func (e *OutsideWindowError) Unwrap() error { return ErrOutsideDedupWindow }

// idWindow holds the settled commands inside the dedup window as compact
// IDs: the hash of the ID, the offsets of its first record and its outcome
// and its submission time, packed in 24 bytes each (packedID) with no
// pointer for the collector to follow. No two hold the same hash; a command
// whose hash is taken stays whole in the dispatcher's command map instead.
//
// The IDs live in blocks of at most windowBlock IDs, sorted by hash and
// searched by bisection, and a small map of the latest additions that is
// merged into the blocks when it grows, so that a million IDs cost their 24
// MB and no map of that size. A merge replaces the blocks it adds to and
// leaves the others as they are: it never holds a second copy of the whole
// window, as growing one slice of a million IDs would. A checkpoint encodes
// the blocks as they are, in hash order, outside the dispatcher's lock: a
// merge changes no block, and while shared is set an eviction changes
// copies of the blocks instead of the blocks.
type idWindow struct {
	idBlocks
	firsts []uint64 // the first hash of each block
	n      int      // the IDs the blocks hold
	recent map[uint64]compactID
	shared bool
}

// windowBlock is the most IDs one block of the window holds: 96 KiB.
const windowBlock = 4096

// compactID is the in-memory form of a CheckpointID.
type compactID struct {
	hash           uint64
	first, outcome int64
	submitted      int64 // milliseconds since the Unix epoch
}

func toCompact(id CheckpointID) compactID {
	return compactID{hash: id.Hash, first: id.First, outcome: id.Outcome, submitted: id.SubmittedAt.UnixMilli()}
}

func (c compactID) checkpointID() CheckpointID {
	return CheckpointID{Hash: c.hash, First: c.first, Outcome: c.outcome, SubmittedAt: time.UnixMilli(c.submitted).UTC()}
}

func newIDWindow() *idWindow { return &idWindow{recent: make(map[uint64]compactID)} }

// len returns how many IDs the window holds.
func (w *idWindow) len() int { return w.n + len(w.recent) }

// find returns the compact ID with hash h.
func (w *idWindow) find(h uint64) (CheckpointID, bool) {
	if id, ok := w.recent[h]; ok {
		return id.checkpointID(), true
	}
	// The block that holds h, if any, is the last one that starts at or
	// below it.
	b, at := slices.BinarySearch(w.firsts, h)
	if !at {
		if b == 0 {
			return CheckpointID{}, false
		}
		b--
	}
	if id, ok := w.findIn(w.list[b], h); ok {
		return id.checkpointID(), true
	}
	return CheckpointID{}, false
}

// add holds id; it reports false, and holds nothing, when its hash is taken.
func (w *idWindow) add(id CheckpointID) bool {
	if _, ok := w.find(id.Hash); ok {
		return false
	}
	w.recent[id.Hash] = toCompact(id)
	if len(w.recent) >= max(1024, w.n/8) {
		w.merge()
	}
	return true
}

// errHashTwice reports compact IDs to load that hold one hash twice or are
// out of hash order.
var errHashTwice = errors.New("dispatch: compact IDs hold one hash twice or are out of hash order")

// load holds blocks, in hash order, in an empty window at once, but for the
// IDs submitted before cutoff. It takes the blocks over, and refuses blocks
// out of order, empty, or with one hash twice, which no checkpoint that
// decodes holds.
func (w *idWindow) load(blocks idBlocks, cutoff time.Time) error {
	var prev uint64
	for b, blk := range blocks.list {
		if len(blk) == 0 {
			return fmt.Errorf("%w: block %d is empty", errHashTwice, b)
		}
		for i, p := range blk {
			if (b > 0 || i > 0) && p.hash <= prev {
				return fmt.Errorf("%w: %016x after %016x", errHashTwice, p.hash, prev)
			}
			prev = p.hash
		}
	}
	w.idBlocks, w.shared = blocks, false
	clear(w.recent)
	w.evict(cutoff)
	w.index()
	return nil
}

// index counts the IDs of the blocks and notes where each block starts.
func (w *idWindow) index() {
	w.firsts = w.firsts[:0]
	w.n = 0
	for _, blk := range w.list {
		w.firsts = append(w.firsts, blk[0].hash)
		w.n += len(blk)
	}
}

// sortByHash sorts ids by hash.
func sortByHash(ids []compactID) { radixSort(ids, func(id compactID) uint64 { return id.hash }) }

// radixSort sorts s by key: four passes of 16 bits, which order a million
// items in a fraction of the time a comparison sort takes.
func radixSort[T any](s []T, key func(T) uint64) {
	if len(s) < 4096 {
		slices.SortFunc(s, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
		return
	}
	buf := make([]T, len(s))
	src, dst := s, buf
	count := make([]int, 1<<16)
	for shift := uint(0); shift < 64; shift += 16 {
		clear(count)
		for _, v := range src {
			count[(key(v)>>shift)&0xffff]++
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, v := range src {
			d := (key(v) >> shift) & 0xffff
			dst[count[d]] = v
			count[d]++
		}
		src, dst = dst, src
	}
	// An even number of passes ends in s itself.
}

// merge moves the recent additions into the blocks. Each block that gets
// additions is replaced by one new block of its IDs and theirs, or by
// several when they come to more than windowBlock; the other blocks stay.
func (w *idWindow) merge() {
	if len(w.recent) == 0 {
		return
	}
	add := make([]compactID, 0, len(w.recent))
	for _, id := range w.recent {
		add = append(add, id)
	}
	slices.SortFunc(add, func(a, b compactID) int { return cmp.Compare(a.hash, b.hash) })
	clear(w.recent)
	// The old blocks go now, not with the whole list, unless a checkpoint
	// reads them.
	w.mergeIn(add)
	w.index()
}

// mergeIn merges add, sorted by hash, into b, the IDs of add in place of
// any of b of the same hash. A block that add adds nothing to is kept as it
// is; one it adds to is replaced by new blocks (mergeBlock) and let go in
// the list b held before, which b no longer shares.
func (b *idBlocks) mergeIn(add []compactID) {
	if len(b.list) == 0 {
		*b = blocksOf(add)
		return
	}
	old := b.list
	b.list = make([][]packedID, 0, len(old)+len(add)/windowBlock+1)
	for k, blk := range old {
		// The additions below the next block's first hash go in this one;
		// those below the first block's go in the first.
		n := len(add)
		if k+1 < len(old) {
			n, _ = slices.BinarySearchFunc(add, old[k+1][0].hash, func(id compactID, h uint64) int { return cmp.Compare(id.hash, h) })
		}
		if n == 0 {
			b.list = append(b.list, blk)
			continue
		}
		b.list = append(b.list, b.mergeBlock(blk, add[:n])...)
		add = add[n:]
		old[k] = nil
	}
}

// mergeBlock returns the IDs of blk and add, both sorted by hash, with
// those of add in place of any of blk of the same hash, in new blocks of at
// most windowBlock IDs and as even as they can be; b holds the wide ones.
// It walks both once, counting the replaced IDs first to size the blocks: a
// delta adds to nearly every block of a large base, and searching the
// additions for each ID of a block cost more than the rest of a recovery
// from a prefetched base.
func (b *idBlocks) mergeBlock(blk []packedID, add []compactID) [][]packedID {
	replaced := 0
	for i, j := 0, 0; i < len(blk) && j < len(add); {
		switch {
		case blk[i].hash < add[j].hash:
			i++
		case blk[i].hash > add[j].hash:
			j++
		default:
			replaced++
			i++
			j++
		}
	}
	total := len(blk) - replaced + len(add)
	pieces := (total + windowBlock - 1) / windowBlock
	out := make([][]packedID, pieces)
	i, j := 0, 0
	for p := range out {
		size := total / pieces
		if p < total%pieces {
			size++
		}
		cur := make([]packedID, size)
		for k := range cur {
			if i < len(blk) && j < len(add) && blk[i].hash == add[j].hash {
				i++ // replaced by add[j], taken next; put lets go of it if wide
			}
			if j >= len(add) || (i < len(blk) && blk[i].hash < add[j].hash) {
				cur[k] = blk[i]
				i++
			} else {
				cur[k] = b.put(add[j])
				j++
			}
		}
		out[p] = cur
	}
	return out
}

// evict drops every ID submitted before cutoff and returns how many. A
// block it drops IDs from is filtered in place, or into a copy while the
// blocks are shared; a block left empty goes, and blocks left small are
// joined again.
func (w *idWindow) evict(cutoff time.Time) int {
	limit := cutoff.UnixMilli()
	n := 0
	for h, id := range w.recent {
		if id.submitted < limit {
			delete(w.recent, h)
			n++
		}
	}
	kept := w.list[:0]
	if w.shared {
		kept = make([][]packedID, 0, len(w.list))
	}
	for _, blk := range w.list {
		old := 0
		for _, p := range blk {
			if w.submitted(p) < limit {
				old++
			}
		}
		switch {
		case old == len(blk):
			n += old
			for _, p := range blk {
				w.drop(p)
			}
			continue
		case old > 0:
			n += old
			dst := blk[:0]
			if w.shared || cap(blk) > 2*(len(blk)-old)+64 {
				dst = make([]packedID, 0, len(blk)-old)
			}
			for _, p := range blk {
				if w.submitted(p) >= limit {
					dst = append(dst, p)
				} else {
					w.drop(p)
				}
			}
			blk = dst
		}
		kept = append(kept, blk)
	}
	clear(w.list[len(kept):cap(w.list)])
	w.list, w.shared = kept, false
	w.index()
	// Blocks thinned by evictions are joined again once they are more
	// than twice as many as full blocks would be.
	if len(w.list) > 2*((w.n+windowBlock-1)/windowBlock)+1 {
		var all [][]packedID
		cur := make([]packedID, 0, windowBlock)
		for _, blk := range w.list {
			for _, p := range blk {
				if len(cur) == windowBlock {
					all, cur = append(all, cur), make([]packedID, 0, windowBlock)
				}
				cur = append(cur, p)
			}
		}
		if len(cur) > 0 {
			all = append(all, cur)
		}
		w.list = all
		w.index()
	}
	return n
}

// share returns every ID in hash order, for a checkpoint to encode outside
// the dispatcher's lock: it merges the recent additions and hands over the
// blocks themselves, which the window does not change until release, and a
// copy of the few wide IDs.
func (w *idWindow) share() idBlocks {
	w.merge()
	w.shared = true
	return idBlocks{list: slices.Clone(w.list), wide: maps.Clone(w.wide)}
}

// release ends a share: the blocks shared are the window's to change again.
func (w *idWindow) release() { w.shared = false }
