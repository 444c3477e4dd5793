package dispatch

import (
	"cmp"
	"errors"
	"fmt"
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
// IDs: the hash of the ID and the offsets of its first record and its
// outcome, 32 bytes each with no pointer for the collector to follow. No two
// hold the same hash; a command whose hash is taken stays whole in the
// dispatcher's command map instead.
//
// The IDs live in a slice sorted by hash, searched by bisection, and a small
// map of the latest additions that is merged into the slice when it grows,
// so that a million IDs cost a slice of a million entries and no map of that
// size. A checkpoint encodes the slice as it is, in hash order, outside the
// dispatcher's lock: while shared is set the window changes a copy of the
// slice instead of the slice.
type idWindow struct {
	sorted []compactID
	recent map[uint64]compactID
	shared bool
}

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
func (w *idWindow) len() int { return len(w.sorted) + len(w.recent) }

// find returns the compact ID with hash h.
func (w *idWindow) find(h uint64) (CheckpointID, bool) {
	if id, ok := w.recent[h]; ok {
		return id.checkpointID(), true
	}
	i, ok := slices.BinarySearchFunc(w.sorted, h, func(id compactID, h uint64) int { return cmp.Compare(id.hash, h) })
	if ok {
		return w.sorted[i].checkpointID(), true
	}
	return CheckpointID{}, false
}

// add holds id; it reports false, and holds nothing, when its hash is taken.
func (w *idWindow) add(id CheckpointID) bool {
	if _, ok := w.find(id.Hash); ok {
		return false
	}
	w.recent[id.Hash] = toCompact(id)
	if len(w.recent) >= max(1024, len(w.sorted)/8) {
		w.merge()
	}
	return true
}

// errHashTwice reports compact IDs to load that hold one hash twice or are
// out of hash order.
var errHashTwice = errors.New("dispatch: compact IDs hold one hash twice or are out of hash order")

// load holds ids, in hash order, in an empty window at once, but for those
// submitted before cutoff. It takes ids over, and refuses ids that are out
// of order or hold one hash twice, which no checkpoint that decodes does.
func (w *idWindow) load(ids []compactID, cutoff time.Time) error {
	for i := 1; i < len(ids); i++ {
		if ids[i].hash <= ids[i-1].hash {
			return fmt.Errorf("%w: %016x after %016x", errHashTwice, ids[i].hash, ids[i-1].hash)
		}
	}
	limit := cutoff.UnixMilli()
	kept := ids[:0]
	for _, id := range ids {
		if id.submitted >= limit {
			kept = append(kept, id)
		}
	}
	w.sorted, w.shared = kept, false
	clear(w.recent)
	return nil
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

// merge moves the recent additions into the sorted slice.
func (w *idWindow) merge() {
	if len(w.recent) == 0 {
		return
	}
	add := make([]compactID, 0, len(w.recent))
	for _, id := range w.recent {
		add = append(add, id)
	}
	slices.SortFunc(add, func(a, b compactID) int { return cmp.Compare(a.hash, b.hash) })
	n := len(w.sorted)
	if w.shared {
		grown := make([]compactID, n, n+len(add)+(n+len(add))/8)
		copy(grown, w.sorted)
		w.sorted, w.shared = grown, false
	}
	// Merge from the back into the grown slice, so that a merge copies no
	// more than it moves and allocates only when the slice must grow.
	w.sorted = slices.Grow(w.sorted, len(add))[:n+len(add)]
	i, j := n-1, len(add)-1
	for k := len(w.sorted) - 1; j >= 0; k-- {
		if i >= 0 && w.sorted[i].hash > add[j].hash {
			w.sorted[k] = w.sorted[i]
			i--
		} else {
			w.sorted[k] = add[j]
			j--
		}
	}
	clear(w.recent)
}

// evict drops every ID submitted before cutoff and returns how many.
func (w *idWindow) evict(cutoff time.Time) int {
	limit := cutoff.UnixMilli()
	n := 0
	for h, id := range w.recent {
		if id.submitted < limit {
			delete(w.recent, h)
			n++
		}
	}
	old := 0
	for _, id := range w.sorted {
		if id.submitted < limit {
			old++
		}
	}
	if old == 0 {
		return n
	}
	kept := w.sorted[:0]
	if w.shared || cap(w.sorted) > 2*(len(w.sorted)-old)+1024 {
		kept, w.shared = make([]compactID, 0, len(w.sorted)-old), false
	}
	for _, id := range w.sorted {
		if id.submitted >= limit {
			kept = append(kept, id)
		}
	}
	w.sorted = kept
	return n + old
}

// share returns every ID in hash order, for a checkpoint to encode outside
// the dispatcher's lock: it merges the recent additions and hands over the
// slice itself, which the window does not change until release.
func (w *idWindow) share() []compactID {
	w.merge()
	w.shared = true
	return w.sorted
}

// release ends a share: the slice shared is the window's to change again,
// unless the window has moved to a copy meanwhile.
func (w *idWindow) release() { w.shared = false }
