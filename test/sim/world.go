package sim

import (
	"container/heap"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
)

// wallBase is the wall-clock instant, in milliseconds since the Unix epoch,
// at which every world starts. True time is kept as milliseconds since then.
const wallBase int64 = 1_800_000_000_000

// event is one step of the world. Events run one at a time, in the order of
// (at, seq): seq breaks ties in the order they were scheduled, so the order
// is a function of the seed alone.
type event struct {
	at    int64
	seq   uint64
	label string

	// owner is the member whose process runs the event, nil for the network,
	// the brokers, the devices and the fault schedule. An owned event is
	// dropped when its incarnation has crashed since it was scheduled, and
	// held back while the member is paused.
	owner       *member
	incarnation int
	fn          func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// world is one seeded run: the event queue, the PRNG that chooses every
// delay, fault and interleaving, and everything the run builds.
type world struct {
	seed uint64
	cfg  Config
	rng  *rand.Rand

	now   int64 // true time, milliseconds since wallBase
	seq   uint64
	queue eventQueue

	events int
	trace  hash.Hash64
	lines  []string // the last lines of the trace, when kept
	keep   int

	kafka   *kafka
	roles   []*role
	enabled faultSet       // the fault classes the seed chose
	faults  map[string]int // the faults injected, by class
	err     error          // a fault of the simulator itself
}

// schedule runs fn after the delay, on behalf of the world.
func (w *world) schedule(after int64, label string, fn func()) {
	w.push(&event{at: w.now + max(after, 0), label: label, fn: fn})
}

// scheduleFor runs fn after the delay in the process of member m.
func (w *world) scheduleFor(m *member, after int64, label string, fn func()) {
	w.push(&event{at: w.now + max(after, 0), label: label, owner: m, incarnation: m.incarnation, fn: fn})
}

func (w *world) push(e *event) {
	w.seq++
	e.seq = w.seq
	heap.Push(&w.queue, e)
}

// step runs the next event, and reports false when the queue is empty or the
// next event lies past the limit.
func (w *world) step(limit int64) bool {
	if len(w.queue) == 0 || w.queue[0].at > limit {
		return false
	}
	e := heap.Pop(&w.queue).(*event)
	w.now = e.at
	if m := e.owner; m != nil {
		if m.incarnation != e.incarnation || m.down {
			return true
		}
		if m.paused {
			m.held = append(m.held, e)
			return true
		}
	}
	w.events++
	w.record(e.label)
	e.fn()
	return true
}

// record adds one line to the trace hash, and to the kept tail.
func (w *world) record(label string) {
	line := strconv.FormatInt(w.now, 10) + " " + label
	_, _ = w.trace.Write([]byte(line))
	_, _ = w.trace.Write([]byte{'\n'})
	if w.keep > 0 {
		w.lines = append(w.lines, line)
		if len(w.lines) > 2*w.keep {
			w.lines = append(w.lines[:0], w.lines[len(w.lines)-w.keep:]...)
		}
	}
}

// note adds a line to the trace for a decision taken inside an event.
func (w *world) note(format string, args ...any) {
	w.record("  " + fmt.Sprintf(format, args...))
}

// between returns a delay drawn uniformly from [lo, hi].
func (w *world) between(lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + w.rng.Int64N(hi-lo+1)
}

// chance reports true with probability p.
func (w *world) chance(p float64) bool { return w.rng.Float64() < p }

func newWorld(seed uint64, cfg Config) *world {
	return &world{
		seed:   seed,
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		trace:  fnv.New64a(),
		faults: map[string]int{},
		keep:   cfg.KeepTrace,
	}
}
