package chaos

import (
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

func token(t *testing.T, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	tok, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func issued(off int64, id string, term coordination.Term, tok coordination.FencingToken) dispatch.Entry {
	return dispatch.Entry{Offset: off, Kind: dispatch.EntryIssued, Role: "r", Term: term, Token: tok, Member: "m1", At: time.Unix(1, 0),
		Issued: &dispatch.Issued{Command: dispatch.Command{ID: id, Role: "r", Device: PlainDevice}}}
}

func outcome(off int64, id string, term coordination.Term, tok coordination.FencingToken, st dispatch.Status) dispatch.Entry {
	return dispatch.Entry{Offset: off, Kind: dispatch.EntryOutcome, Role: "r", Term: term, Token: tok, Member: "m1", At: time.Unix(1, 0),
		Outcome: &dispatch.Outcome{CommandID: id, Status: st, Attempt: dispatch.FirstAttempt}}
}

func classes(r Report) map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Class]++
	}
	return m
}

// TestCheckCleanRun checks a run in which the leadership of term 40 rotated
// to a lower producer id, and the next leadership, term 55, holds a lower
// token still: the fencing device obeyed all of it, and no check objects.
func TestCheckCleanRun(t *testing.T) {
	a, rotated, next := token(t, 7, 1), token(t, 3, 0), token(t, 2, 0)
	in := Input{
		Log: []dispatch.Entry{
			issued(0, "c1", 40, a), outcome(1, "c1", 40, a, dispatch.StatusSucceeded),
			issued(2, "c2", 40, rotated), outcome(3, "c2", 40, rotated, dispatch.StatusInDoubt),
			issued(4, "c3", 55, next), outcome(5, "c3", 55, next, dispatch.StatusSucceeded),
		},
		Fenced: []Call{
			{Device: FencedDevice, ID: "c1", Term: 40, Token: a.String(), Verdict: VerdictObeyed},
			{Device: FencedDevice, ID: "c3", Term: 55, Token: next.String(), Verdict: VerdictObeyed},
		},
		Plain:    []Call{{Device: PlainDevice, ID: "c2", Term: 40, Token: rotated.String(), Verdict: VerdictObeyed}},
		Accepted: []string{"c1", "c2", "c3"},
	}
	r := Check(in)
	if !r.OK() {
		t.Fatalf("clean run reported violations: %+v", r.Violations)
	}
	if r.Settled != 3 || r.Issued != 3 || r.Tokens != 3 {
		t.Fatalf("counts %+v", r)
	}
}

func TestCheckFindsEachViolation(t *testing.T) {
	a, b := token(t, 9, 4), token(t, 7, 2)
	in := Input{
		Log: []dispatch.Entry{
			issued(0, "c1", 55, b), outcome(1, "c1", 55, b, dispatch.StatusSucceeded),
			issued(2, "c2", 55, b),
			outcome(3, "c1", 40, a, dispatch.StatusFailed), // term regression and a second terminal outcome
		},
		Fenced: []Call{
			{Device: FencedDevice, ID: "c1", Term: 55, Token: b.String(), Verdict: VerdictObeyed},
			{Device: FencedDevice, ID: "c2", Term: 40, Token: a.String(), Verdict: VerdictObeyed}, // an earlier term with a higher token, and not under the logged term
			{Device: FencedDevice, ID: "c2", Term: 40, Token: a.String(), Verdict: VerdictRefused},
		},
		Plain: []Call{
			{Device: PlainDevice, ID: "c9", Term: 55, Token: b.String(), Verdict: VerdictObeyed}, // never logged
			{Device: PlainDevice, ID: "c1", Term: 55, Token: b.String(), Verdict: VerdictObeyed},
			{Device: PlainDevice, ID: "c1", Term: 55, Token: b.String(), Verdict: VerdictObeyed},
		},
		Accepted: []string{"c1", "c2", "c3"}, // c2 has no outcome, c3 no Issued record
	}
	r := Check(in)
	got := classes(r)
	want := map[string]int{UnloggedDispatch: 3, TermRegression: 1, LostCommand: 2}
	for class, n := range want {
		if got[class] != n {
			t.Errorf("%s: %d violations, want %d (all: %+v)", class, got[class], n, r.Violations)
		}
	}
	if got[AuditViolation] < 2 {
		t.Errorf("audit: %d violations, want the term regression and the second terminal outcome (all: %+v)", got[AuditViolation], r.Violations)
	}
	if r.PlainDoubles != 1 || r.PlainDoublesRedispatched != 0 {
		t.Errorf("plain doubles %d (%d redispatched), want 1 (0)", r.PlainDoubles, r.PlainDoublesRedispatched)
	}
	if r.FencedCalls != 3 || r.FencedRefused != 1 {
		t.Errorf("fenced calls %d, refused %d; want 3, 1", r.FencedCalls, r.FencedRefused)
	}
}

// TestCheckTermlessObeyIsARegression reports a fencing device that obeyed a
// call without a term: it cannot be ordered against any leadership.
func TestCheckTermlessObeyIsARegression(t *testing.T) {
	a := token(t, 7, 1)
	in := Input{
		Log:      []dispatch.Entry{issued(0, "c1", 40, a), outcome(1, "c1", 40, a, dispatch.StatusSucceeded)},
		Fenced:   []Call{{Device: FencedDevice, ID: "c1", Term: 0, Token: a.String(), Verdict: VerdictObeyed}},
		Accepted: []string{"c1"},
	}
	got := classes(Check(in))
	if got[TermRegression] != 1 {
		t.Fatalf("term-regression violations %d, want 1 (%+v)", got[TermRegression], got)
	}
}
