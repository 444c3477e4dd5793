package sim

import (
	"fmt"
	"os"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Config is the shape of every world of a run. Times are milliseconds.
type Config struct {
	Lease          coordination.LeaseConfig
	Margin         int64 // the dispatcher's safety margin
	Poll           int64 // the campaign's poll interval
	RequestTimeout int64 // a broker request's timeout
	NetLatency     int64 // the largest one-way delay to a broker
	DeviceLatency  int64 // the largest one-way delay to a device
	DeviceTimeout  int64 // how long a dispatcher waits for a device's answer
	MarkerLag      int64 // the largest delay of transaction markers, ten times that under the marker-lag fault
	TxnTimeout     int64 // transaction.timeout.ms, the lease duration as the real transport sets it
	IntakeEvery    int64 // the leader's intake poll
	Horizon        int64 // faults and submissions happen before it
	SettleCap      int64 // how long after the horizon the run may take to settle
	Members        int   // members of the first role
	SecondMembers  int   // members of the second role, when the seed enables it
	Commands       int   // commands submitted to each role

	// Dir holds the fencing devices' state files; a directory per seed is
	// made in it and removed.
	Dir string

	// KeepTrace keeps the last lines of the event trace in the result.
	KeepTrace int

	// The known bugs that the tests inject to show that the checks fail.
	bugSkipFreshness        bool
	bugDispatchBeforeCommit bool
	bugNoOutwait            bool // the challenger writes its first lease right after the fence
}

// DefaultConfig is the real dispatcher's timing: lease 30 s, renewal every
// 10 s, stagger 5 s, safety margin 2 s, poll 1 s.
func DefaultConfig() Config {
	return Config{
		Lease:          coordination.DefaultLeaseConfig(),
		Margin:         dispatch.DefaultSafetyMargin.Milliseconds(),
		Poll:           coordination.DefaultPollInterval.Milliseconds(),
		RequestTimeout: 2_000,
		NetLatency:     20,
		DeviceLatency:  20,
		DeviceTimeout:  5_000,
		MarkerLag:      300,
		TxnTimeout:     coordination.DefaultLeaseDuration.Milliseconds(),
		IntakeEvery:    200,
		Horizon:        180_000,
		SettleCap:      600_000,
		Members:        3,
		SecondMembers:  2,
		Commands:       30,
		Dir:            os.TempDir(),
	}
}

// Violation is one broken guarantee found in a seed.
type Violation struct {
	Class  string
	Detail string
}

// Result is what one seed did and what the checks found.
type Result struct {
	Seed       uint64
	Faults     faultSet
	Injected   map[string]int
	Events     int
	Hash       uint64
	Violations []Violation

	// Expected are findings that the seed's faults explain because they
	// break the protocol's stated assumptions (clock skew beyond the
	// margin); they are counted, not failed.
	Expected []Violation

	Accepted, Issued, Settled, Redispatched int
	InDoubt                                 int
	FencedCalls, FencedRefused, PlainCalls  int
	PlainDoubles, PlainDoublesRedispatched  int
	Terms, Rotations, LowerIDs              int
	SimMillis                               int64
	Trace                                   []string
}

// Run runs one seed.
func Run(seed uint64, cfg Config) (Result, error) {
	w := newWorld(seed, cfg)
	dir, err := os.MkdirTemp(cfg.Dir, "sim-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)

	w.enabled = w.chooseFaults()
	w.kafka = newKafka(w)
	if w.enabled.has(faultExhaustion) {
		w.kafka.firstEpoch = int16(maxEpoch - w.between(0, 20))
	}
	names := []string{"valve"}
	if w.enabled.has(faultSecondRole) {
		names = append(names, "pump")
	}
	for i, name := range names {
		n := cfg.Members
		if i > 0 {
			n = cfg.SecondMembers
		}
		r, err := newRole(w, name, n, dir)
		if err != nil {
			return Result{}, err
		}
		w.roles = append(w.roles, r)
		for _, m := range r.members {
			w.schedule(w.between(0, 2_000), "start "+m.name, m.start)
		}
		for range cfg.Commands {
			r.submit(w, w.between(1_000, cfg.Horizon))
		}
	}
	w.scheduleFaults()

	for w.step(cfg.Horizon) {
	}
	w.now = max(w.now, cfg.Horizon)
	w.heal()
	w.note("healed")
	end := cfg.Horizon + cfg.SettleCap
	for next := w.now + 5_000; next <= end; next += 5_000 {
		for w.step(next) {
		}
		w.now = next
		if w.quiet() {
			break
		}
	}
	if w.err != nil {
		return Result{}, w.err
	}
	res := w.check()
	res.Seed, res.Faults, res.Injected, res.Events, res.Hash = seed, w.enabled, w.faults, w.events, w.trace.Sum64()
	res.Rotations, res.LowerIDs, res.SimMillis = w.kafka.rotations, w.kafka.lowerIDs, w.now
	res.Trace = w.lines
	return res, nil
}

// quiet reports whether every accepted command is settled in the committed
// log, every transaction's markers landed, and no call is waiting.
func (w *world) quiet() bool {
	for _, p := range []*partition{w.kafka.log, w.kafka.state} {
		if p.lso() < int64(len(p.recs)) {
			return false
		}
	}
	for _, r := range w.roles {
		h := dispatch.Replay(decodeEntries(w.committed(w.kafka.log), r.name))
		for _, id := range r.accepted {
			c, ok := h.Command(r.name, id)
			if !ok || c.Status == dispatch.StatusPending {
				return false
			}
		}
	}
	return true
}

// committed is a partition as a read_committed reader sees it.
func (w *world) committed(p *partition) []*record {
	recs, _ := p.readCommitted()
	return recs
}

// issuedCommand returns the command of a committed Issued record.
func (w *world) issuedCommand(r *role, id string) (dispatch.Command, bool) {
	for _, e := range decodeEntries(w.committed(w.kafka.log), r.name) {
		if e.Kind == dispatch.EntryIssued && e.Issued.Command.ID == id {
			return e.Issued.Command, true
		}
	}
	return dispatch.Command{}, false
}

// decodeEntries decodes the records of one role with the real codec, as
// dispatch.DecodeRecord does for a fetched record: the term from the term
// header, the batch from the producer that wrote it. A record that does not
// decode stays as an entry of kind zero, for the checker to report.
func decodeEntries(recs []*record, roleName string) []dispatch.Entry {
	var out []dispatch.Entry
	for _, r := range recs {
		e, err := dispatch.DecodeEntry(r.key, r.value)
		if err != nil {
			out = append(out, dispatch.Entry{Offset: r.offset})
			continue
		}
		if e.Role != roleName {
			continue
		}
		if term, ok, err := coordination.TermFromHeaders(r.headers); err == nil && ok {
			e.Term = term
		}
		e.Offset = r.offset
		e.Batch = &dispatch.BatchInfo{ProducerID: r.pid, ProducerEpoch: r.epoch, Transactional: r.txn != nil}
		out = append(out, e)
	}
	return out
}

// fail records a fault of the simulator itself, such as a state file that
// cannot be written; the seed then reports an error.
func (w *world) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("sim: seed %d at %s: %s", w.seed, time.Duration(w.now)*time.Millisecond, fmt.Sprintf(format, args...))
	}
}
