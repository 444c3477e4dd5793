package chaos

import (
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestRunOwesEachRequiredFault checks that a run's first member faults are
// each required kind once, whatever the seed, so that a short run shows
// every kind its coverage check asks for.
func TestRunOwesEachRequiredFault(t *testing.T) {
	orders := map[string]bool{}
	for seed := range uint64(20) {
		r := &run{rng: mrand.New(mrand.NewPCG(seed, seed))}
		r.owed = owedFaults(r.rng)
		var first []string
		for range RequiredMemberFaults() {
			first = append(first, r.memberFault())
		}
		got, want := slices.Sorted(slices.Values(first)), slices.Sorted(slices.Values(RequiredMemberFaults()))
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: first member faults %v, want each of %v once", seed, first, want)
		}
		orders[strings.Join(first, ",")] = true
		for range 50 {
			if kind := r.memberFault(); kind == "" {
				t.Fatalf("seed %d: no fault kind drawn after the owed ones", seed)
			}
		}
	}
	if len(orders) < 2 {
		t.Errorf("20 seeds drew %d order(s) of the owed faults, want the seed to vary it", len(orders))
	}
}
