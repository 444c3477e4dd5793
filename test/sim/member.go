package sim

import (
	"errors"
	"math"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// member is one dispatcher process of a role: its clock, its links, and its
// leadership loop, which follows coordination's campaign and renewal loop
// step by step (register, read, Evaluate, challenge, first lease at the
// term, renewals, resign) with the real pure code deciding every step.
type member struct {
	w    *world
	r    *role
	id   coordination.MemberID
	name string

	incarnation int
	down        bool
	paused      bool
	held        []*event // events that came due while paused

	skew       int64 // the wall clock's offset from true time, in ms
	cutKafka   bool  // partitioned from the brokers
	cutDevices bool  // partitioned from the devices

	registered     bool
	lastRegistered int64
	lead           *leadership

	// clearedOffset and clearedAt are the campaign's view of the lease
	// tombstone that cleared the role's lease (see staggerCleared), or -1.
	clearedOffset, clearedAt int64

	// actAt and foreignOpen are campaign.actAt and campaign.foreignOpen:
	// the instant the last decision named, and whether the last read
	// stopped at another producer's open transaction (see readState).
	actAt       int64
	foreignOpen bool
}

// wall is the member's wall clock, in milliseconds since the Unix epoch.
func (m *member) wall() int64 { return wallBase + m.w.now + m.skew }

// kcall sends one request to the brokers: op runs at the broker when the
// request arrives, and done runs in the member's process with the answer,
// or with errTimeout when no answer came within the request timeout. A
// partition drops the request or the answer.
func (m *member) kcall(label string, op func() error, done func(error)) {
	w := m.w
	answered := false
	finish := func(err error) {
		if !answered {
			answered = true
			done(err)
		}
	}
	w.schedule(w.between(1, w.cfg.NetLatency), m.name+": "+label+" reaches the broker", func() {
		if m.cutKafka {
			return
		}
		err := op()
		w.scheduleFor(m, w.between(1, w.cfg.NetLatency), m.name+": "+label+" answered", func() {
			if !m.cutKafka {
				finish(err)
			}
		})
	})
	w.scheduleFor(m, w.cfg.RequestTimeout, m.name+": "+label+" deadline", func() { finish(errTimeout) })
}

// start begins the process: a fresh incarnation campaigns for the role.
func (m *member) start() {
	m.registered = false
	m.lead = nil
	m.campaign()
}

// crash ends the process at once; nothing it scheduled runs any more.
func (m *member) crash() {
	if l := m.lead; l != nil {
		l.ended = true
		if l.d != nil {
			l.d.halted = true
		}
	}
	m.incarnation++
	m.down = true
	m.paused = false
	m.held = nil
	m.lead = nil
}

// restart starts a new incarnation under the same member ID.
func (m *member) restart() {
	m.down = false
	m.start()
}

// resume runs the events that came due during a pause, in their order.
func (m *member) resume() {
	m.paused = false
	held := m.held
	m.held = nil
	for _, e := range held {
		e.at = m.w.now
		m.w.push(e)
	}
}

// campaign is one AcquireLeadership call: register, then read and evaluate
// until the member may challenge.
func (m *member) campaign() {
	m.clearedOffset, m.actAt, m.foreignOpen = -1, 0, false
	m.register(func(err error) {
		if err != nil {
			m.retryCampaign()
			return
		}
		m.readState()
	})
}

// retryCampaign is the member runtime calling AcquireLeadership again after
// a failed one.
func (m *member) retryCampaign() {
	m.w.scheduleFor(m, m.w.cfg.Poll, m.name+": campaign again", m.campaign)
}

func (m *member) register(done func(error)) {
	now := m.wall()
	key := coordination.EncodeKey(coordination.RegistrationKey(m.r.role, m.id))
	value := coordination.EncodeRegistration(coordination.Registration{Member: m.id, RegisteredAt: now})
	k := m.w.kafka
	m.kcall("register", func() error {
		_, err := k.appendPlain(k.state, key, value)
		return err
	}, func(err error) {
		if err == nil {
			m.registered, m.lastRegistered = true, now
		}
		done(err)
	})
}

// readState reads the role's partition read_committed, as campaign.read
// and the transport's ReadPartition do: the read goes on until it has passed
// the high watermark taken when it began, waiting on an open transaction for
// at most a poll interval (a second at least), and no later than a poll
// interval past the instant the last decision named unless the last read
// stopped at another producer's transaction (campaign.openWait). When an open transaction still holds the
// last stable offset back, a transaction of another producer makes it read
// again; one of the role's own producer leaves a partial view to decide on.
//
// The instant that the decision judges the view at is taken before the
// read, as campaign.run takes it.
func (m *member) readState() {
	now := m.wall()
	wait := max(m.w.cfg.Poll, 1000)
	if !m.foreignOpen && m.actAt != 0 {
		wait = min(wait, max(m.actAt+m.w.cfg.Poll-now, 0))
	}
	m.readStateUntil(now, -1, m.w.now+wait)
}

func (m *member) readStateUntil(now, target, giveUp int64) {
	k := m.w.kafka
	var recs []*record
	var open []int64
	var hwm, lso int64
	m.kcall("read the role", func() (err error) {
		recs, open, hwm, err = k.read(k.state)
		lso = k.state.lso()
		return err
	}, func(err error) {
		m.foreignOpen = false
		if err != nil {
			m.retryCampaign()
			return
		}
		if target < 0 {
			target = hwm
		}
		if lso >= target {
			m.decide(now, recs, false)
			return
		}
		if m.w.now < giveUp {
			m.w.scheduleFor(m, 50, m.name+": the read waits for the last stable offset", func() { m.readStateUntil(now, target, giveUp) })
			return
		}
		var held coordination.FencingToken
		m.kcall("describe the epoch", func() (err error) {
			held, err = k.describe(m.r.name)
			return err
		}, func(err error) {
			if err == nil && containsPID(open, held.ProducerID()) {
				m.decide(now, recs, true)
				return
			}
			m.foreignOpen = true
			m.readState()
		})
	})
}

func stateRecords(recs []*record) []coordination.StateRecord {
	out := make([]coordination.StateRecord, 0, len(recs))
	for _, r := range recs {
		out = append(out, coordination.StateRecord{Offset: r.offset, Key: r.key, Value: r.value, Headers: r.headers})
	}
	return out
}

// decide folds the view with the real RoleStateBuilder and takes the step
// that the real Evaluate names at the instant now, taken before the read.
func (m *member) decide(now int64, recs []*record, partial bool) {
	w := m.w
	state, err := coordination.BuildRoleState(m.r.role, stateRecords(recs))
	if err != nil {
		w.note("%s: the role does not fold: %v", m.name, err)
		m.retryCampaign()
		return
	}
	if _, ok := state.Entry(m.id); partial && !ok && m.registered {
		state.Roster = append(state.Roster, coordination.RosterEntry{Member: m.id, Offset: math.MaxInt64, RegisteredAt: m.lastRegistered})
	}
	decision := m.staggerCleared(state, recs, now, coordination.Evaluate(state, m.id, now, w.cfg.Lease))
	if decision.Action == coordination.ActionHold {
		// Another incarnation's live lease: wait for its deadline.
		decision = coordination.Decision{Action: coordination.ActionWait, WaitUntil: state.Lease.Deadline}
	}
	w.note("%s: %s", m.name, decision.Action)
	m.actAt = 0
	if decision.Action == coordination.ActionWait {
		m.actAt = decision.WaitUntil
	}
	switch decision.Action {
	case coordination.ActionChallenge:
		m.challenge()
	case coordination.ActionNotRegistered:
		since := max(now-m.lastRegistered, 0)
		if since >= w.cfg.Poll {
			m.register(func(err error) {
				if err != nil {
					m.retryCampaign()
					return
				}
				m.readState()
			})
			return
		}
		w.scheduleFor(m, w.cfg.Poll-since, m.name+": read the role", m.readState)
	case coordination.ActionWait:
		// From the wall clock after the read, as campaign.run waits.
		wait := min(w.cfg.Poll, max(decision.WaitUntil-m.wall(), 0))
		w.scheduleFor(m, wait, m.name+": read the role", m.readState)
	}
}

// staggerCleared is campaign.staggerCleared: once a read shows the lease
// cleared by a tombstone, a standby of rank n challenges no sooner than n
// staggers after the first read that showed that tombstone.
func (m *member) staggerCleared(state coordination.RoleState, recs []*record, now int64, decision coordination.Decision) coordination.Decision {
	offset, tombstone := int64(-1), false
	for _, r := range recs {
		key, err := coordination.DecodeKey(r.key)
		if err != nil || key.Kind != coordination.KindLease || key.Role != m.r.role || r.offset < offset {
			continue
		}
		offset, tombstone = r.offset, coordination.IsTombstone(r.value)
	}
	if !tombstone {
		m.clearedOffset = -1
		return decision
	}
	if offset != m.clearedOffset {
		m.clearedOffset, m.clearedAt = offset, now
	}
	if decision.Action != coordination.ActionChallenge || state.Lease != nil {
		return decision
	}
	rank, ok := state.RankOf(m.id)
	if !ok || rank == 0 {
		return decision
	}
	if at := m.clearedAt + m.w.cfg.Lease.ChallengeDelay(rank).Milliseconds(); now < at {
		return coordination.Decision{Action: coordination.ActionWait, WaitUntil: at}
	}
	return decision
}

// challenge mints the epoch, outwaits the lease of the holder it fenced,
// and writes the first lease under the epoch. Its offset is the term.
func (m *member) challenge() {
	w, k := m.w, m.w.kafka
	var token coordination.FencingToken
	m.kcall("InitProducerId", func() (err error) {
		token, err = k.initProducerID(m.r.name)
		return err
	}, func(err error) {
		if errors.Is(err, errConcurrent) {
			// The client sends the InitProducerId again after a backoff,
			// inside the one AcquireEpoch call.
			w.scheduleFor(m, w.between(20, 100), m.name+": InitProducerId again", m.challenge)
			return
		}
		if err != nil {
			m.retryCampaign()
			return
		}
		m.outwait(w.now, func() { m.firstLease(token) })
	})
}

// outwait is campaign.outwait: after the fence, read the role to the high
// watermark; a live lease in that view is waited out to its deadline on the
// member's wall clock; a view the read cannot complete is read again every
// poll interval; every wait ends one lease duration after fenced, the
// instant AcquireEpoch returned, on the monotonic clock.
func (m *member) outwait(fenced int64, done func()) {
	w := m.w
	full := w.cfg.Lease.Duration().Milliseconds()
	if fenced+full <= w.now || w.cfg.bugNoOutwait {
		done()
		return
	}
	m.readWhole(func(recs []*record, whole bool) {
		left := fenced + full - w.now
		if whole {
			b := coordination.NewRoleStateBuilder(m.r.role)
			for _, r := range stateRecords(recs) {
				_ = b.Apply(r)
			}
			state := b.Build()
			now := m.wall()
			if state.Lease == nil || !w.cfg.Lease.Timing(*state.Lease).LiveAt(now) {
				done()
				return
			}
			wait := min(left, state.Lease.Deadline-now)
			w.note("%s: outwaits the fenced lease of %s for %d ms", m.name, state.Lease.Member, max(wait, 0))
			w.scheduleFor(m, wait, m.name+": the fenced lease is out", done)
			return
		}
		w.note("%s: the read after the fence is incomplete", m.name)
		w.scheduleFor(m, min(w.cfg.Poll, left), m.name+": read the role again after the fence", func() { m.outwait(fenced, done) })
	})
}

// readWhole reads the role's partition until the read passed the high
// watermark taken when it began, for at most a poll interval (a second at
// least), and reports whether it did. A failed read did not.
func (m *member) readWhole(done func(recs []*record, whole bool)) {
	giveUp := m.w.now + max(m.w.cfg.Poll, 1000)
	target := int64(-1)
	var step func()
	step = func() {
		k := m.w.kafka
		var recs []*record
		var hwm, lso int64
		m.kcall("read the role after the fence", func() (err error) {
			recs, _, hwm, err = k.read(k.state)
			lso = k.state.lso()
			return err
		}, func(err error) {
			if err != nil {
				done(nil, false)
				return
			}
			if target < 0 {
				target = hwm
			}
			if lso >= target {
				done(recs, true)
				return
			}
			if m.w.now < giveUp {
				m.w.scheduleFor(m, 50, m.name+": the read after the fence waits for the last stable offset", step)
				return
			}
			done(nil, false)
		})
	}
	step()
}

// firstLease writes the first lease under the minted token.
func (m *member) firstLease(token coordination.FencingToken) {
	w, k := m.w, m.w.kafka
	l := &leadership{m: m, token: token, term: coordination.NoTerm}
	start := w.now
	lease := w.cfg.Lease.Grant(m.id, token, m.wall())
	l.writing = true
	rec := &record{key: leaseKey(m.r), value: coordination.EncodeLease(lease), sentAt: start}
	l.guardedWrite([]*partition{k.state}, []*record{rec}, func(next coordination.FencingToken, err error) {
		l.release()
		if err != nil {
			if errors.Is(err, coordination.ErrFenced) {
				w.scheduleFor(m, w.cfg.Poll, m.name+": read the role after a lost challenge", m.readState)
				return
			}
			m.retryCampaign()
			return
		}
		l.term = coordination.Term(rec.offset)
		l.token, l.lease, l.fresh = next, lease, start
		m.lead = l
		w.note("%s leads %s at term %d token %s", m.name, m.r.name, rec.offset, next)
		m.r.terms = append(m.r.terms, termStart{term: l.term, member: m.name, at: w.now})
		l.scheduleRenewal()
		l.d = newDispatcher(l)
		l.d.recover()
	})
}

func leaseKey(r *role) []byte { return coordination.EncodeKey(coordination.LeaseKey(r.role)) }

// leadership is the live leadership of one member: the token it follows,
// its term, its lease, the freshness of that lease on the member's
// monotonic clock (true time here), and the write slot that serialises the
// role producer's transactions.
type leadership struct {
	m     *member
	term  coordination.Term
	token coordination.FencingToken
	lease coordination.Lease
	fresh int64 // true time just before the last committed grant or renewal was written
	ended bool

	writing bool
	waiting []func()
	renewal []func(error) // callers waiting for the renewal in flight
	d       *dispatcher
}

// validFor is Leadership.ValidFor on the monotonic clock.
func (l *leadership) validFor() int64 {
	if l.ended {
		return 0
	}
	elapsed := l.m.w.now - l.fresh
	d := l.m.w.cfg.Lease.Duration().Milliseconds()
	if elapsed < 0 || elapsed >= d {
		return 0
	}
	return d - elapsed
}

// acquire runs fn when the write slot is free; fn must release it.
func (l *leadership) acquire(fn func()) {
	if !l.writing {
		l.writing = true
		fn()
		return
	}
	l.waiting = append(l.waiting, fn)
}

func (l *leadership) release() {
	if len(l.waiting) == 0 {
		l.writing = false
		return
	}
	next := l.waiting[0]
	l.waiting = l.waiting[1:]
	next()
}

// end ends the leadership: the dispatcher halts, nothing more is written,
// and the member runtime campaigns again.
func (l *leadership) end(err error) {
	if l.ended {
		return
	}
	l.ended = true
	m := l.m
	m.w.note("%s: leadership ends: %v", m.name, err)
	if l.d != nil {
		l.d.halted = true
	}
	if m.lead == l {
		m.lead = nil
		m.retryCampaign()
	}
}

// endsLeadership is coordination's rule: a fence or an unknown outcome ends
// the leadership, anything else leaves it holding.
func endsLeadership(err error) bool {
	return errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrOutcomeUnknown)
}

