package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// errBaseGone reports a delta checkpoint whose base lies before the log
// start: retention deleted it.
var errBaseGone = errors.New("the full checkpoint that the delta builds on lies before the log start")

// readBase reads the compact IDs of base, the full checkpoint of role that
// a delta builds on, from the offsets its parts take in the partition,
// which starts at logStart, or decodes them from inHand, its parts that the
// caller read already (see baseParts). It returns how many records of any
// role it read, and errBaseGone when retention deleted the base.
func readBase(ctx context.Context, role string, base CheckpointBase, logStart int64, read rangeReader, inHand []CheckpointPart) (idBlocks, int, error) {
	if inHand != nil {
		ids, err := baseIDs(role, base, inHand)
		return ids, 0, err
	}
	if base.First < logStart {
		return idBlocks{}, 0, errBaseGone
	}
	entries, n, err := readHalves(ctx, base.First, base.Last+1, read)
	if err != nil {
		return idBlocks{}, n, err
	}
	parts, _ := baseParts(role, entries, base)
	above := len(entries) == 0 || entries[0].Offset > base.First
	clear(entries)
	if len(parts) == 0 {
		if above {
			// The read began above the base's first offset: the log
			// start moved past it while the read went on.
			return idBlocks{}, n, errBaseGone
		}
		return idBlocks{}, n, newFormatError("checkpoint", fmt.Errorf("offsets %d to %d hold no part of the base checkpoint %d under token %s",
			base.First, base.Last, base.Sequence, base.Token))
	}
	ids, err := baseIDs(role, base, parts)
	return ids, n, err
}

// baseParts returns the parts of base among entries, in offset order, and
// whether they hold it whole: a search whose reads reached below a delta
// often read its base too, which is then not read again.
func baseParts(role string, entries []Entry, base CheckpointBase) ([]CheckpointPart, bool) {
	var parts []CheckpointPart
	for i := range entries {
		if isBasePart(role, &entries[i], base) {
			parts = append(parts, *entries[i].Checkpoint)
		}
	}
	return parts, len(parts) > 0 && len(parts) == parts[0].Parts
}

// isBasePart reports whether e is a part of base, a full checkpoint of
// role: a checkpoint record of role at base's offsets, of its token and
// sequence.
func isBasePart(role string, e *Entry, base CheckpointBase) bool {
	return e.Offset >= base.First && e.Offset <= base.Last && e.Role == role && e.Kind == EntryCheckpoint &&
		e.Checkpoint != nil && e.Token == base.Token && e.Checkpoint.Sequence == base.Sequence
}

// baseIDs decodes the compact IDs of base from its parts.
func baseIDs(role string, base CheckpointBase, parts []CheckpointPart) (idBlocks, error) {
	cp, ids, err := assembleCheckpoint(role, parts)
	if err != nil {
		return idBlocks{}, fmt.Errorf("the base checkpoint at offsets %d to %d: %w", base.First, base.Last, err)
	}
	if cp.Base != nil {
		return idBlocks{}, newFormatError("checkpoint", fmt.Errorf("the base checkpoint at offsets %d to %d is a delta itself", base.First, base.Last))
	}
	return ids, nil
}

// overlay returns the dedup window that a delta describes: the IDs of base
// with those of delta in place of any of the same hash, both in hash order.
// The blocks of base that delta adds nothing to are kept as they are, and
// each one it adds to is let go once replaced. It takes base over.
func overlay(base, delta idBlocks) idBlocks {
	base.mergeIn(delta.all())
	return base
}

// deltaIDsLocked returns, in a slice of their own, the compact IDs that a
// delta on the dispatcher's base holds: those added to the window since the
// base's snapshot and still in it, in no order (see sortedDelta). The
// caller holds d.mu.
func (d *Dispatcher) deltaIDsLocked() []compactID {
	out := make([]compactID, 0, len(d.cpAdded))
	for _, id := range d.cpAdded {
		if cur, ok := d.ids.find(id.hash); ok && cur.First == id.first {
			out = append(out, toCompact(cur))
		}
	}
	return out
}

// addedID names an ID added to the dedup window by its hash and the offset
// of its first record: the window holds the rest, and an ID of the same
// hash added later has another first offset. It takes half the memory of
// the compact ID, and a dispatcher notes one for every ID added between
// two full checkpoints.
type addedID struct {
	hash  uint64
	first int64
}

// addedIDs names ids as IDs added to the window.
func addedIDs(ids []compactID) []addedID {
	out := make([]addedID, len(ids))
	for i, id := range ids {
		out[i] = addedID{hash: id.hash, first: id.first}
	}
	return out
}

// sortedDelta sorts the IDs of deltaIDsLocked by hash, once each: an ID
// added twice since the base (evicted and added again) is the window's one
// both times.
func sortedDelta(ids []compactID) []compactID {
	sortByHash(ids)
	return slices.CompactFunc(ids, func(a, b compactID) bool { return a.hash == b.hash })
}

// halves splits the offsets from first up to end into the two ranges that
// a read of a checkpoint reads at once, or leaves them whole when they are
// fewer than two.
func halves(first, end int64) [][2]int64 {
	if end-first < 2 {
		return [][2]int64{{first, end}}
	}
	mid := first + (end-first)/2
	return [][2]int64{{first, mid}, {mid, end}}
}

// readHalves reads the offsets from first up to end in two halves at once,
// and returns their entries in offset order. A full checkpoint of a large
// window is some twenty records of about a mebibyte, each a fetch of its
// own: two reads at once take little more than half the time of one.
func readHalves(ctx context.Context, first, end int64, read rangeReader) ([]Entry, int, error) {
	h := halves(first, end)
	if len(h) == 1 {
		return read(ctx, first, end)
	}
	var upper []Entry
	var nUpper int
	var errUpper error
	var wg sync.WaitGroup
	wg.Go(func() { upper, nUpper, errUpper = read(ctx, h[1][0], h[1][1]) })
	lower, n, err := read(ctx, h[0][0], h[0][1])
	wg.Wait()
	if err := errors.Join(err, errUpper); err != nil {
		return nil, n + nUpper, err
	}
	return append(lower, upper...), n + nUpper, nil
}
