package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// The classes of a Violation.
const (
	// UnloggedDispatch: a device received a command with no committed
	// Issued or Redispatched record under the term and token it saw.
	UnloggedDispatch = "dispatch-not-in-log"
	// TermRegression: the fencing device obeyed a term lower than one it
	// obeyed before. Tokens may fall within a term, when the producer id
	// rotates; terms may not.
	TermRegression = "term-regression"
	// LostCommand: an accepted command has no Issued record, or no terminal
	// or in-doubt outcome.
	LostCommand = "lost-command"
	// AuditViolation: the log breaks one of its own invariants.
	AuditViolation = "audit"
	// StaleDispatch: a device received a call after the freshness of the
	// caller's leadership had ended, as its lease records and the safety
	// margin put that end (see Input.Leases), or from a member that held no
	// lease of the role before the call.
	StaleDispatch = "dispatch-after-freshness"
	// UnexplainedDouble: the devices received a command more times than
	// one plus the number of its Redispatched records.
	UnexplainedDouble = "double-dispatch-without-redispatch"
)

// Violation is one broken guarantee.
type Violation struct {
	// Class is one of the class constants.
	Class string `json:"class"`

	// Detail says what broke, naming the command, token, member and offset.
	Detail string `json:"detail"`
}

// Input is what a chaos run leaves behind for the checker.
type Input struct {
	// Log is the role's partition of the command log, in offset order.
	Log []dispatch.Entry

	// Fenced and Plain are the calls each device received, in arrival order.
	Fenced, Plain []Call

	// Accepted are the IDs of the commands whose submission the requests
	// topic acknowledged.
	Accepted []string

	// Leases are the committed lease records of the state topic for the
	// roles of the run, in offset order. With Margin above zero, the
	// freshness check runs on them: a leadership's freshness, on its
	// holder's clock, never outlasts the largest Deadline of its lease
	// records minus the safety margin.
	Leases []LeaseRecord

	// Margin is the dispatchers' safety margin; zero turns the freshness
	// check off.
	Margin time.Duration

	// Skew is the assumed bound on the offset between any member's clock
	// and the devices' clock. A lease record's instants are the holder's:
	// the check counts a record as written before a call when its
	// GrantedAt is no later than the call's arrival plus Skew, and ends
	// the freshness at its Deadline minus Margin plus Skew.
	Skew time.Duration

	// Transit bounds the delay between the start of a device call and its
	// arrival at the device, outside a stall of the caller.
	Transit time.Duration

	// Offsets are the clock offsets the run gave its members. A freshness
	// breach by a member whose offset exceeds Skew is counted in
	// Report.StaleBeyondSkew, not reported as a violation: the assumption
	// the check rests on did not hold for it.
	Offsets map[string]time.Duration

	// Clocks are the offsets that members' incarnations ran with, from
	// the instant each started; they take the place of Offsets from then
	// on. A member restarted with a new offset leaves a span each time.
	Clocks []ClockSpan

	// Stalls are the intervals during which a member was cut from its
	// devices or paused. A call from that member that arrives during a
	// stall, or within Transit after it, may have started long before it
	// arrived, when the leadership was still fresh: the device cannot tell.
	// The freshness check counts it in Report.LateDeliveries instead.
	Stalls []Window
}

// LeaseRecord is one committed lease record of a role.
type LeaseRecord struct {
	Role      string    `json:"role"`
	Member    string    `json:"member"`
	Token     string    `json:"token"`
	GrantedAt time.Time `json:"granted_at"`
	Deadline  time.Time `json:"deadline"`
	Offset    int64     `json:"offset"`
}