// guardedWrite is one transaction of the role's producer: a Produce of the
// records and an EndTxn, under the leadership's token. done gets the token
// the coordinator holds after the commit. The caller holds the write slot.
func (l *leadership) guardedWrite(parts []*partition, recs []*record, done func(coordination.FencingToken, error)) {
	m, k := l.m, l.m.w.kafka
	token := l.token
	for _, r := range recs {
		if r.sentAt == 0 {
			r.sentAt = m.w.now
		}
	}
	m.kcall("produce", func() error { return k.produce(m.r.name, token, parts, recs) }, func(err error) {
		if errors.Is(err, errTimeout) {
			err = errors.Join(coordination.ErrOutcomeUnknown, err)
		}
		if err != nil {
			done(token, err)
			return
		}
		var next coordination.FencingToken
		m.kcall("EndTxn", func() (err error) {
			next, err = k.endTxn(m.r.name, token)
			return err
		}, func(err error) {
			if errors.Is(err, errTimeout) || errors.Is(err, errUnavailable) {
				err = errors.Join(coordination.ErrOutcomeUnknown, err)
			}
			if err != nil {
				done(token, err)
				return
			}
			done(next, nil)
		})
	})
}

func (l *leadership) scheduleRenewal() {
	m := l.m
	wait := max(l.m.w.cfg.Lease.Timing(l.lease).RenewAt()-m.wall(), 0)
	m.w.scheduleFor(m, wait, m.name+": renew timer", func() {
		if !l.ended {
			l.renew(nil)
		}
	})
}

