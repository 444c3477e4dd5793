package coordination

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// memCluster models the part of a Kafka cluster that this package talks to:
// the transaction coordinator that mints and fences producer epochs, and the
// partitions of the coordination topic.
//
// What it models faithfully:
//   - AcquireEpoch of a role mints a token above every token the role ever
//     showed, and fences every earlier one: a write under a superseded token
//     fails with an error that wraps ErrFenced and changes nothing.
//   - The epoch of a producer id wraps to a new producer id with epoch 0 at
//     exhaustion. The new id is above every id before, unless a test set
//     rotateTo: then the next rotation goes to that id, which may be lower,
//     as Kafka's does when the role's coordinator moved to a broker that
//     holds an older block of producer ids.
//   - With bumpOnCommit (Kafka's transactions v2) every commit and every
//     abort bumps the epoch, and WriteGuarded reports the new token, with the
//     error of a write that failed and was aborted.
//   - A guarded write commits all its records or none, and every record
//     remembers the transaction that committed it, so a test can tell one
//     transaction of two records from two of one.
//   - Reads see committed records in offset order; every partition numbers
//     its records from zero.
//   - One member's client runs one transaction of a role at a time; an
//     overlap is a test failure, because the role has one transactional
//     producer per member.
//
// What it does not model: long-polling reads, transaction timeouts, the
// abort of a dead holder's open transaction, compaction.
type memCluster struct {
	t            testing.TB
	bumpOnCommit bool

	mu       sync.Mutex
	logs     map[TopicPartition][]memRecord
	current  map[Role]FencingToken // the token the coordinator holds per role
	owner    map[FencingToken]Role // every token ever minted, and its role
	nextPID  int64
	acquires int           // AcquireEpoch calls that minted a token
	txns     int64         // transactions committed, the last one's number
	txn      int64         // the transaction that appends now; 0 outside commit
	changed  chan struct{} // closed and replaced on every append

	// rotateTo, when positive, is the producer id of the next rotation at
	// exhaustion, in place of one above every id before; the rotation
	// clears it.
	rotateTo int64
}

// memRecord is a committed record, the token of the transaction that wrote
// it (NoEpoch for a plain append), and the number of that transaction (0 for a
// plain append).
type memRecord struct {
	StateRecord
	token   FencingToken
	txn     int64
	headers []Header
}

func newMemCluster(t testing.TB) *memCluster {
	return &memCluster{
		t:       t,
		logs:    make(map[TopicPartition][]memRecord),
		current: make(map[Role]FencingToken),
		owner:   make(map[FencingToken]Role),
		nextPID: 1000,
	}
}

// transport returns a new client of the cluster, as one member would run.
func (c *memCluster) transport() *memTransport { return &memTransport{cluster: c} }

// mint acquires a new epoch for role, as InitProducerId does.
func (c *memCluster) mint(role Role) FencingToken {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acquires++
	token, ok := c.current[role]
	if !ok {
		token = c.newProducerLocked()
	} else {
		token = c.bumpLocked(token)
	}
	c.current[role] = token
	c.owner[token] = role
	return token
}

func (c *memCluster) newProducerLocked() FencingToken {
	c.nextPID++
	return FencingToken{producerID: c.nextPID, producerEpoch: 0}
}

// bumpLocked returns the next token of a producer, rotating to a new
// producer id when the epoch is exhausted.
func (c *memCluster) bumpLocked(token FencingToken) FencingToken {
	if token.producerEpoch >= math.MaxInt16-1 {
		if id := c.rotateTo; id > 0 {
			c.rotateTo = 0
			return FencingToken{producerID: id, producerEpoch: 0}
		}
		return c.newProducerLocked()
	}
	return FencingToken{producerID: token.producerID, producerEpoch: token.producerEpoch + 1}
}

// setEpoch places the coordinator's token of a role near exhaustion, for the
// rotation tests.
func (c *memCluster) setEpoch(role Role, token FencingToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current[role] = token
	c.owner[token] = role
	if token.producerID > c.nextPID {
		c.nextPID = token.producerID
	}
}

