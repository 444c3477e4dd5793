package dispatch

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestPack checks the packed form at the edges of what it holds: an ID
// inside them packs and unpacks to itself, one past any of them is held
// wide, and whole, by the blocks.
func TestPack(t *testing.T) {
	const lastTime = packEpoch + 1<<packTimeBits - 2
	for _, c := range []struct {
		id   compactID
		fits bool
	}{
		{compactID{hash: 1, first: 0, outcome: 0, submitted: packEpoch}, true},
		{compactID{hash: 2, first: 1<<packFirstBits - 1, outcome: 1<<packFirstBits - 1 + 1<<packDeltaBits - 1, submitted: lastTime}, true},
		{compactID{hash: 3, first: 12345, outcome: 12345 + 1<<packDeltaLow, submitted: 1_800_000_000_123}, true},
		{compactID{hash: ^uint64(0), first: 7, outcome: 9, submitted: packEpoch + 1}, true},
		{compactID{hash: 4, first: 1 << packFirstBits, outcome: 1 << packFirstBits, submitted: packEpoch}, false},
		{compactID{hash: 5, first: 0, outcome: 1 << packDeltaBits, submitted: packEpoch}, false},
		{compactID{hash: 6, first: 0, outcome: 0, submitted: packEpoch - 1}, false},
		{compactID{hash: 7, first: 0, outcome: 0, submitted: lastTime + 1}, false},
		{compactID{hash: 8, first: 0, outcome: 0, submitted: maxTimeMillis}, false},
		{compactID{hash: 9, first: 0, outcome: 0, submitted: zeroTimeMillis + 1}, false},
		{compactID{hash: 10, first: 5, outcome: 4, submitted: packEpoch}, false},
	} {
		p, ok := pack(c.id)
		if ok != c.fits || (p.hi == wideMark) == ok {
			t.Errorf("%+v: packs %t, marked wide %t; want it to fit: %t", c.id, ok, p.hi == wideMark, c.fits)
		}
		var b idBlocks
		p = b.put(c.id)
		if got := b.id(p); got != c.id || b.submitted(p) != c.id.submitted || p.hash != c.id.hash {
			t.Errorf("%+v: held as %+v, submitted at %d", c.id, got, b.submitted(p))
		}
		if len(b.wide) != map[bool]int{true: 0, false: 1}[c.fits] {
			t.Errorf("%+v: %d IDs held wide", c.id, len(b.wide))
		}
		b.drop(p)
		if len(b.wide) != 0 {
			t.Errorf("%+v: %d IDs held wide after drop", c.id, len(b.wide))
		}
	}
}

// FuzzPack checks that every compact ID a checkpoint may hold is held as
// itself, packed or wide.
func FuzzPack(f *testing.F) {
	f.Add(uint64(1), int64(0), int64(0), int64(packEpoch))
	f.Add(uint64(2), int64(1)<<50, int64(3), int64(1))
	f.Add(uint64(3), int64(99), int64(1)<<41, int64(maxTimeMillis))
	f.Fuzz(func(t *testing.T, hash uint64, first, delta, submitted int64) {
		if first < 0 || delta < 0 || first > (1<<63-1)-delta || submitted <= zeroTimeMillis || submitted > maxTimeMillis {
			return // not a compact ID a checkpoint holds
		}
		id := compactID{hash: hash, first: first, outcome: first + delta, submitted: submitted}
		var b idBlocks
		p := b.put(id)
		if got := b.id(p); got != id || b.submitted(p) != submitted {
			t.Fatalf("%+v held as %+v", id, got)
		}
	})
}

// TestIDWindowWide runs the window with IDs of which some are held wide:
// each is found as it was added, replaced, evicted or shared, and the wide
// map holds exactly the wide IDs of the blocks.
func TestIDWindowWide(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	w := newIDWindow()
	want := map[uint64]CheckpointID{}
	next := int64(0)
	at := func(i int64) int64 { return 1_800_000_000_000 + i }
	for i := range 30_000 {
		next += 2
		c := compactID{hash: r.Uint64() % 40_000, first: next, outcome: next + 1, submitted: at(int64(i))}
		if r.IntN(5) == 0 {
			c.outcome = next + 1<<packDeltaBits // held wide
		}
		if w.add(c.checkpointID()) {
			want[c.hash] = c.checkpointID()
		}
		if i == 15_000 {
			shared := w.share()
			for h, id := range want {
				if got, ok := shared.find(h); !ok || got.checkpointID() != id {
					t.Fatalf("the share holds %016x as %+v %t, want %+v", h, got, ok, id)
				}
			}
			w.release()
		}
	}
	check := func(when string) {
		t.Helper()
		w.merge()
		checkWindow(t, w)
		wide := 0
		for _, blk := range w.list {
			for _, p := range blk {
				if p.hi == wideMark {
					wide++
				}
			}
		}
		if w.len() != len(want) || len(w.wide) != wide {
			t.Fatalf("%s: the window holds %d, want %d; %d wide, its map %d", when, w.len(), len(want), wide, len(w.wide))
		}
		for h, id := range want {
			if got, ok := w.find(h); !ok || got != id {
				t.Fatalf("%s: find %016x: %+v %t, want %+v", when, h, got, ok, id)
			}
		}
	}
	check("after adds")
	cutoff := at(20_000)
	for h, id := range want {
		if id.SubmittedAt.UnixMilli() < cutoff {
			delete(want, h)
		}
	}
	w.evict(time.UnixMilli(cutoff))
	check("after evict")
	loaded := newIDWindow()
	if err := loaded.load(w.share(), time.UnixMilli(at(25_000))); err != nil {
		t.Fatal(err)
	}
	w = loaded
	for h, id := range want {
		if id.SubmittedAt.UnixMilli() < at(25_000) {
			delete(want, h)
		}
	}
	check("after load")
}
