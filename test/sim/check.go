package sim

import (
	"bytes"
	"fmt"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/chaos"
)

// The classes of the simulator's own checks, beside chaos.Check's.
const (
	// FreshnessOverrun: a device call started at or after the end of the
	// caller's freshness: its newest lease record committed before the call,
	// written at true time g, gives freshness until g + lease - margin.
	FreshnessOverrun = "freshness-overrun"

	// DispatchBeforeCommit: a device call started before the commit of the
	// Issued or Redispatched record that authorised it.
	DispatchBeforeCommit = "dispatch-before-commit"

	// ZombieDispatch: a device acted on a call of term T after the first
	// lease of a later term of the role had committed: two leaderships drove
	// devices at once.
	ZombieDispatch = "zombie-dispatch"
)

// check runs chaos.Check on each role's log and devices, and the
// simulator's own checks that need the world's true time.
func (w *world) check() Result {
	var res Result
	logRecs := w.committed(w.kafka.log)
	stateRecs := w.committed(w.kafka.state)
	for _, r := range w.roles {
		entries := decodeEntries(logRecs, r.name)
		rep := chaos.Check(chaos.Input{
			Log:      entries,
			Fenced:   r.devices[chaos.FencedDevice].calls,
			Plain:    r.devices[chaos.PlainDevice].calls,
			Accepted: r.accepted,
		})
		for _, v := range rep.Violations {
			res.Violations = append(res.Violations, Violation{Class: v.Class, Detail: r.name + ": " + v.Detail})
		}
		res.Accepted += rep.Accepted
		res.Issued += rep.Issued
		res.Settled += rep.Settled
		res.Redispatched += rep.Redispatched
		res.InDoubt += rep.Outcomes[dispatch.StatusInDoubt.String()]
		res.FencedCalls += rep.FencedCalls
		res.FencedRefused += rep.FencedRefused
		res.PlainCalls += rep.PlainCalls
		res.PlainDoubles += rep.PlainDoubles
		res.PlainDoublesRedispatched += rep.PlainDoublesRedispatched
		res.Terms += len(r.terms)
		for _, v := range w.checkTimes(r, logRecs, stateRecs) {
			if v.Class == ZombieDispatch && w.enabled.has(faultSkewBeyond) {
				res.Expected = append(res.Expected, v)
				continue
			}
			res.Violations = append(res.Violations, v)
		}
	}
	return res
}

// leaseWrite is one committed lease record of a role.
type leaseWrite struct {
	term      coordination.Term
	first     bool  // the first lease of its term
	sent      int64 // true time the holder began writing it
	committed int64 // true time the coordinator committed it
}

// checkTimes checks every device call of a role against the true times of
// the records that authorised it.
func (w *world) checkTimes(r *role, logRecs, stateRecs []*record) []Violation {
	var out []Violation
	add := func(class, format string, args ...any) {
		out = append(out, Violation{Class: class, Detail: r.name + ": " + fmt.Sprintf(format, args...)})
	}
	key := leaseKey(r)
	var leases []leaseWrite
	for _, rec := range stateRecs {
		if rec.txn == nil || !bytes.Equal(rec.key, key) || len(rec.value) == 0 {
			continue
		}
		lw := leaseWrite{term: coordination.Term(rec.offset), first: true, sent: rec.sentAt, committed: rec.txn.decided}
		if t, ok, err := coordination.TermFromHeaders(rec.headers); err == nil && ok {
			lw.term, lw.first = t, false
		}
		leases = append(leases, lw)
	}
	type authKey struct {
		id    string
		term  coordination.Term
		token coordination.FencingToken
	}
	commits := map[authKey]int64{}
	for _, rec := range logRecs {
		e, err := dispatch.DecodeEntry(rec.key, rec.value)
		if err != nil || e.Role != r.name || (e.Kind != dispatch.EntryIssued && e.Kind != dispatch.EntryRedispatched) {
			continue
		}
		term, _, _ := coordination.TermFromHeaders(rec.headers)
		commits[authKey{e.CommandID(), term, e.Token}] = rec.txn.decided
	}
	margin := w.cfg.Margin
	duration := w.cfg.Lease.Duration().Milliseconds()
	for _, dev := range []string{chaos.FencedDevice, chaos.PlainDevice} {
		for _, f := range r.devices[dev].facts {
			// Freshness: the newest lease of the caller's term committed
			// before the call.
			var newest *leaseWrite
			for i := range leases {
				if leases[i].term == f.term && leases[i].committed <= f.sent {
					newest = &leases[i]
				}
			}
			switch {
			case newest == nil:
				add(FreshnessOverrun, "%s called %s for %s under term %d at %d ms with no committed lease of that term", f.member, dev, f.id, f.term, f.sent)
			case f.sent >= newest.sent+duration-margin:
				add(FreshnessOverrun, "%s called %s for %s under term %d at %d ms; its freshness ended at %d ms (lease written at %d ms)",
					f.member, dev, f.id, f.term, f.sent, newest.sent+duration-margin, newest.sent)
			}
			if at, ok := commits[authKey{f.id, f.term, f.token}]; ok && f.sent < at {
				add(DispatchBeforeCommit, "%s called %s for %s under term %d token %s at %d ms; the record committed at %d ms",
					f.member, dev, f.id, f.term, f.token, f.sent, at)
			}
			if !f.obeyed {
				continue
			}
			for _, lw := range leases {
				if lw.first && lw.term > f.term && lw.committed <= f.received {
					add(ZombieDispatch, "%s obeyed %s from %s under term %d at %d ms; term %d had begun at %d ms",
						dev, f.id, f.member, f.term, f.received, lw.term, lw.committed)
					break
				}
			}
		}
	}
	return out
}