// rotateNextTo makes the next rotation at exhaustion, of any role, move to
// producer id id, as a coordinator does that took over the role on a broker
// whose block of producer ids is older than the one the role's id came from.
// id must be one that no role used yet.
func (c *memCluster) rotateNextTo(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for token := range c.owner {
		if token.producerID == id {
			c.t.Fatalf("memcluster: producer id %d is taken by %s", id, token)
		}
	}
	c.rotateTo = id
}

func (c *memCluster) token(role Role) (FencingToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	token, ok := c.current[role]
	return token, ok
}

// commit appends records under token after the fence check, and returns the
// token the coordinator holds afterwards.
func (c *memCluster) commit(role Role, token FencingToken, records []GuardedRecord) (FencingToken, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	owner, known := c.owner[token]
	if !known || owner != role {
		return token, fmt.Errorf("memcluster: token %s is not a producer of role %s: %w", token, role, ErrFenced)
	}
	if current := c.current[role]; current != token {
		return token, fmt.Errorf("memcluster: token %s of role %s superseded by %s: %w", token, role, current, ErrFenced)
	}
	c.txns++
	c.txn = c.txns
	for i, r := range records {
		records[i].Offset = int64(len(c.logs[r.Partition]))
		c.appendLocked(r.Partition, r.Key, r.Value, token, r.Headers)
	}
	c.txn = 0
	next := token
	if c.bumpOnCommit {
		next = c.bumpLocked(token)
		c.current[role] = next
		c.owner[next] = role
	}
	return next, nil
}

func (c *memCluster) appendLocked(tp TopicPartition, key, value []byte, token FencingToken, headers []Header) {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
	log := c.logs[tp]
	c.logs[tp] = append(log, memRecord{
		StateRecord: StateRecord{Offset: int64(len(log)), Key: slices.Clone(key), Value: slices.Clone(value), Headers: slices.Clone(headers)},
		token:       token,
		txn:         c.txn,
		headers:     headers,
	})
}

// records returns the committed records of a partition.
func (c *memCluster) records(tp TopicPartition) []memRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.logs[tp])
}

// state folds the partition of a role.
func (c *memCluster) state(tp TopicPartition, role Role) RoleState {
	var records []StateRecord
	for _, r := range c.records(tp) {
		records = append(records, r.StateRecord)
	}
	state, err := BuildRoleState(role, records)
	if err != nil {
		c.t.Fatalf("fold: %v", err)
	}
	return state
}

func (c *memCluster) acquireCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acquires
}

// memTransport is one member's client of a memCluster. It implements
// Transport and GuardedWriter. A test cuts it off the cluster with down, and
// injects a fault into one operation with fault.
type memTransport struct {
	cluster *memCluster
	down    atomic.Bool

	mu sync.Mutex
	// fault, when set, runs before each operation. A non-nil error fails the
	// operation; apply says whether the operation takes effect first, as a
	// commit whose answer was lost does.
	fault func(ctx context.Context, op string) (err error, apply bool)
	calls map[string]int
	inTxn map[Role]bool // a transaction of the role's producer is open
}

var errUnreachable = errors.New("memcluster: broker unreachable")

func (m *memTransport) setFault(f func(ctx context.Context, op string) (error, bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = f
}

func (m *memTransport) callCount(op string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[op]
}

// before runs the fault hook for op. It reports an error to return, and
// whether to apply the operation anyway.
func (m *memTransport) before(ctx context.Context, op string) (error, bool) {
	m.mu.Lock()
	if m.calls == nil {
		m.calls = make(map[string]int)
	}
	m.calls[op]++
	fault := m.fault
	m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err, false
	}
	if m.down.Load() {
		return errUnreachable, false
	}
	if fault != nil {
		return fault(ctx, op)
	}
	return nil, true
}

func (m *memTransport) AcquireEpoch(ctx context.Context, role Role) (FencingToken, error) {
	err, apply := m.before(ctx, "AcquireEpoch")
	var token FencingToken
	if apply {
		token = m.cluster.mint(role)
	}
	if err != nil {
		return NoEpoch, err
	}
	return token, nil
}

