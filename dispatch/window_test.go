package dispatch

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestIDWindow checks the compact ID store against a map: every ID added is
// found by its hash until it is evicted, a hash is held once, and a load
// refuses a hash twice.
func TestIDWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := time.UnixMilli(1_800_000_000_000)
	w := newIDWindow()
	want := map[uint64]CheckpointID{}
	for i := range 20_000 {
		id := CheckpointID{Hash: r.Uint64() % 50_000, First: int64(2 * i), Outcome: int64(2*i + 1), SubmittedAt: base.Add(time.Duration(i) * time.Second).UTC()}
		_, taken := want[id.Hash]
		if added := w.add(id); added == taken {
			t.Fatalf("add of hash %d: %t, held before %t", id.Hash, added, taken)
		}
		if !taken {
			want[id.Hash] = id
		}
	}
	check := func(when string) {
		t.Helper()
		if w.len() != len(want) {
			t.Fatalf("%s: the window holds %d, want %d", when, w.len(), len(want))
		}
		for h, id := range want {
			if got, ok := w.find(h); !ok || got != id {
				t.Fatalf("%s: find %d: %+v %t, want %+v", when, h, got, ok, id)
			}
		}
	}
	check("after adds")
	cutoff := base.Add(10_000 * time.Second)
	evicted := 0
	for h, id := range want {
		if id.SubmittedAt.Before(cutoff) {
			delete(want, h)
			evicted++
		}
	}
	if n := w.evict(cutoff); n != evicted {
		t.Fatalf("evict dropped %d, want %d", n, evicted)
	}
	check("after evict")

	ids := make([]CheckpointID, 0, len(want))
	for _, id := range want {
		ids = append(ids, id)
	}
	sortIDs(ids)
	if err := newIDWindow().load(blocksOf(append(toCompacts(ids), toCompact(ids[len(ids)-1]))), time.Time{}); !errors.Is(err, errHashTwice) {
		t.Fatalf("a load with a hash twice: %v", err)
	}
	unordered := toCompacts(ids)
	unordered[0], unordered[1] = unordered[1], unordered[0]
	if err := newIDWindow().load(blocksOf(unordered), time.Time{}); !errors.Is(err, errHashTwice) {
		t.Fatalf("a load out of hash order: %v", err)
	}
	loaded := newIDWindow()
	if err := loaded.load(blocksOf(toCompacts(ids)), time.Time{}); err != nil {
		t.Fatal(err)
	}
	w = loaded
	check("after load")
}

// TestIDWindowShare checks that the blocks the window shares with a
// checkpoint stay as they were while the window evicts in place and merges,
// and that the window keeps its blocks sound throughout.
func TestIDWindowShare(t *testing.T) {
	base := time.UnixMilli(1_800_000_000_000)
	w := newIDWindow()
	r := rand.New(rand.NewPCG(5, 6))
	next := int64(0)
	want := map[uint64]int64{}
	add := func(n int) {
		for range n {
			next += 2
			h := r.Uint64()
			if w.add(CheckpointID{Hash: h, First: next, Outcome: next + 1, SubmittedAt: base.Add(time.Duration(next) * time.Millisecond)}) {
				want[h] = next
			}
			checkWindow(t, w)
		}
	}
	evict := func(ms int64) {
		w.evict(base.Add(time.Duration(ms) * time.Millisecond))
		for h, first := range want {
			if first < ms {
				delete(want, h)
			}
		}
		checkWindow(t, w)
	}
	add(30_000)
	shared := w.share()
	if len(w.recent) != 0 || shared.count() != 30_000 || len(shared.list) < 30_000/windowBlock {
		t.Fatalf("share left %d recent, shared %d in %d blocks", len(w.recent), shared.count(), len(shared.list))
	}
	frozen := make([][]packedID, len(shared.list))
	for i, blk := range shared.list {
		frozen[i] = slices.Clone(blk)
	}
	evict(10_000) // would filter the blocks in place
	add(9_000)    // merges at least once
	for i := range shared.list {
		if !slices.Equal(shared.list[i], frozen[i]) {
			t.Fatalf("the window changed block %d that it shared", i)
		}
	}
	w.release()
	// Evictions thin the blocks until they are joined again.
	for ms := int64(20_000); ms < next; ms += 7_000 {
		evict(ms)
	}
	add(100_000)
	if w.len() != len(want) {
		t.Fatalf("the window holds %d, want %d", w.len(), len(want))
	}
	for h := range want {
		if _, ok := w.find(h); !ok {
			t.Fatalf("hash %016x is lost", h)
		}
	}
}

// checkWindow checks the window's blocks: each sorted, none empty or above
// windowBlock, each below the next, counted and indexed.
func checkWindow(t *testing.T, w *idWindow) {
	t.Helper()
	if len(w.firsts) != len(w.list) || w.n != w.count() {
		t.Fatalf("%d firsts of %d blocks, n %d of %d", len(w.firsts), len(w.list), w.n, w.count())
	}
	var prev *packedID
	for b, blk := range w.list {
		if len(blk) == 0 || len(blk) > windowBlock || w.firsts[b] != blk[0].hash {
			t.Fatalf("block %d holds %d IDs, first %016x indexed %016x", b, len(blk), blk[0].hash, w.firsts[b])
		}
		for i := range blk {
			if prev != nil && blk[i].hash <= prev.hash {
				t.Fatalf("block %d: %016x after %016x", b, blk[i].hash, prev.hash)
			}
			prev = &blk[i]
		}
	}
}
