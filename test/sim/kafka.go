package sim

import (
	"errors"
	"math"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// The errors the modelled brokers answer with.
var (
	// errUnavailable: the coordinator or the partition leader is away; the
	// request certainly did nothing.
	errUnavailable = errors.New("sim: coordinator not available")

	// errTimeout: no answer came within the request timeout; the request
	// may or may not have taken effect.
	errTimeout = errors.New("sim: request timed out")

	// errConcurrent: CONCURRENT_TRANSACTIONS, the coordinator's answer to an
	// InitProducerId while the transactional id's last transaction is still
	// being completed; the client sends it again.
	errConcurrent = errors.New("sim: concurrent transactions")
)

// maxEpoch is the epoch at which the coordinator rotates to a new producer
// id, as Kafka's does at Short.MAX_VALUE - 1.
const maxEpoch = math.MaxInt16 - 1

// txn is one transaction of a role's producer.
type txn struct {
	pid     int64
	epoch   int16
	started int64
	recs    []*record
	ended   bool // EndTxn or an abort decided it
	commit  bool // the decision was a commit
	marked  bool // its markers landed; readers see the decision
	decided int64
}

// record is one record of a partition.
type record struct {
	offset  int64
	key     []byte
	value   []byte
	headers []coordination.Header
	pid     int64
	epoch   int16
	txn     *txn // nil for a non-transactional append

	// sentAt is the true time at which the writer built the record, and
	// request the command a request record carries: facts of the world
	// that the checks read, not bytes on the wire.
	sentAt  int64
	request *dispatch.Command
}

// partition is one partition of a topic.
type partition struct {
	name string
	recs []*record
}

// lso is the last stable offset: the first offset of a transaction whose
// markers have not landed, or the high watermark.
func (p *partition) lso() int64 {
	for _, r := range p.recs {
		if r.txn != nil && !r.txn.marked {
			return r.offset
		}
	}
	return int64(len(p.recs))
}

// readCommitted returns what a read_committed reader sees: the committed
// records below the last stable offset. open lists the producer ids of the
// transactions that hold the last stable offset back.
func (p *partition) readCommitted() (recs []*record, open []int64) {
	lso := p.lso()
	for _, r := range p.recs {
		if r.offset >= lso {
			if r.txn != nil && !r.txn.marked && !containsPID(open, r.pid) {
				open = append(open, r.pid)
			}
			continue
		}
		if r.txn == nil || r.txn.commit {
			recs = append(recs, r)
		}
	}
	return recs, open
}

func containsPID(pids []int64, pid int64) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// producer is the transaction coordinator's state for one transactional id:
// one per role.
type producer struct {
	pid   int64
	epoch int16
	txn   *txn // the newest transaction, ended or not
}

// kafka is the in-memory cluster: three brokers that each mint producer ids
// from a block of their own, one transaction coordinator for every role,
// and the partitions of the run. It models transactions v2 (KIP-890).
type kafka struct {
	w         *world
	state     *partition // the roles' partition of the coordination topic
	log       *partition // the roles' partition of the command log
	requests  map[string]*partition
	producers map[string]*producer

	blocks      []int64 // the next producer id of each broker's block
	coordinator int     // the broker that coordinates the roles' transactional ids
	downUntil   int64   // the coordinator and partition leaders are away until then
	firstEpoch  int16   // the epoch of a role's first producer id
	rotations   int     // producer-id rotations on exhaustion
	lowerIDs    int     // rotations to a lower producer id
}

func newKafka(w *world) *kafka {
	k := &kafka{
		w:         w,
		state:     &partition{name: "coordination"},
		log:       &partition{name: "dispatch.log"},
		requests:  map[string]*partition{},
		producers: map[string]*producer{},
	}
	// Each broker's block starts at its own base, in an order the seed
	// picks, so an id minted after a coordinator move may be lower.
	for _, b := range w.rng.Perm(3) {
		k.blocks = append(k.blocks, int64(1000*(b+1)))
	}
	k.coordinator = w.rng.IntN(3)
	return k
}

func (k *kafka) down() bool { return k.w.now < k.downUntil }

func (k *kafka) producerOf(role string) *producer {
	p, ok := k.producers[role]
	if !ok {
		p = &producer{pid: -1, epoch: -1}
		k.producers[role] = p
	}
	return p
}

func (k *kafka) token(p *producer) coordination.FencingToken {
	t, err := coordination.NewFencingToken(p.pid, p.epoch)
	if err != nil {
		return coordination.NoEpoch
	}
	return t
}

// bump moves the producer's epoch on, rotating to a new producer id from the
// coordinating broker's block when the epoch is exhausted.
func (k *kafka) bump(p *producer) {
	switch {
	case p.pid < 0:
		p.pid, p.epoch = k.mint(), k.firstEpoch
	case p.epoch >= maxEpoch:
		old := p.pid
		p.pid, p.epoch = k.mint(), 0
		k.rotations++
		if p.pid < old {
			k.lowerIDs++
		}
		k.w.note("coordinator rotates producer id %d to %d", old, p.pid)
	default:
		p.epoch++
	}
}

func (k *kafka) mint() int64 {
	id := k.blocks[k.coordinator]
	k.blocks[k.coordinator]++
	return id
}

// initProducerID is InitProducerId: it bumps the epoch and so fences every
// earlier holder. As Kafka's coordinator does, it answers only once the last
// transaction of the transactional id is complete, markers written: an open
// transaction is fenced (epoch bumped) and aborted, and the call, like one
// that finds a decided transaction whose markers have not landed, is
// answered CONCURRENT_TRANSACTIONS for the client to send it again.
func (k *kafka) initProducerID(role string) (coordination.FencingToken, error) {
	if k.down() {
		return coordination.NoEpoch, errUnavailable
	}
	p := k.producerOf(role)
	if t := p.txn; t != nil && !t.ended {
		k.decide(t, false)
		k.bump(p)
		return coordination.NoEpoch, errConcurrent
	}
	if t := p.txn; t != nil && !t.marked {
		return coordination.NoEpoch, errConcurrent
	}
	k.bump(p)
	return k.token(p), nil
}

func (k *kafka) fenced(p *producer, token coordination.FencingToken) bool {
	return p.pid != token.ProducerID() || p.epoch != token.ProducerEpoch()
}

// produce appends records to the open transaction of the role's producer,
// beginning one when none is open.
func (k *kafka) produce(role string, token coordination.FencingToken, parts []*partition, recs []*record) error {
	if k.down() {
		return errUnavailable
	}
	p := k.producerOf(role)
	if k.fenced(p, token) {
		return coordination.ErrFenced
	}
	if p.txn == nil || p.txn.ended {
		t := &txn{pid: p.pid, epoch: p.epoch, started: k.w.now}
		p.txn = t
		k.w.schedule(k.w.cfg.TxnTimeout, "coordinator: transaction timeout check", func() {
			if !t.ended {
				k.w.note("coordinator aborts the timed-out transaction of %s", role)
				k.decide(t, false)
				if p.txn == t {
					k.bump(p)
				}
			}
		})
	}
	for i, r := range recs {
		part := parts[i]
		r.offset = int64(len(part.recs))
		r.pid, r.epoch, r.txn = p.pid, p.epoch, p.txn
		part.recs = append(part.recs, r)
		p.txn.recs = append(p.txn.recs, r)
	}
	return nil
}

// endTxn commits the open transaction and, as transactions v2 do, bumps the
// epoch and returns the new token. The markers land later.
func (k *kafka) endTxn(role string, token coordination.FencingToken) (coordination.FencingToken, error) {
	if k.down() {
		return coordination.NoEpoch, errUnavailable
	}
	p := k.producerOf(role)
	if k.fenced(p, token) || p.txn == nil || p.txn.ended {
		return coordination.NoEpoch, coordination.ErrFenced
	}
	k.decide(p.txn, true)
	k.bump(p)
	return k.token(p), nil
}

// decide ends a transaction; its markers land after the marker lag.
func (k *kafka) decide(t *txn, commit bool) {
	t.ended, t.commit, t.decided = true, commit, k.w.now
	lag := k.w.between(0, k.w.cfg.MarkerLag)
	if k.w.enabled.has(faultMarkerLag) && k.w.chance(0.2) {
		lag = k.w.between(k.w.cfg.MarkerLag, 10*k.w.cfg.MarkerLag)
		k.w.faults[faultMarkerLag]++
	}
	k.w.schedule(lag, "broker: transaction markers land", func() { t.marked = true })
}

// appendPlain appends a non-transactional record, as the registration
// client and the request submitters do (idempotent, acks=all).
func (k *kafka) appendPlain(part *partition, key, value []byte) (int64, error) {
	if k.down() {
		return 0, errUnavailable
	}
	r := &record{offset: int64(len(part.recs)), key: key, value: value, pid: -1, epoch: -1}
	part.recs = append(part.recs, r)
	return r.offset, nil
}

// read reads a partition read_committed.
func (k *kafka) read(part *partition) (recs []*record, open []int64, hwm int64, err error) {
	if k.down() {
		return nil, nil, 0, errUnavailable
	}
	recs, open = part.readCommitted()
	return recs, open, int64(len(part.recs)), nil
}

// describe returns the token the coordinator holds for a role.
func (k *kafka) describe(role string) (coordination.FencingToken, error) {
	if k.down() {
		return coordination.NoEpoch, errUnavailable
	}
	return k.token(k.producerOf(role)), nil
}

// outage takes the coordinator and the partition leaders away for a while;
// the coordinator then moves to another broker.
func (k *kafka) outage(d int64) {
	k.downUntil = max(k.downUntil, k.w.now+d)
	until := k.downUntil
	k.w.schedule(d, "broker: back after an outage", func() {
		if k.w.now >= until {
			k.coordinator = (k.coordinator + 1 + k.w.rng.IntN(2)) % 3
		}
	})
}
