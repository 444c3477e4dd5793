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

func issued(off int64, id string, tok coordination.FencingToken) dispatch.Entry {
	return dispatch.Entry{Offset: off, Kind: dispatch.EntryIssued, Role: "r", Token: tok, Member: "m1", At: time.Unix(1, 0),
		Issued: &dispatch.Issued{Command: dispatch.Command{ID: id, Role: "r", Device: PlainDevice}}}
}

func outcome(off int64, id string, tok coordination.FencingToken, st dispatch.Status) dispatch.Entry {
	return dispatch.Entry{Offset: off, Kind: dispatch.EntryOutcome, Role: "r", Token: tok, Member: "m1", At: time.Unix(1, 0),
		Outcome: &dispatch.Outcome{CommandID: id, Status: st, Attempt: dispatch.FirstAttempt}}
}

func classes(r Report) map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Class]++
	}
	return m
}

func TestCheckCleanRun(t *testing.T) {
	a, b := token(t, 7, 1), token(t, 7, 2)
	in := Input{
		Log: []dispatch.Entry{
			issued(0, "c1", a), outcome(1, "c1", a, dispatch.StatusSucceeded),
			issued(2, "c2", b), outcome(3, "c2", b, dispatch.StatusInDoubt),
		},
		Fenced:   []Call{{Device: FencedDevice, ID: "c1", Token: a.String(), Verdict: VerdictObeyed}},
		Plain:    []Call{{Device: PlainDevice, ID: "c2", Token: b.String(), Verdict: VerdictObeyed}},
		Accepted: []string{"c1", "c2"},
	}
	r := Check(in)
	if !r.OK() {
		t.Fatalf("clean run reported violations: %+v", r.Violations)
	}
	if r.Settled != 2 || r.Issued != 2 || r.Tokens != 2 {
		t.Fatalf("counts %+v", r)
	}
}

func TestCheckFindsEachViolation(t *testing.T) {
	a, b := token(t, 7, 1), token(t, 7, 2)
	in := Input{
		Log: []dispatch.Entry{
			issued(0, "c1", b), outcome(1, "c1", b, dispatch.StatusSucceeded),
			issued(2, "c2", b),
			outcome(3, "c1", a, dispatch.StatusFailed), // token regression and a second terminal outcome
		},
		Fenced: []Call{
			{Device: FencedDevice, ID: "c1", Token: b.String(), Verdict: VerdictObeyed},
			{Device: FencedDevice, ID: "c2", Token: a.String(), Verdict: VerdictObeyed}, // regression, and not under the logged token
		},
		Plain: []Call{
			{Device: PlainDevice, ID: "c9", Token: b.String(), Verdict: VerdictObeyed}, // never logged
			{Device: PlainDevice, ID: "c1", Token: b.String(), Verdict: VerdictObeyed},
			{Device: PlainDevice, ID: "c1", Token: b.String(), Verdict: VerdictObeyed},
		},
		Accepted: []string{"c1", "c2", "c3"}, // c2 has no outcome, c3 no Issued record
	}
	r := Check(in)
	got := classes(r)
	want := map[string]int{UnloggedDispatch: 2, TokenRegression: 1, LostCommand: 2}
	for class, n := range want {
		if got[class] != n {
			t.Errorf("%s: %d violations, want %d (all: %+v)", class, got[class], n, r.Violations)
		}
	}
	if got[AuditViolation] < 2 {
		t.Errorf("audit: %d violations, want the token regression and the second terminal outcome (all: %+v)", got[AuditViolation], r.Violations)
	}
	if r.PlainDoubles != 1 || r.PlainDoublesRedispatched != 0 {
		t.Errorf("plain doubles %d (%d redispatched), want 1 (0)", r.PlainDoubles, r.PlainDoublesRedispatched)
	}
}
