package dispatch

import (
	"errors"
	"math/rand/v2"
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
	loaded := newIDWindow()
	if err := loaded.load(ids, time.Time{}); err != nil {
		t.Fatal(err)
	}
	w = loaded
	check("after load")
	if err := newIDWindow().load(append(ids, ids[0]), time.Time{}); !errors.Is(err, errHashTwice) {
		t.Fatalf("a load with a hash twice: %v", err)
	}
}
