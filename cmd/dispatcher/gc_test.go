package main

import (
	"context"
	"runtime/debug"
	"testing"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		base int
		want int
	}{
		{0, 100, 100},
		{8 << 20, 100, 100},  // a small heap keeps the operator's percentage
		{16 << 20, 100, 100}, // its slack is gcSlack already
		{32 << 20, 100, 50},
		{64 << 20, 100, 25},
		{1 << 30, 100, minGCPercent}, // never below the floor
		{32 << 20, 40, 40},           // never above the base
	} {
		if got := gcPercentFor(c.live, c.base); got != c.want {
			t.Errorf("gcPercentFor(%d MiB, %d) = %d, want %d", c.live>>20, c.base, got, c.want)
		}
	}
}

// TestTuneGCRestores checks that tuneGC sets the percentage the process
// had back when it ends, and leaves a percentage at the floor alone.
func TestTuneGCRestores(t *testing.T) {
	old := debug.SetGCPercent(80)
	defer debug.SetGCPercent(old)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tuneGC(ctx)
	if p := debug.SetGCPercent(20); p != 80 {
		t.Fatalf("after tuneGC the percentage is %d, want 80", p)
	}
	tuneGC(ctx)
	if p := debug.SetGCPercent(old); p != 20 {
		t.Fatalf("tuneGC changed a percentage at the floor to %d", p)
	}
}
