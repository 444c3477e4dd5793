package dispatch

import (
	"slices"
	"testing"
)

// TestVerifyFromStartsMidLog checks a range of a log that starts after the
// Issued record of a command: Verify reports its outcome as not issued,
// VerifyFrom does not, and both still report an outcome before an Issued
// record inside the range and a second terminal outcome.
func TestVerifyFromStartsMidLog(t *testing.T) {
	tok := mustToken(t, 7, 1)
	at := func(offset int64, e Entry) Entry {
		e.Offset, e.Role, e.Member, e.Token = offset, "role", "node-1", tok
		return e
	}
	entries := []Entry{
		at(10, Entry{Kind: EntryRedispatched, Redispatched: &Redispatched{CommandID: "before", Attempt: 2, Reason: RedispatchTakeover}}),
		at(11, outcomeEntry("before", StatusSucceeded, 2)),
		at(12, outcomeEntry("early", StatusSucceeded, FirstAttempt)),
		at(13, issuedEntry("early")),
		at(14, issuedEntry("inside")),
		at(15, outcomeEntry("inside", StatusSucceeded, FirstAttempt)),
		at(16, outcomeEntry("inside", StatusFailed, FirstAttempt)),
	}
	kinds := func(vs []Violation) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.CommandID+":"+string(v.Kind))
		}
		return out
	}
	full := kinds(Verify(entries))
	if !slices.Contains(full, "before:"+string(ViolationNotIssued)) {
		t.Fatalf("Verify: %v; want the command issued before the range reported", full)
	}
	got := kinds(VerifyFrom(entries))
	want := []string{"early:" + string(ViolationNotIssued), "early:" + string(ViolationAfterTerminal), "inside:" + string(ViolationSecondTerminal)}
	if !slices.Equal(got, want) {
		t.Errorf("VerifyFrom: %v, want %v", got, want)
	}
}