// Window is an interval of time during which a member was cut off.
type Window struct {
	Member string    `json:"member"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
}

// Report is the checker's verdict on one run.
type Report struct {
	// Violations lists every broken guarantee; empty means the run passed.
	Violations []Violation `json:"violations"`

	// Accepted, Issued and Settled count the accepted commands, the Issued
	// records, and the accepted commands with a terminal or in-doubt outcome.
	Accepted int `json:"accepted"`
	Issued   int `json:"issued"`
	Settled  int `json:"settled"`

	// Outcomes counts the latest outcome of every issued command by status.
	Outcomes map[string]int `json:"outcomes"`

	// Tokens is the number of distinct tokens in the log, and Redispatched
	// the number of Redispatched records.
	Tokens       int `json:"tokens"`
	Redispatched int `json:"redispatched"`

	// FencedCalls, FencedRefused and PlainCalls count the device calls; a
	// refusal is the fencing device turning away a deposed leader.
	FencedCalls   int `json:"fenced_calls"`
	FencedRefused int `json:"fenced_refused"`
	PlainCalls    int `json:"plain_calls"`

	// PlainDoubles counts the commands the non-fencing device obeyed more
	// than once; PlainDoublesRedispatched of them had a Redispatched record
	// (a takeover or an operator chose to send it again), the rest were
	// dispatched twice under records of different leaders with no
	// redispatch: the zombie window. FencedDoubles is the same count at the
	// fencing device.
	PlainDoubles             int `json:"plain_doubles"`
	PlainDoublesRedispatched int `json:"plain_doubles_redispatched"`
	FencedDoubles            int `json:"fenced_doubles"`

	// FreshnessChecked counts the device calls the freshness check judged;
	// LateDeliveries the ones it left out because they arrived during or
	// just after a stall of the caller (Input.Stalls); StaleBeyondSkew the
	// breaches by members whose clock offset exceeded the skew assumption.
	FreshnessChecked int `json:"freshness_checked"`
	LateDeliveries   int `json:"late_deliveries"`
	StaleBeyondSkew  int `json:"stale_beyond_skew"`

	// Leases counts the lease records the freshness check read.
	Leases int `json:"leases"`
}

// OK reports whether the run kept every guarantee.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Check proves the guarantees of a chaos run from its records.
func Check(in Input) Report {
	r := Report{Accepted: len(in.Accepted), Outcomes: map[string]int{}}
	add := func(class, format string, args ...any) {
		r.Violations = append(r.Violations, Violation{Class: class, Detail: fmt.Sprintf(format, args...)})
	}

	// Index the log: the terms and tokens each command was issued or
	// redispatched under, and its outcomes.
	dispatchable := map[string]map[string]bool{} // id -> authority -> committed
	issued := map[string]bool{}
	redispatched := map[string]bool{}
	redispatches := map[string]int{}
	latest := map[string]dispatch.Status{}
	tokens := map[string]bool{}
	for _, e := range in.Log {
		tokens[e.Token.String()] = true
		id := e.CommandID()
		switch e.Kind {
		case dispatch.EntryIssued, dispatch.EntryRedispatched:
			if dispatchable[id] == nil {
				dispatchable[id] = map[string]bool{}
			}
			dispatchable[id][coordination.Authority{Term: e.Term, Token: e.Token}.String()] = true
			if e.Kind == dispatch.EntryIssued {
				issued[id] = true
				r.Issued++
			} else {
				redispatched[id] = true
				redispatches[id]++
				r.Redispatched++
			}
		case dispatch.EntryOutcome:
			latest[id] = e.Outcome.Status
		}
	}
	r.Tokens = len(tokens)
	for id := range issued {
		st, ok := latest[id]
		name := "pending"
		if ok {
			name = st.String()
		}
		r.Outcomes[name]++
	}
	for _, f := range audit(in.Log) {
		add(AuditViolation, "%s", f)
	}
	for _, v := range dispatch.Verify(in.Log) {
		add(AuditViolation, "%s", v)
	}

	// No dispatch of a command absent from the log.
	for _, calls := range [][]Call{in.Fenced, in.Plain} {
		for _, c := range calls {
			if !dispatchable[c.ID][c.authority()] {
				add(UnloggedDispatch, "device %s received %s from %s under %s (%s); the log holds no Issued or Redispatched record of it under that term and token (log has it under: %s)",
					c.Device, c.ID, c.Member, c.authority(), c.Verdict, strings.Join(keys(dispatchable[c.ID]), ", "))
			}
		}
	}

	// No term regression at any fencing device: terms are compared within
	// one device of one role.
	highest := map[string]Call{}
	for _, c := range in.Fenced {
		r.FencedCalls++
		if c.Verdict != VerdictObeyed {
			r.FencedRefused++
			continue
		}
		if c.Term <= int64(coordination.NoTerm) {
			add(TermRegression, "fencing device obeyed %s from %s under no term (token %s)", c.ID, c.Member, c.Token)
			continue
		}
		key := c.Role + "/" + c.Device
		if h, seen := highest[key]; seen && coordination.Term(c.Term).Compare(coordination.Term(h.Term)) < 0 {
			add(TermRegression, "fencing device %s obeyed %s under %s from %s after %s under %s from %s",
				key, c.ID, c.authority(), c.Member, h.ID, h.authority(), h.Member)
			continue
		}
		highest[key] = c
	}
	r.PlainCalls = len(in.Plain)

	// No accepted command lost.
	for _, id := range in.Accepted {
		if !issued[id] {
			add(LostCommand, "accepted command %s has no Issued record", id)
			continue
		}
		st, ok := latest[id]
		if !ok {
			add(LostCommand, "accepted command %s has no outcome", id)
			continue
		}
		if !st.Terminal() && st != dispatch.StatusInDoubt {
			add(LostCommand, "accepted command %s ends %s, neither terminal nor in doubt", id, st)
			continue
		}
		r.Settled++
	}

	// No command dispatched twice without a Redispatched record: each
	// Redispatched record allows one more call, whatever the device did
	// with it.
	received := map[string]int{}
	for _, calls := range [][]Call{in.Fenced, in.Plain} {
		for _, c := range calls {
			received[c.ID]++
		}
	}
	for _, id := range sortedKeys(received) {
		if n := received[id]; n > 1+redispatches[id] {
			add(UnexplainedDouble, "the devices received %s %d times; the log holds %d Redispatched records of it", id, n, redispatches[id])
		}
	}

	// No call after the caller's freshness ended.
	if in.Margin > 0 {
		r.Leases = len(in.Leases)
		checkFreshness(in, &r, add)
	}

	// Double dispatches.
	r.FencedDoubles, _ = doubles(in.Fenced, redispatched)
	r.PlainDoubles, r.PlainDoublesRedispatched = doubles(in.Plain, redispatched)
	return r
}

// doubles counts the commands a device obeyed more than once, and of those
// the ones with a Redispatched record.
func doubles(calls []Call, redispatched map[string]bool) (total, explained int) {
	obeyed := map[string]int{}
	for _, c := range calls {
		if c.Verdict == VerdictObeyed {
			obeyed[c.ID]++
		}
	}
	for id, n := range obeyed {
		if n > 1 {
			total++
			if redispatched[id] {
				explained++
			}
		}
	}
	return total, explained
}

// audit checks what dispatch.Verify takes for granted: every record of the
// log decodes, and every record was written in a transaction.
func audit(log []dispatch.Entry) []string {
	var out []string
	for _, e := range log {
		if e.Kind == 0 {
			out = append(out, fmt.Sprintf("offset %d: the record does not decode", e.Offset))
			continue
		}
		if b := e.Batch; b != nil && !b.Transactional {
			out = append(out, fmt.Sprintf("offset %d: written outside a transaction", e.Offset))
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ClockSpan is the clock offset of a member's incarnation, from the
// instant it started until the member's next span.
type ClockSpan struct {
	Member string        `json:"member"`
	From   time.Time     `json:"from"`
	Offset time.Duration `json:"offset"`
}
