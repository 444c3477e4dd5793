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
// outcome, about 32 bytes each. No two hold the same hash; a command whose
// hash is taken stays whole in the dispatcher's command map instead.
//
// The IDs live in a slice sorted by hash, searched by bisection, and a small
// map of the latest additions that is merged into the slice when it grows,
// so that a million IDs cost a slice of a million entries and no map of that
// size.
type idWindow struct {
	sorted []CheckpointID
	recent map[uint64]CheckpointID
}

func newIDWindow() *idWindow { return &idWindow{recent: make(map[uint64]CheckpointID)} }

// len returns how many IDs the window holds.
func (w *idWindow) len() int { return len(w.sorted) + len(w.recent) }

// find returns the compact ID with hash h.
func (w *idWindow) find(h uint64) (CheckpointID, bool) {
	if id, ok := w.recent[h]; ok {
		return id, true
	}
	i, ok := slices.BinarySearchFunc(w.sorted, h, func(id CheckpointID, h uint64) int { return cmp.Compare(id.Hash, h) })
	if ok {
		return w.sorted[i], true
	}
	return CheckpointID{}, false
}

// add holds id; it reports false, and holds nothing, when its hash is taken.
func (w *idWindow) add(id CheckpointID) bool {
	if _, ok := w.find(id.Hash); ok {
		return false
	}
	w.recent[id.Hash] = id
	if len(w.recent) >= max(1024, len(w.sorted)/8) {
		w.merge()
	}
	return true
}

// merge moves the recent additions into the sorted slice.
func (w *idWindow) merge() {
	if len(w.recent) == 0 {
		return
	}
	add := make([]CheckpointID, 0, len(w.recent))
	for _, id := range w.recent {
		add = append(add, id)
	}
	slices.SortFunc(add, func(a, b CheckpointID) int { return cmp.Compare(a.Hash, b.Hash) })
	merged := make([]CheckpointID, 0, len(w.sorted)+len(add))
	i, j := 0, 0
	for i < len(w.sorted) || j < len(add) {
		if j == len(add) || (i < len(w.sorted) && w.sorted[i].Hash < add[j].Hash) {
			merged = append(merged, w.sorted[i])
			i++
		} else {
			merged = append(merged, add[j])
			j++
		}
	}
	w.sorted = merged
	clear(w.recent)
}

// evict drops every ID submitted before cutoff and returns how many.
func (w *idWindow) evict(cutoff time.Time) int {
	n := 0
	for h, id := range w.recent {
		if id.SubmittedAt.Before(cutoff) {
			delete(w.recent, h)
			n++
		}
	}
	kept := w.sorted[:0]
	for _, id := range w.sorted {
		if id.SubmittedAt.Before(cutoff) {
			n++
			continue
		}
		kept = append(kept, id)
	}
	clear(w.sorted[len(kept):])
	w.sorted = kept
	if cap(w.sorted) > 2*len(w.sorted)+1024 {
		w.sorted = slices.Clip(slices.Clone(w.sorted))
	}
	return n
}

// all returns a copy of every ID, in the order of their First offset.
func (w *idWindow) all() []CheckpointID {
	out := make([]CheckpointID, 0, w.len())
	out = append(out, w.sorted...)
	for _, id := range w.recent {
		out = append(out, id)
	}
	sortIDs(out)
	return out
}
