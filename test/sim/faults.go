package sim

import (
	"strings"

	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/chaos"
)

// The fault classes a seed may enable.
const (
	faultCrash      = "crash"       // a member crashes and restarts under the same member ID
	faultPause      = "pause"       // a member stops (GC, SIGSTOP) and resumes
	faultCutKafka   = "cut-kafka"   // a member loses the brokers but keeps its devices
	faultCutDevices = "cut-devices" // a member loses its devices but keeps the brokers
	faultOutage     = "outage"      // the coordinator and partition leaders go away; the coordinator moves
	faultSkew       = "skew"        // a member's clock steps, within the safety margin
	faultSkewBeyond = "skew-beyond" // a member's clock steps beyond the safety margin
	faultSlowDevice = "slow-device" // a device takes up to 2 s per call
	faultExhaustion = "exhaustion"  // the role's producer starts near epoch exhaustion
	faultResign     = "resign"      // the leader resigns
	faultResolve    = "resolve"     // an operator resolves an in-doubt command
	faultMarkerLag  = "marker-lag"  // transaction markers land late
	faultSecondRole = "second-role" // a second role shares the partitions
)

// faultClasses lists every class, in the order reports show them.
var faultClasses = []string{faultCrash, faultPause, faultCutKafka, faultCutDevices, faultOutage, faultSkew,
	faultSkewBeyond, faultSlowDevice, faultExhaustion, faultResign, faultResolve, faultMarkerLag, faultSecondRole}

// faultSet is the set of fault classes a seed enabled.
type faultSet map[string]bool

func (s faultSet) has(class string) bool { return s[class] }

func (s faultSet) String() string {
	var on []string
	for _, c := range faultClasses {
		if s[c] {
			on = append(on, c)
		}
	}
	return strings.Join(on, ",")
}

// chooseFaults enables each class with probability one half; skew beyond
// the margin is rarer, so most seeds test the protocol inside its
// assumptions.
func (w *world) chooseFaults() faultSet {
	s := faultSet{}
	for _, c := range faultClasses {
		p := 0.5
		if c == faultSkewBeyond {
			p = 0.15
		}
		if w.chance(p) {
			s[c] = true
		}
	}
	return s
}

// scheduleFaults injects faults of the enabled classes at random instants
// until the horizon.
func (w *world) scheduleFaults() {
	var classes []string
	for _, c := range faultClasses {
		switch c {
		case faultExhaustion, faultMarkerLag, faultSecondRole:
			continue // set up at the start or applied where they act
		}
		if w.enabled.has(c) {
			classes = append(classes, c)
		}
	}
	if len(classes) == 0 {
		return
	}
	var next func()
	next = func() {
		if w.now >= w.cfg.Horizon {
			return
		}
		w.inject(classes[w.rng.IntN(len(classes))])
		w.schedule(w.between(2_000, 20_000), "fault schedule", next)
	}
	w.schedule(w.between(2_000, 20_000), "fault schedule", next)
}

func (w *world) anyMember(ok func(*member) bool) *member {
	var pool []*member
	for _, r := range w.roles {
		for _, m := range r.members {
			if ok(m) {
				pool = append(pool, m)
			}
		}
	}
	if len(pool) == 0 {
		return nil
	}
	return pool[w.rng.IntN(len(pool))]
}

func up(m *member) bool { return !m.down }

// inject applies one fault now and schedules its end.
func (w *world) inject(class string) {
	leaderFirst := func() *member {
		if w.chance(0.6) {
			if m := w.anyMember(func(m *member) bool { return up(m) && m.lead != nil }); m != nil {
				return m
			}
		}
		return w.anyMember(up)
	}
	switch class {
	case faultCrash:
		m := leaderFirst()
		if m == nil {
			return
		}
		w.note("fault: crash %s", m.name)
		m.crash()
		w.schedule(w.between(1_000, 40_000), "fault: restart "+m.name, m.restart)
	case faultPause:
		m := w.anyMember(func(m *member) bool { return up(m) && !m.paused })
		if m == nil {
			return
		}
		m.paused = true
		d := w.between(500, 45_000)
		w.note("fault: pause %s for %d ms", m.name, d)
		inc := m.incarnation
		w.schedule(d, "fault: resume "+m.name, func() {
			if m.incarnation == inc && m.paused {
				m.resume()
			}
		})
	case faultCutKafka:
		m := leaderFirst()
		if m == nil || m.cutKafka {
			return
		}
		m.cutKafka = true
		w.note("fault: cut %s from the brokers", m.name)
		w.schedule(w.between(1_000, 40_000), "fault: heal "+m.name+" to the brokers", func() { m.cutKafka = false })
	case faultCutDevices:
		m := leaderFirst()
		if m == nil || m.cutDevices {
			return
		}
		m.cutDevices = true
		w.note("fault: cut %s from the devices", m.name)
		w.schedule(w.between(1_000, 20_000), "fault: heal "+m.name+" to the devices", func() { m.cutDevices = false })
	case faultOutage:
		d := w.between(1_000, 20_000)
		w.note("fault: brokers away for %d ms", d)
		w.kafka.outage(d)
	case faultSkew, faultSkewBeyond:
		m := w.anyMember(func(*member) bool { return true })
		bound := w.cfg.Margin * 2 / 5
		if class == faultSkewBeyond {
			bound = 4 * w.cfg.Margin
		}
		m.skew = w.between(-bound, bound)
		w.note("fault: %s clock skew %d ms", m.name, m.skew)
	case faultSlowDevice:
		r := w.roles[w.rng.IntN(len(w.roles))]
		for _, name := range []string{chaos.FencedDevice, chaos.PlainDevice} {
			if d := r.devices[name]; w.chance(0.5) {
				d.slowUntil = w.now + w.between(5_000, 30_000)
			}
		}
	case faultResign:
		m := w.anyMember(func(m *member) bool { return up(m) && !m.paused && m.lead != nil })
		if m == nil {
			return
		}
		m.lead.resign()
	case faultResolve:
		if !w.resolveOne() {
			return
		}
	}
	w.faults[class]++
}

// resolveOne has an operator resolve one in-doubt command at its role's
// leader, by a redispatch or a cancel.
func (w *world) resolveOne() bool {
	for _, r := range w.roles {
		for _, m := range r.members {
			if m.lead == nil || m.lead.d == nil || m.down || m.paused {
				continue
			}
			d := m.lead.d
			for _, id := range r.accepted {
				if d.status[id] != dispatch.StatusInDoubt {
					continue
				}
				cmd, ok := w.issuedCommand(r, id)
				if ok && d.resolve(cmd, w.chance(0.5)) {
					w.note("operator resolves %s at %s", id, m.name)
					return true
				}
			}
		}
	}
	return false
}

// heal ends every fault: paused members resume, crashed ones restart, the
// links and the brokers come back.
func (w *world) heal() {
	w.kafka.downUntil = min(w.kafka.downUntil, w.now)
	for _, r := range w.roles {
		for _, m := range r.members {
			m.cutKafka, m.cutDevices = false, false
			if m.paused {
				m.resume()
			}
			if m.down {
				m.restart()
			}
		}
	}
}