// renew writes one renewal, or joins the one in flight. A renewal that
// fails without ending the leadership is retried within the poll interval.
func (l *leadership) renew(done func(error)) {
	if l.renewal != nil {
		if done != nil {
			l.renewal = append(l.renewal, done)
		}
		return
	}
	l.renewal = []func(error){}
	if done != nil {
		l.renewal = append(l.renewal, done)
	}
	m, w := l.m, l.m.w
	finish := func(err error) {
		waiters := l.renewal
		l.renewal = nil
		for _, f := range waiters {
			f(err)
		}
	}
	l.acquire(func() {
		if l.ended {
			l.release()
			finish(coordination.ErrNotHeld)
			return
		}
		start := w.now
		lease := w.cfg.Lease.Grant(m.id, l.token, m.wall())
		rec := &record{key: leaseKey(m.r), value: coordination.EncodeLease(lease), headers: []coordination.Header{coordination.TermHeaderOf(l.term)}, sentAt: start}
		l.guardedWrite([]*partition{w.kafka.state}, []*record{rec}, func(next coordination.FencingToken, err error) {
			l.release()
			if err != nil {
				if endsLeadership(err) {
					l.end(err)
				} else if !l.ended {
					w.scheduleFor(m, w.cfg.Poll, m.name+": renew again", func() {
						if !l.ended {
							l.renew(nil)
						}
					})
				}
				finish(err)
				return
			}
			if l.ended {
				finish(coordination.ErrNotHeld)
				return
			}
			l.token, l.lease, l.fresh = next, lease, start
			l.scheduleRenewal()
			finish(nil)
		})
	})
}

