package sim

import (
	"strconv"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// requestsTopic is the topic the submitters write to; its partition for a
// role is modelled as partition 0.
const requestsTopic = "dispatch.requests"

// item is one record queued for the next transaction of the leader, and
// what happens once it commits.
type item struct {
	entry     dispatch.Entry
	committed func(token coordination.FencingToken)
}

// job is one device call to make, under the token of the record that
// authorised it.
type job struct {
	cmd     dispatch.Command
	attempt int
	token   coordination.FencingToken
}

// dispatcher is the dispatch side of one leadership, modelled on
// dispatch.Dispatcher: recovery from the log, intake from the requests
// partition, group commit under the token, durable-before-dispatch, one call
// at a time per device after a freshness check, outcomes under the token.
type dispatcher struct {
	l *leadership
	m *member
	w *world
	r *role

	halted     bool
	ready      bool // recovery read the log and queued the takeover records
	reading    bool // an intake read is in flight
	committing bool

	known   map[string]bool
	status  map[string]dispatch.Status // the committed status of each command
	attempt map[string]int
	intake  int64

	queue []*item
	jobs  map[string][]*job
	busy  map[string]bool
}

func newDispatcher(l *leadership) *dispatcher {
	return &dispatcher{
		l: l, m: l.m, w: l.m.w, r: l.m.r,
		known:   map[string]bool{},
		status:  map[string]dispatch.Status{},
		attempt: map[string]int{},
		jobs:    map[string][]*job{},
		busy:    map[string]bool{},
	}
}

// recover reads the role's log until it has passed the high watermark of
// its first read, rebuilds the pending set with dispatch.Replay, and queues
// the takeover records: expired, redispatched when the device declares a
// redispatch safe, in doubt otherwise.
func (d *dispatcher) recover() { d.recoverTo(-1) }

func (d *dispatcher) recoverTo(target int64) {
	k := d.w.kafka
	var recs []*record
	var hwm, lso int64
	d.m.kcall("read the log", func() (err error) {
		recs, _, hwm, err = k.read(k.log)
		lso = k.log.lso()
		return err
	}, func(err error) {
		if d.halted {
			return
		}
		if target < 0 && err == nil {
			target = hwm
		}
		if err != nil || lso < target {
			d.w.scheduleFor(d.m, 100, d.m.name+": read the log again", func() { d.recoverTo(target) })
			return
		}
		d.takeOver(decodeEntries(recs, d.r.name))
	})
}

func (d *dispatcher) takeOver(entries []dispatch.Entry) {
	h := dispatch.Replay(entries)
	for _, c := range h.Commands {
		if c.Role != d.r.name {
			continue
		}
		d.known[c.ID] = true
		d.status[c.ID] = c.Status
		if n := len(c.Attempts); n > 0 {
			d.attempt[c.ID] = c.Attempts[n-1].Number
		}
	}
	for _, e := range h.Intake {
		if e.Role == d.r.name && e.Intake.Topic == requestsTopic {
			d.intake = e.Intake.NextOffset
		}
	}
	now := time.UnixMilli(d.m.wall())
	for _, c := range h.Pending() {
		if c.Role != d.r.name || c.Issued == nil {
			continue
		}
		cmd := c.Command()
		attempt := d.attempt[c.ID]
		switch {
		case !now.Before(cmd.Deadline):
			d.outcome(cmd.ID, attempt, dispatch.StatusExpired, "the deadline passed while the command had no outcome, at a change of leader")
		case d.r.devices[cmd.Device].safe:
			d.redispatch(cmd, dispatch.RedispatchTakeover)
		default:
			d.outcome(cmd.ID, attempt, dispatch.StatusInDoubt, "issued by an earlier leader with no outcome; the device may have acted")
		}
	}
	d.ready = true
	d.w.note("%s: recovered %d records, intake at %d", d.m.name, len(entries), d.intake)
	d.flush()
	d.intakeTick()
}

func (d *dispatcher) redispatch(cmd dispatch.Command, reason dispatch.RedispatchReason) {
	attempt := max(d.attempt[cmd.ID], dispatch.FirstAttempt) + 1
	d.attempt[cmd.ID] = attempt
	d.status[cmd.ID] = dispatch.StatusPending
	d.enqueue(dispatch.Entry{Kind: dispatch.EntryRedispatched, Redispatched: &dispatch.Redispatched{
		CommandID: cmd.ID, Attempt: attempt, Reason: reason,
	}}, func(token coordination.FencingToken) { d.enqueueJob(&job{cmd: cmd, attempt: attempt, token: token}) })
}

func (d *dispatcher) outcome(id string, attempt int, status dispatch.Status, reason string) {
	d.enqueue(dispatch.Entry{Kind: dispatch.EntryOutcome, Outcome: &dispatch.Outcome{
		CommandID: id, Status: status, Attempt: attempt, Reason: reason,
	}}, func(coordination.FencingToken) { d.status[id] = status })
}

func (d *dispatcher) enqueue(e dispatch.Entry, committed func(coordination.FencingToken)) {
	d.queue = append(d.queue, &item{entry: e, committed: committed})
}

// intakeTick reads the requests partition from the intake position and
// queues the Issued records of the new commands with the intake record that
// covers them, for one transaction.
func (d *dispatcher) intakeTick() {
	if d.halted {
		return
	}
	d.w.scheduleFor(d.m, d.w.cfg.IntakeEvery, d.m.name+": intake tick", d.intakeTick)
	if d.reading {
		return
	}
	d.reading = true
	k := d.w.kafka
	var recs []*record
	d.m.kcall("read requests", func() (err error) {
		recs, _, _, err = k.read(d.r.requests)
		return err
	}, func(err error) {
		d.reading = false
		if err != nil || d.halted {
			return
		}
		from := d.intake
		next := from
		for _, rec := range recs {
			if rec.offset < from {
				continue
			}
			next = rec.offset + 1
			cmd := *rec.request
			if d.known[cmd.ID] {
				continue
			}
			d.known[cmd.ID] = true
			d.attempt[cmd.ID] = dispatch.FirstAttempt
			d.status[cmd.ID] = dispatch.StatusPending
			d.enqueue(dispatch.Entry{Kind: dispatch.EntryIssued, Issued: &dispatch.Issued{Command: cmd}}, func(token coordination.FencingToken) {
				if !d.w.cfg.bugDispatchBeforeCommit {
					d.enqueueJob(&job{cmd: cmd, attempt: dispatch.FirstAttempt, token: token})
				}
			})
		}
		if next == from {
			return
		}
		d.intake = next
		d.enqueue(dispatch.Entry{Kind: dispatch.EntryIntake, Intake: &dispatch.IntakePosition{
			Topic: requestsTopic, FromOffset: from, NextOffset: next,
		}}, nil)
		d.flush()
	})
}

// flush commits everything queued in one transaction of the role's
// producer, under the token the leadership holds when the write begins.
func (d *dispatcher) flush() {
	if d.halted || d.committing || len(d.queue) == 0 {
		return
	}
	d.committing = true
	l, w := d.l, d.w
	l.acquire(func() {
		if d.halted || l.ended {
			d.committing = false
			l.release()
			return
		}
		items := d.queue
		d.queue = nil
		token := l.token
		headers := []coordination.Header{coordination.TermHeaderOf(l.term)}
		parts := make([]*partition, 0, len(items))
		recs := make([]*record, 0, len(items))
		for _, it := range items {
			e := it.entry
			e.Role, e.Member, e.Token = d.r.name, d.m.name, token
			e.At = time.UnixMilli(d.m.wall())
			if e.Kind == dispatch.EntryIssued {
				e.Issued.Command.Role = d.r.name
			}
			key, value, err := dispatch.EncodeEntry(e)
			if err != nil {
				w.fail("%s: encode %s entry: %v", d.m.name, e.Kind, err)
				continue
			}
			parts = append(parts, w.kafka.log)
			recs = append(recs, &record{key: key, value: value, headers: headers})
			if w.cfg.bugDispatchBeforeCommit && e.Kind == dispatch.EntryIssued {
				d.enqueueJob(&job{cmd: e.Issued.Command, attempt: dispatch.FirstAttempt, token: token})
			}
		}
		l.guardedWrite(parts, recs, func(next coordination.FencingToken, err error) {
			l.release()
			d.committing = false
			if err != nil {
				if endsLeadership(err) {
					l.end(err)
					return
				}
				if !d.halted {
					d.queue = append(items, d.queue...)
					w.scheduleFor(d.m, 200, d.m.name+": commit again", d.flush)
				}
				return
			}
			if !l.ended {
				l.token = next
			}
			for _, it := range items {
				if it.committed != nil && !d.halted {
					it.committed(token)
				}
			}
			d.flush()
		})
	})
}

func (d *dispatcher) enqueueJob(j *job) {
	dev := j.cmd.Device
	d.jobs[dev] = append(d.jobs[dev], j)
	d.pump(dev)
}

// pump starts the next call of a device, one at a time per device.
func (d *dispatcher) pump(dev string) {
	if d.halted || d.busy[dev] || len(d.jobs[dev]) == 0 {
		return
	}
	d.busy[dev] = true
	d.run(dev)
}

// done closes the head job of a device and starts the next.
func (d *dispatcher) done(dev string) {
	d.jobs[dev] = d.jobs[dev][1:]
	d.busy[dev] = false
	d.flush()
	d.pump(dev)
}

// run makes the head call of a device: never past the deadline, only while
// the lease is fresh (forcing a renewal when it is not), and recorded as in
// doubt when the device may have acted and no answer can be trusted.
func (d *dispatcher) run(dev string) {
	if d.halted {
		return
	}
	w, l, m := d.w, d.l, d.m
	j := d.jobs[dev][0]
	if !time.UnixMilli(m.wall()).Before(j.cmd.Deadline) {
		d.outcome(j.cmd.ID, j.attempt, dispatch.StatusExpired, "the deadline passed before the dispatch")
		d.done(dev)
		return
	}
	margin := w.cfg.Margin
	if !w.cfg.bugSkipFreshness && l.validFor() <= margin {
		l.renew(func(err error) {
			pause := int64(0)
			if err != nil || l.validFor() <= margin {
				pause = 200
			}
			w.scheduleFor(m, pause, m.name+": freshness wait over", func() { d.run(dev) })
		})
		return
	}
	device := d.r.devices[dev]
	facts := callFacts{role: d.r.name, member: m.name, id: j.cmd.ID, term: l.term, token: j.token, sent: w.now, attempt: j.attempt}
	w.note("%s calls %s for %s under term %d", m.name, dev, j.cmd.ID, l.term)
	answered := false
	answer := func(status dispatch.Status, reason string) {
		if answered || d.halted {
			answered = true
			return
		}
		answered = true
		if status != dispatch.StatusSucceeded && status != dispatch.StatusRejected {
			d.outcome(j.cmd.ID, j.attempt, status, reason)
			d.done(dev)
			return
		}
		if l.validFor() <= margin {
			// The freshness ran out during the call: its context ended, and
			// the device may have acted.
			d.outcome(j.cmd.ID, j.attempt, dispatch.StatusInDoubt, dispatch.ErrFreshnessExpired.Error())
			d.done(dev)
			return
		}
		d.outcome(j.cmd.ID, j.attempt, status, reason)
		d.done(dev)
	}
	if m.cutDevices {
		// The connection is refused: the device certainly did not act, so
		// the call is retried.
		w.scheduleFor(m, 100, m.name+": "+dev+" unreachable", func() {
			answered = true
			w.scheduleFor(m, 200, m.name+": retry "+dev, func() { d.run(dev) })
		})
		return
	}
	w.schedule(w.between(1, w.cfg.DeviceLatency), dev+" receives "+j.cmd.ID+" from "+m.name, func() {
		if m.cutDevices {
			return
		}
		obeyed := device.receive(w, facts)
		took := device.duration(w)
		w.scheduleFor(m, took+w.between(1, w.cfg.DeviceLatency), m.name+": "+dev+" answers "+j.cmd.ID, func() {
			if m.cutDevices {
				return
			}
			if obeyed {
				answer(dispatch.StatusSucceeded, "")
			} else {
				answer(dispatch.StatusRejected, "the device refused a term below the highest it has seen")
			}
		})
	})
	w.scheduleFor(m, w.cfg.DeviceTimeout, m.name+": "+dev+" call deadline", func() {
		answer(dispatch.StatusInDoubt, "no answer from the device within "+strconv.FormatInt(w.cfg.DeviceTimeout, 10)+" ms")
	})
}

// resolve is an operator's resolve of an in-doubt command at the leader:
// dispatch it again, or cancel it.
func (d *dispatcher) resolve(cmd dispatch.Command, again bool) bool {
	if d.halted || !d.ready || d.status[cmd.ID] != dispatch.StatusInDoubt {
		return false
	}
	if again {
		d.redispatch(cmd, dispatch.RedispatchOperator)
	} else {
		d.status[cmd.ID] = dispatch.StatusPending
		d.outcome(cmd.ID, d.attempt[cmd.ID], dispatch.StatusCancelled, "cancelled by an operator")
	}
	d.flush()
	return true
}
