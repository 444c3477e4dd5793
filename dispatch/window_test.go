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
	if err := newIDWindow().load(append(toCompacts(ids), toCompact(ids[len(ids)-1])), time.Time{}); !errors.Is(err, errHashTwice) {
		t.Fatalf("a load with a hash twice: %v", err)
	}
	unordered := toCompacts(ids)
	unordered[0], unordered[1] = unordered[1], unordered[0]
	if err := newIDWindow().load(unordered, time.Time{}); !errors.Is(err, errHashTwice) {
		t.Fatalf("a load out of hash order: %v", err)
	}
	loaded := newIDWindow()
	if err := loaded.load(toCompacts(ids), time.Time{}); err != nil {
		t.Fatal(err)
	}
	w = loaded
	check("after load")
}

// TestIDWindowShare checks that a slice the window shares with a checkpoint
// stays as it was while the window merges and evicts, and that the window
// changes its slice in place again once released.
func TestIDWindowShare(t *testing.T) {
	base := time.UnixMilli(1_800_000_000_000)
	w := newIDWindow()
	r := rand.New(rand.NewPCG(5, 6))
	next := int64(0)
	add := func(n int) {
		for range n {
			next += 2
			w.add(CheckpointID{Hash: r.Uint64(), First: next, Outcome: next + 1, SubmittedAt: base.Add(time.Duration(next) * time.Millisecond)})
		}
	}
	add(10_000)
	shared := w.share()
	if len(w.recent) != 0 || len(shared) != 10_000 {
		t.Fatalf("share left %d recent, shared %d", len(w.recent), len(shared))
	}
	for i := 1; i < len(shared); i++ {
		if shared[i].hash <= shared[i-1].hash {
			t.Fatalf("the shared slice is out of hash order at %d", i)
		}
	}
	frozen := append([]compactID(nil), shared...)
	w.evict(base.Add(5_000 * time.Millisecond)) // would compact it in place
	add(7_000)                                  // merges at least once
	if !slices.Equal(shared, frozen) {
		t.Fatal("the window changed the slice it shared")
	}
	if w.len() != 10_000+7_000-2_499 {
		t.Fatalf("the window holds %d", w.len())
	}
	w.release()
	w.merge()
	if w.shared {
		t.Fatal("the window still counts its slice shared")
	}
	// Released, an eviction of nothing and a merge keep the slice.
	kept := w.sorted
	w.evict(base)
	if len(w.sorted) > 0 && &kept[0] != &w.sorted[0] {
		t.Fatal("an eviction of nothing moved the slice")
	}
}