func (m *memTransport) DescribeEpoch(ctx context.Context, role Role) (FencingToken, bool, error) {
	if err, _ := m.before(ctx, "DescribeEpoch"); err != nil {
		return NoEpoch, false, err
	}
	token, ok := m.cluster.token(role)
	if !ok {
		return NoEpoch, false, nil
	}
	return token, true, nil
}

func (m *memTransport) ReadPartition(ctx context.Context, tp TopicPartition) ([]StateRecord, error) {
	if err, _ := m.before(ctx, "ReadPartition"); err != nil {
		return nil, err
	}
	records := m.cluster.records(tp)
	out := make([]StateRecord, len(records))
	for i, r := range records {
		out[i] = r.StateRecord
	}
	return out, nil
}

func (m *memTransport) Append(ctx context.Context, tp TopicPartition, key, value []byte) error {
	err, apply := m.before(ctx, "Append")
	if apply {
		m.cluster.mu.Lock()
		m.cluster.appendLocked(tp, key, value, NoEpoch, nil)
		m.cluster.mu.Unlock()
	}
	return err
}

// WriteLease is a transaction of one record. The role comes from the token,
// as a Kafka producer is bound to its transactional id.
func (m *memTransport) WriteLease(ctx context.Context, tp TopicPartition, token FencingToken, key, value []byte) error {
	m.cluster.mu.Lock()
	role, ok := m.cluster.owner[token]
	m.cluster.mu.Unlock()
	if !ok {
		return fmt.Errorf("memcluster: no producer for token %s: %w", token, ErrFenced)
	}
	_, err := m.transaction(ctx, "WriteLease", role, token, []GuardedRecord{{Partition: tp, Key: key, Value: value}})
	return err
}

func (m *memTransport) WriteGuarded(ctx context.Context, role Role, token FencingToken, records []GuardedRecord) (FencingToken, error) {
	return m.transaction(ctx, "WriteGuarded", role, token, records)
}

// abort ends an open transaction of the role under token without its
// records, and returns the token the coordinator holds afterwards: under
// bumpOnCommit an abort bumps the epoch just as a commit does.
func (c *memCluster) abort(role Role, token FencingToken) FencingToken {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.bumpOnCommit || c.current[role] != token {
		return token
	}
	next := c.bumpLocked(token)
	c.current[role] = next
	c.owner[next] = role
	return next
}

// transaction runs one transaction of the role's producer: the overlap check
// spans the fault hook, so a hook that blocks holds the transaction open.
func (m *memTransport) transaction(ctx context.Context, op string, role Role, token FencingToken, records []GuardedRecord) (FencingToken, error) {
	m.mu.Lock()
	if m.inTxn == nil {
		m.inTxn = make(map[Role]bool)
	}
	if m.inTxn[role] {
		m.cluster.t.Errorf("%s: two transactions of the producer of role %s overlap", op, role)
	}
	m.inTxn[role] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.inTxn[role] = false
		m.mu.Unlock()
	}()

	err, apply := m.before(ctx, op)
	next := token
	if apply {
		var commitErr error
		next, commitErr = m.cluster.commit(role, token, records)
		if commitErr != nil {
			return token, commitErr
		}
	}
	if err != nil {
		if !apply && !errors.Is(err, ErrOutcomeUnknown) && !errors.Is(err, ErrFenced) {
			// The write failed cleanly and the producer aborted it.
			return m.cluster.abort(role, token), err
		}
		return token, err
	}
	return next, nil
}

// plainTransport hides the GuardedWriter of a transport, for the paths that
// work without one.
type plainTransport struct{ Transport }

// waitingTransport is a memTransport that also implements PartitionWaiter,
// as a transport that long-polls does.
type waitingTransport struct{ *memTransport }

func (w waitingTransport) WaitPartition(ctx context.Context, tp TopicPartition, after int64) error {
	if err, apply := w.before(ctx, "WaitPartition"); err != nil || !apply {
		return err
	}
	c := w.cluster
	for {
		c.mu.Lock()
		log := c.logs[tp]
		if len(log) > 0 && log[len(log)-1].Offset > after {
			c.mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