// resign is Leadership.Resign: the leadership ends first, then the lease
// and the registration are tombstoned in one guarded write while the lease
// has time left, or the registration alone is tombstoned by an append.
func (l *leadership) resign() {
	m, w := l.m, l.m.w
	remaining := l.validFor()
	l.ended = true
	if l.d != nil {
		l.d.halted = true
	}
	m.lead = nil
	w.note("%s resigns %s", m.name, m.r.name)
	regKey := coordination.EncodeKey(coordination.RegistrationKey(m.r.role, m.id))
	again := func() { w.scheduleFor(m, w.cfg.Poll, m.name+": campaign after resigning", m.campaign) }
	deregister := func() {
		m.kcall("deregister", func() error {
			_, err := w.kafka.appendPlain(w.kafka.state, regKey, nil)
			return err
		}, func(error) { again() })
	}
	if remaining <= 0 {
		deregister()
		return
	}
	headers := []coordination.Header{coordination.TermHeaderOf(l.term)}
	l.acquire(func() {
		l.guardedWrite([]*partition{w.kafka.state, w.kafka.state}, []*record{
			{key: leaseKey(m.r), headers: headers},
			{key: regKey, headers: headers},
		}, func(_ coordination.FencingToken, err error) {
			l.release()
			if err != nil {
				deregister()
				return
			}
			again()
		})
	})
}
