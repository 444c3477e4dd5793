package ceiling

import (
	"testing"
	"time"
)

// TestPhasesOf: each round is split with the last transaction with Issued
// records that began within it; a report of the effects after the last act
// counts as the last act; a round with no such transaction is left out.
func TestPhasesOf(t *testing.T) {
	at := func(ms float64) time.Time {
		return time.Unix(0, 0).Add(time.Duration(ms * float64(time.Millisecond)))
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	rounds := []roundMarks{
		{began: at(0), called: at(1), lastAct: at(20), back: at(21)},
		{began: at(21), called: at(22), lastAct: at(30), back: at(31)},
		{began: at(31), called: at(32), lastAct: at(40), back: at(41)}, // no transaction
	}
	writes := []issuedWrite{
		{began: at(2), committed: at(8), applied: at(9)},    // round 1, not its last
		{began: at(9), committed: at(15), applied: at(17)},  // round 1
		{began: at(24), committed: at(29), applied: at(35)}, // round 2, reported after its last act
	}
	got := phasesOf(rounds, writes)
	want := []RoundPhases{
		{Prepare: ms(1), ToWrite: ms(8), Write: ms(6), Effects: ms(2), Acts: ms(3), Back: ms(1)},
		{Prepare: ms(1), ToWrite: ms(2), Write: ms(5), Effects: ms(1), Acts: 0, Back: ms(1)},
	}
	if len(got) != len(want) {
		t.Fatalf("phasesOf = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("round %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
	if out := got[0].Outside(); out != ms(15) {
		t.Errorf("Outside of round 1 = %v, want 15ms: its 21ms less its transaction's 6ms", out)
	}
	if m := MedianPhases([]RoundPhases{got[0], got[1], got[1]}); m != got[1] {
		t.Errorf("MedianPhases = %+v, want the phases of round 2, which two of three rounds share", m)
	}
}
