package dispatch

import (
	"cmp"
	"iter"
	"slices"
	"sort"
)

// packedID is a compact ID as blocks of IDs hold it: 24 bytes where a
// compactID takes 32. At a million IDs that is 8 MB less heap, and about
// twice that less resident memory, since a collected heap grows to twice
// what it holds before it is collected.
//
// The hash is kept whole. The first offset (below 2^46), the outcome's
// distance above it (below 2^40) and the submission time (in milliseconds
// since packEpoch, below 2^42: until the year 2159) share the other 128
// bits. An ID whose values do not fit, which a dispatcher does not write in
// practice but a checkpoint may hold, is wide: hi is wideMark, and the ID
// is held whole in the wide map of its blocks.
type packedID struct {
	hash uint64
	lo   uint64 // the first offset, and above it the low 18 bits of the outcome's distance
	hi   uint64 // the high 22 bits of the outcome's distance, and above them the submission time
}

const (
	packEpoch     = 1_577_836_800_000 // 2020-01-01T00:00:00Z in milliseconds since the Unix epoch
	packFirstBits = 46
	packDeltaBits = 40
	packTimeBits  = 42
	packDeltaLow  = 64 - packFirstBits // the bits of the distance in lo
	wideMark      = ^uint64(0)
)

// pack returns the packed form of c, and false when c does not fit it.
func pack(c compactID) (packedID, bool) {
	delta, at := c.outcome-c.first, c.submitted-packEpoch
	// The largest time is left out so that no packed ID is wideMark.
	if c.first < 0 || c.first >= 1<<packFirstBits || delta < 0 || delta >= 1<<packDeltaBits || at < 0 || at >= 1<<packTimeBits-1 {
		return packedID{hash: c.hash, hi: wideMark}, false
	}
	return packedID{
		hash: c.hash,
		lo:   uint64(c.first) | uint64(delta)<<packFirstBits,
		hi:   uint64(delta)>>packDeltaLow | uint64(at)<<(packDeltaBits-packDeltaLow),
	}, true
}

// unpack returns the compact ID that p, which is not wide, packs.
func (p packedID) unpack() compactID {
	first := int64(p.lo & (1<<packFirstBits - 1))
	delta := int64(p.lo>>packFirstBits | (p.hi&(1<<(packDeltaBits-packDeltaLow)-1))<<packDeltaLow)
	return compactID{hash: p.hash, first: first, outcome: first + delta, submitted: int64(p.hi>>(packDeltaBits-packDeltaLow)) + packEpoch}
}

// idBlocks are compact IDs in blocks, every one sorted by hash and not
// empty, each block's hashes below the next one's, and the wide ones among
// them held whole by their hash.
type idBlocks struct {
	list [][]packedID
	wide map[uint64]compactID
}

// id returns the compact ID that p of b packs.
func (b *idBlocks) id(p packedID) compactID {
	if p.hi == wideMark {
		return b.wide[p.hash]
	}
	return p.unpack()
}

// submitted returns the submission time of the compact ID p of b, in
// milliseconds since the Unix epoch.
func (b *idBlocks) submitted(p packedID) int64 {
	if p.hi == wideMark {
		return b.wide[p.hash].submitted
	}
	return int64(p.hi>>(packDeltaBits-packDeltaLow)) + packEpoch
}

// put returns the packed form of c, which b is to hold in place of any ID
// of its hash, and holds c whole when it is wide.
func (b *idBlocks) put(c compactID) packedID {
	p, ok := pack(c)
	switch {
	case !ok:
		if b.wide == nil {
			b.wide = make(map[uint64]compactID)
		}
		b.wide[c.hash] = c
	case len(b.wide) > 0:
		delete(b.wide, c.hash)
	}
	return p
}

// drop lets go of p, which b no longer holds.
func (b *idBlocks) drop(p packedID) {
	if p.hi == wideMark {
		delete(b.wide, p.hash)
	}
}

// count returns how many IDs the blocks hold.
func (b idBlocks) count() int {
	n := 0
	for _, blk := range b.list {
		n += len(blk)
	}
	return n
}

// each yields the IDs of b in hash order, each with its index.
func (b idBlocks) each() iter.Seq2[int, compactID] {
	return func(yield func(int, compactID) bool) {
		i := 0
		for _, blk := range b.list {
			for _, p := range blk {
				if !yield(i, b.id(p)) {
					return
				}
				i++
			}
		}
	}
}

// all returns the IDs of b, in hash order, in one slice of their own.
func (b idBlocks) all() []compactID {
	out := make([]compactID, 0, b.count())
	for _, id := range b.each() {
		out = append(out, id)
	}
	return out
}

// find returns the ID with hash h.
func (b idBlocks) find(h uint64) (compactID, bool) {
	// The block that holds h, if any, is the last one that starts at or
	// below it.
	k := sort.Search(len(b.list), func(k int) bool { return b.list[k][0].hash > h })
	if k == 0 {
		return compactID{}, false
	}
	return b.findIn(b.list[k-1], h)
}

// findIn returns the ID with hash h in blk, a block of b.
func (b *idBlocks) findIn(blk []packedID, h uint64) (compactID, bool) {
	i, ok := slices.BinarySearchFunc(blk, h, func(p packedID, h uint64) int { return cmp.Compare(p.hash, h) })
	if !ok {
		return compactID{}, false
	}
	return b.id(blk[i]), true
}

// blocksOf returns the blocks of ids, sorted by hash: new blocks of at most
// windowBlock IDs.
func blocksOf(ids []compactID) idBlocks {
	var out idBlocks
	for len(ids) > 0 {
		n := min(len(ids), windowBlock)
		blk := make([]packedID, n)
		for i := range blk {
			blk[i] = out.put(ids[i])
		}
		out.list = append(out.list, blk)
		ids = ids[n:]
	}
	return out
}
