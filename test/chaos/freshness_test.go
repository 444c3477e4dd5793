package chaos

import (
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// freshRun is a run of one command c1 under term 40 by m1, whose lease
// records were granted at t0 and t0+1s, for 4 s each; the margin is 1.5 s,
// so m1's freshness ends at t0+3.5s (on its clock).
func freshRun(t *testing.T, t0 time.Time, calls ...Call) Input {
	tok := token(t, 7, 1)
	for i := range calls {
		calls[i].Device, calls[i].Token, calls[i].Term, calls[i].Verdict = PlainDevice, tok.String(), 40, VerdictObeyed
		if calls[i].ID == "" {
			calls[i].ID = "c1"
		}
	}
	log := []dispatch.Entry{issued(0, "c1", 40, tok)}
	attempt := dispatch.FirstAttempt
	for i := 1; i < len(calls); i++ {
		attempt++
		log = append(log, dispatch.Entry{Offset: int64(i), Kind: dispatch.EntryRedispatched, Role: "r", Term: 40, Token: tok, Member: "m1",
			At: time.Unix(1, 0), Redispatched: &dispatch.Redispatched{CommandID: "c1", Attempt: attempt, Reason: dispatch.RedispatchTakeover}})
	}
	done := outcome(int64(len(log)), "c1", 40, tok, dispatch.StatusSucceeded)
	done.Outcome.Attempt = attempt
	log = append(log, done)
	return Input{
		Log:      log,
		Plain:    calls,
		Accepted: []string{"c1"},
		Leases: []LeaseRecord{
			{Role: "r", Member: "m1", GrantedAt: t0, Deadline: t0.Add(4 * time.Second)},
			{Role: "r", Member: "m1", GrantedAt: t0.Add(time.Second), Deadline: t0.Add(5 * time.Second)},
			{Role: "r", Member: "m2", GrantedAt: t0.Add(6 * time.Second), Deadline: t0.Add(10 * time.Second)},
		},
		Margin:  1500 * time.Millisecond,
		Transit: 100 * time.Millisecond,
	}
}

func TestFreshnessAcceptsCallsWithinTheLeaseLessTheMargin(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	in := freshRun(t, t0,
		Call{Member: "m1", Role: "r", At: t0.Add(500 * time.Millisecond).UnixNano()},
		// Fresh under the second record: its deadline less the margin plus transit.
		Call{Member: "m1", Role: "r", At: t0.Add(3600 * time.Millisecond).UnixNano()})
	r := Check(in)
	if !r.OK() || r.FreshnessChecked != 2 || r.Leases != 3 {
		t.Fatalf("fresh calls: %+v, %d checked, %d leases; want no violation, 2, 3", r.Violations, r.FreshnessChecked, r.Leases)
	}
}

func TestFreshnessReportsACallAfterTheFreshnessEnded(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	r := Check(freshRun(t, t0, Call{Member: "m1", Role: "r", At: t0.Add(3700 * time.Millisecond).UnixNano()}))
	if got := classes(r)[StaleDispatch]; got != 1 {
		t.Fatalf("a call 100 ms past freshness and transit: %d stale dispatches, want 1 (%+v)", got, r.Violations)
	}
	// A lease record granted after the call does not make it fresh.
	r = Check(freshRun(t, t0, Call{Member: "m1", Role: "r", At: t0.Add(-time.Second).UnixNano()}))
	if got := classes(r)[StaleDispatch]; got != 1 {
		t.Fatalf("a call before any lease: %d stale dispatches, want 1 (%+v)", got, r.Violations)
	}
	// Nor does a lease of another member, or of another role.
	r = Check(freshRun(t, t0, Call{Member: "m3", Role: "r", At: t0.Add(2 * time.Second).UnixNano()}, Call{Member: "m1", Role: "other", At: t0.Add(2 * time.Second).UnixNano()}))
	if got := classes(r)[StaleDispatch]; got != 2 {
		t.Fatalf("calls under another member's or role's lease: %d stale dispatches, want 2 (%+v)", got, r.Violations)
	}
}

func TestFreshnessAllowsTheAssumedSkewAndStalls(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	late := Call{Member: "m1", Role: "r", At: t0.Add(4 * time.Second).UnixNano()}
	in := freshRun(t, t0, late)
	in.Skew = time.Second
	if r := Check(in); !r.OK() {
		t.Fatalf("a call within the skew assumption: %+v", r.Violations)
	}
	in = freshRun(t, t0, late)
	in.Stalls = []Window{{Member: "m1", From: t0.Add(2 * time.Second), To: t0.Add(3950 * time.Millisecond)}}
	if r := Check(in); !r.OK() || r.LateDeliveries != 1 || r.FreshnessChecked != 0 {
		t.Fatalf("a call just after m1's stall: %+v, %d late, %d checked; want none, 1, 0", r.Violations, r.LateDeliveries, r.FreshnessChecked)
	}
	in = freshRun(t, t0, late)
	in.Offsets = map[string]time.Duration{"m1": -3 * time.Second}
	if r := Check(in); !r.OK() || r.StaleBeyondSkew != 1 {
		t.Fatalf("a call by a member skewed beyond the assumption: %+v, %d beyond skew; want none, 1", r.Violations, r.StaleBeyondSkew)
	}
	// A member restarted with its clock skewed beyond the assumption: the
	// span of its new incarnation decides, and one that began after the
	// call does not.
	in = freshRun(t, t0, late)
	in.Clocks = []ClockSpan{{Member: "m1", From: t0.Add(-time.Minute), Offset: 3 * time.Second}}
	if r := Check(in); !r.OK() || r.StaleBeyondSkew != 1 {
		t.Fatalf("a call by an incarnation skewed beyond the assumption: %+v, %d beyond skew; want none, 1", r.Violations, r.StaleBeyondSkew)
	}
	in.Clocks = append(in.Clocks, ClockSpan{Member: "m1", From: t0.Add(-time.Second), Offset: 0})
	if r := Check(in); r.OK() {
		t.Fatal("a stale call by an incarnation whose clock was right passed as skewed")
	}
	in.Clocks = []ClockSpan{{Member: "m1", From: t0.Add(time.Hour), Offset: 3 * time.Second}}
	if r := Check(in); r.OK() {
		t.Fatal("a span that began after the call decided its offset")
	}
	// The check is off without a margin, as for a run that has no leases.
	in = freshRun(t, t0, late)
	in.Margin = 0
	if r := Check(in); !r.OK() || r.FreshnessChecked != 0 {
		t.Fatalf("without a margin: %+v, %d checked", r.Violations, r.FreshnessChecked)
	}
}

func TestDoubleDispatchNeedsARedispatchedRecordEachTime(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	call := Call{Member: "m1", Role: "r", At: t0.Add(time.Second).UnixNano()}
	in := freshRun(t, t0, call, call) // one Redispatched record: two calls allowed
	if r := Check(in); !r.OK() {
		t.Fatalf("a redispatched command received twice: %+v", r.Violations)
	}
	in.Plain = append(in.Plain, in.Plain[0]) // a third call, one record
	if got := classes(Check(in))[UnexplainedDouble]; got != 1 {
		t.Fatalf("three calls, one Redispatched record: %d double dispatches, want 1", got)
	}
	tok := token(t, 7, 1)
	in = Input{
		Log:    []dispatch.Entry{issued(0, "c1", 40, tok), outcome(1, "c1", 40, tok, dispatch.StatusSucceeded)},
		Plain:  []Call{{Device: PlainDevice, ID: "c1", Term: 40, Token: tok.String(), Verdict: VerdictObeyed}},
		Fenced: []Call{{Device: FencedDevice, ID: "c1", Term: 40, Token: tok.String(), Verdict: VerdictRefused}},
	}
	if got := classes(Check(in))[UnexplainedDouble]; got != 1 {
		t.Fatalf("a command received twice, once refused, no Redispatched record: %d double dispatches, want 1", got)
	}
}

func TestTermOrderIsKeptAtEachFencingDevice(t *testing.T) {
	a, b := token(t, 7, 1), token(t, 9, 0)
	log := []dispatch.Entry{issued(0, "c1", 55, b), issued(1, "c2", 40, a)}
	log[1].Role, log[1].Issued.Command.Role = "s", "s"
	in := Input{Log: log, Fenced: []Call{
		{Device: FencedDevice, Role: "r", ID: "c1", Term: 55, Token: b.String(), Verdict: VerdictObeyed},
		// Another role's device has terms of its own.
		{Device: FencedDevice, Role: "s", ID: "c2", Term: 40, Token: a.String(), Verdict: VerdictObeyed},
	}}
	if got := classes(Check(in))[TermRegression]; got != 0 {
		t.Fatalf("two devices with terms of their own: %d regressions, want 0", got)
	}
	in.Fenced[1].Role = "r"
	if got := classes(Check(in))[TermRegression]; got != 1 {
		t.Fatalf("term 40 admitted after term 55 at one device: %d regressions, want 1", got)
	}
}
