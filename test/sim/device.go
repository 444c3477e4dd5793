package sim

import (
	"errors"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/test/chaos"
)

// callFacts is what the world knows of one device call beyond what the
// device records: when the member sent it, under which attempt.
type callFacts struct {
	role     string
	member   string
	id       string
	term     coordination.Term
	token    coordination.FencingToken
	attempt  int
	sent     int64 // true time the member made the call
	received int64 // true time the device received it
	obeyed   bool
}

// device is one device of a role. The fencing one keeps its highest term
// with the real devices/fence Store, in a state file of the run; the plain
// one obeys every call. Both record every call, as the chaos harness's
// devices do.
type device struct {
	name      string
	safe      bool // declares a redispatch safe (it deduplicates by command ID)
	store     *fence.Store
	calls     []chaos.Call
	facts     []callFacts
	slowUntil int64
}

// receive records one call and reports whether the device acted on it.
func (d *device) receive(w *world, f callFacts) bool {
	f.received = w.now
	call := chaos.Call{Device: d.name, ID: f.id, Term: int64(f.term), Token: f.token.String(), Member: f.member,
		At: (wallBase + w.now) * 1_000_000, Verdict: chaos.VerdictObeyed}
	if d.store != nil {
		err := d.store.Admit(d.name, coordination.Authority{Term: f.term, Token: f.token})
		switch {
		case errors.Is(err, fence.ErrStaleTerm), errors.Is(err, fence.ErrNoTerm):
			call.Verdict = chaos.VerdictRefused
		case err != nil:
			w.fail("device %s: %v", d.name, err)
			call.Verdict = chaos.VerdictRefused
		}
	}
	f.obeyed = call.Verdict == chaos.VerdictObeyed
	d.calls = append(d.calls, call)
	d.facts = append(d.facts, f)
	w.note("%s %s %s under term %d token %s from %s", d.name, call.Verdict, f.id, f.term, f.token, f.member)
	return f.obeyed
}

// duration is how long the device takes to act: up to 2 s while slow.
func (d *device) duration(w *world) int64 {
	if w.now < d.slowUntil {
		return w.between(200, 2000)
	}
	return w.between(0, 200)
}
