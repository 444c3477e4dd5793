package coordination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/internal/stablewait"
	"go.opentelemetry.io/otel/metric"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaTransport implements [Transport], [GuardedWriter], and
// [PartitionWaiter] with franz-go.
//
// One transport serves every role of a process. It owns two kinds of
// client, created from the same franz-go options:
//
//   - a plain client, idempotent and not transactional, with acks=all, that
//     appends the registrations ([KafkaTransport.Append]), reads partitions
//     with read_committed fetches ([KafkaTransport.ReadPartition] and the
//     long poll of [KafkaTransport.WaitPartition]), and asks the transaction
//     coordinator ([KafkaTransport.DescribeEpoch]);
//   - one transactional client per role, with transactional.id = the role
//     and transaction.timeout.ms = the lease duration, created by
//     [KafkaTransport.AcquireEpoch] and by nothing else, because its
//     InitProducerId is what fences the previous holder.
//
// Every record goes to the partition its caller names: the clients use a
// manual partitioner, never a key hash. The transactional client of a role
// runs one transaction at a time, and it checks every produce result and
// aborts the transaction on any error, because Kafka would otherwise commit
// the part that succeeded. A client that the broker fenced (error codes 47
// INVALID_PRODUCER_EPOCH and 90 PRODUCER_FENCED), that met INVALID_TXN_STATE,
// or whose commit has an unknown outcome is closed at once and never used
// again: franz-go would otherwise recover it with a fresh InitProducerId,
// which must only ever happen in AcquireEpoch.
//
// Every call is bounded by the lease duration as well as by its context: a
// call that outlasts a lease is of no use to a holder, whose standbys
// challenge at the deadline anyway. The transport starts no goroutine of its
// own; franz-go's clients run theirs until Close.
//
// Kafka answers a commit before the coordinator has written the commit
// markers, so a read_committed reader, ReadPartition included, sees a
// committed record a moment (milliseconds) after the commit returned. A
// read also waits for the transactions that other producers hold open on the
// partition, up to the bound of [KafkaTransport.SetReadWait], because such a
// transaction hides every record committed after its first offset.
//
// # Transaction versions
//
// The transport supports both transaction protocols of Kafka. The token is
// the producer id and epoch that the coordinator holds for the role; what
// moves it differs.
//
// Under transactions v1 (a cluster below Kafka 4.0, a Kafka 4 cluster
// formatted with transaction.version=1, or a client capped below the KIP-890
// request versions), the coordinator mints the token at InitProducerId and
// keeps it for the life of the producer. A token then names one leadership.
//
// Under transactions v2 (KIP-890, the default of a Kafka 4 cluster), the
// coordinator bumps the epoch at every commit and every abort, returns the new
// pair in the EndTxn response, and moves to a new producer id with epoch 0
// when the epoch nears exhaustion. A token then names one leadership at one
// point of its life: [KafkaTransport.WriteGuarded] returns the token of the
// coordinator after each commit, and [Leadership] adopts it, so
// [Leadership.Token] stays the token that [DescribeLeadership] reports. Under
// both versions tokens only grow in [FencingToken.Compare] order, and a record
// that a guarded write builds from its token carries the token of the
// transaction that wrote it.
//
// A transport is safe for concurrent use. [KafkaTransport.Close] releases
// every client.
type KafkaTransport struct {
	lease LeaseConfig
	opts  []kgo.Opt // the caller's options, below the transport's own

	plain *kgo.Client // registrations, reads, and coordinator questions
	admin *kadm.Client

	mu        sync.Mutex
	closed    bool
	producers map[string]*roleProducer   // by role name
	prepared  map[string]*preparedClient // by role name, see PrepareEpoch
	readers   map[TopicPartition]*partitionReader
	readWait  readWait
}

// readWait is the resolved [ReadWait] of a transport.
type readWait struct {
	bound   time.Duration
	logger  *slog.Logger
	counter metric.Float64Counter
}

// OpenTransactionWaitMetric names the counter, in seconds, of the time that
// [KafkaTransport.ReadPartition] spent waiting for another producer's open
// transaction to end, with the attributes "topic" and "partition".
const OpenTransactionWaitMetric = "coordination.read.open_transaction_wait"

// ReadWait configures how [KafkaTransport.ReadPartition] waits for the open
// transactions of other producers. Pass it to [KafkaTransport.SetReadWait].
type ReadWait struct {
	// Bound is the longest a read waits, in all, for the last stable offset
	// to move past an open transaction before it returns an
	// *[OpenTransactionError]. Zero means the lease duration: the role's
	// transaction timeout (Kafka's transaction.timeout.ms), the time after
	// which the coordinator aborts the transaction of a producer of a role
	// that died, and the bound of every call of the transport anyway, since a
	// read that outlasts a lease is of no use to a standby, which reads again.
	Bound time.Duration

	// Logger receives a line, at most every few seconds, while a read waits.
	// Nil discards them.
	Logger *slog.Logger

	// MeterProvider provides the meter of [OpenTransactionWaitMetric]. Nil
	// records nothing.
	MeterProvider metric.MeterProvider
}

// SetReadWait sets how ReadPartition waits for other producers' open
// transactions; reads that already began keep the setting they began with.
func (t *KafkaTransport) SetReadWait(w ReadWait) error {
	if w.Bound < 0 {
		return fmt.Errorf("coordination: read wait bound %s is negative", w.Bound)
	}
	rw := readWait{bound: w.Bound, logger: w.Logger}
	if rw.bound == 0 {
		rw.bound = t.lease.duration
	}
	if w.MeterProvider != nil {
		c, err := stablewait.NewCounter(w.MeterProvider, instrumentationName, OpenTransactionWaitMetric)
		if err != nil {
			return fmt.Errorf("coordination: %w", err)
		}
		rw.counter = c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.readWait = rw
	return nil
}

// instrumentationName names the meter of this package.
const instrumentationName = "github.com/krabka-io/krabka-dispatch/coordination"

// readWaitSettings returns the read wait of the transport.
func (t *KafkaTransport) readWaitSettings() readWait {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.readWait
}

// Defaults of the transport's clients. A caller's franz-go option of the same
// setting overrides each.
const (
	// DefaultKafkaMetadataMinAge is the shortest gap between two metadata
	// refreshes of a transport's client, in place of franz-go's 5s
	// (Kafka's metadata.max.age.ms has no minimum counterpart). A broker
	// that died leaves its partitions leaderless until the controller moves
	// them; a short gap lets a renewal find the new leader within a lease.
	DefaultKafkaMetadataMinAge = 250 * time.Millisecond

	// DefaultKafkaRetryBackoffMax is the longest backoff between two retries
	// of a request, in place of franz-go's 5s (Kafka's
	// retry.backoff.max.ms). The backoff starts at a tenth of it and
	// doubles.
	DefaultKafkaRetryBackoffMax = time.Second

	// DefaultKafkaConcurrentTransactionsBackoff is the pause before a
	// transactional request that the coordinator answered
	// CONCURRENT_TRANSACTIONS is sent again, in place of franz-go's 20ms. The
	// coordinator answers so while it completes the previous transaction of
	// the transactional id, which takes a few milliseconds after a reader
	// already sees its records: a standby that reads a resignation and
	// challenges at once meets it with its InitProducerId, and a 20ms pause
	// would be most of a handover's cost. franz-go lengthens the pause itself
	// when the answer repeats for more than a second.
	DefaultKafkaConcurrentTransactionsBackoff = 5 * time.Millisecond
)

// kafkaMaxFetchWait bounds one long-poll fetch of
// [KafkaTransport.WaitPartition]; a longer wait is a loop of such fetches.
const kafkaMaxFetchWait = 5 * time.Second

// errTransportClosed is returned by every call after
// [KafkaTransport.Close].
var errTransportClosed = errors.New("coordination: kafka transport is closed")

// NewKafkaTransport connects a coordination transport to brokers.
//
// The lease duration becomes the transaction timeout of every role's
// producer (Kafka's transaction.timeout.ms), so the coordinator aborts the
// open transaction of a holder that died, and it bounds every call of the
// transport. The call checks its arguments and creates the plain client; it
// reaches no broker, so a cluster that is down fails the first call, not this
// one. Use [NewKafkaTransportWithClientOptions] for TLS, SASL, or any other
// franz-go setting.
func NewKafkaTransport(lease LeaseConfig, brokers ...string) (*KafkaTransport, error) {
	if len(brokers) == 0 {
		return nil, errors.New("coordination: kafka transport needs at least one broker address")
	}
	return NewKafkaTransportWithClientOptions(lease, kgo.SeedBrokers(brokers...))
}

// NewKafkaTransportWithClientOptions is [NewKafkaTransport] with franz-go
// client options instead of bare addresses. The options must include
// kgo.SeedBrokers, and they carry whatever the cluster needs: kgo.DialTLSConfig
// or kgo.Dialer for TLS, kgo.SASL for authentication, kgo.ClientID,
// kgo.WithLogger, kgo.MaxVersions.
//
// Every client of the transport gets its defaults
// ([DefaultKafkaMetadataMinAge], [DefaultKafkaRetryBackoffMax],
// [DefaultKafkaConcurrentTransactionsBackoff], and batches written without
// compression), which these options override, followed by the ones the transport's rules require, which
// win over these options: a manual partitioner, acks=all,
// idempotent writes, read_committed reads, and, for a role's producer, the
// transactional id and the transaction timeout. It rejects options that set
// a transactional id, a consumer group, or consumed topics or partitions,
// because the transport creates those itself.
//
// Capping the request versions below Kafka 4.0, for example with
// kgo.MaxVersions(kversion.V3_9_0()), makes the transport run transactions
// v1 against a Kafka 4 cluster.
func NewKafkaTransportWithClientOptions(lease LeaseConfig, opts ...kgo.Opt) (*KafkaTransport, error) {
	if lease.duration <= 0 {
		return nil, errors.New("coordination: lease config is the zero value; build one with NewLeaseConfig")
	}
	t := &KafkaTransport{
		lease:     lease,
		opts:      append([]kgo.Opt(nil), opts...),
		producers: make(map[string]*roleProducer),
		prepared:  make(map[string]*preparedClient),
		readers:   make(map[TopicPartition]*partitionReader),
		readWait:  readWait{bound: lease.duration},
	}
	plain, err := kgo.NewClient(t.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("coordination: kafka transport: %w", err)
	}
	if err := checkClientOpts(plain); err != nil {
		plain.Close()
		return nil, err
	}
	t.plain = plain
	t.admin = kadm.NewClient(plain)
	return t, nil
}

// checkClientOpts rejects caller options that the transport must own.
func checkClientOpts(cl *kgo.Client) error {
	if id, _ := cl.OptValue(kgo.TransactionalID).(string); id != "" {
		return fmt.Errorf("coordination: kafka transport: option kgo.TransactionalID(%q): the transport sets the transactional id of each role itself", id)
	}
	if group, _ := cl.OptValue(kgo.ConsumerGroup).(string); group != "" {
		return fmt.Errorf("coordination: kafka transport: option kgo.ConsumerGroup(%q): the transport joins no group", group)
	}
	if topics, _ := cl.OptValue(kgo.ConsumeTopics).([]string); len(topics) > 0 {
		return fmt.Errorf("coordination: kafka transport: option kgo.ConsumeTopics(%v): the transport reads partitions itself", topics)
	}
	if partitions, _ := cl.OptValue(kgo.ConsumePartitions).(map[string]map[int32]kgo.Offset); len(partitions) > 0 {
		return errors.New("coordination: kafka transport: option kgo.ConsumePartitions: the transport reads partitions itself")
	}
	return nil
}

// ProducerOptions returns the franz-go options of the transactional producer
// that AcquireEpoch opens for the role whose transactional id is
// transactionalID: the transport's defaults, the caller's options, the ones
// the transport's rules require, the transactional id and, as the
// transaction timeout, the lease duration. A benchmark builds a plain
// producer from them to compare like with like; the result is a new slice
// on every call.
func (t *KafkaTransport) ProducerOptions(transactionalID string) []kgo.Opt {
	return t.clientOpts(
		kgo.TransactionalID(transactionalID),
		kgo.TransactionTimeout(t.lease.duration),
	)
}

// clientOpts returns the options of a client: the transport's defaults,
// then the caller's, then the ones the transport's rules require.
func (t *KafkaTransport) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.MetadataMinAge(DefaultKafkaMetadataMinAge),
		kgo.RetryBackoffFn(retryBackoff),
		kgo.ConcurrentTransactionsBackoff(DefaultKafkaConcurrentTransactionsBackoff),
		// franz-go compresses batches with snappy unless told otherwise.
		// The records are small binary commands and checkpoint parts that
		// are mostly hashes: compression saves few bytes, and costs CPU at
		// the producer, at every broker (which decompresses a compressed
		// batch to check it) and at every reader: a sixth of the CPU of
		// reading a checkpoint of a million IDs went to decompressing it.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
	opts = append(opts, t.opts...)
	opts = append(opts,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	return append(opts, extra...)
}

// bound limits one call to the lease duration: a call that takes longer
// than a lease is useless to a holder, whose standbys challenge at the
// deadline anyway.
func (t *KafkaTransport) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.lease.duration)
}

// Close releases every client owned by the transport: the producer of every
// role, which ends every leadership written through it, and the plain client.
// It waits for no transaction; one in flight fails. It does wait, for 50ms at
// most, until the coordinator of each role has completed the role's last
// transaction (see [KafkaTransport.WriteGuarded]), so that a successor's
// InitProducerId is not answered CONCURRENT_TRANSACTIONS for it. Close is
// idempotent, and every call after it returns an error.
func (t *KafkaTransport) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	producers, prepared := t.producers, t.prepared
	t.producers, t.prepared = nil, nil
	t.readers = nil
	t.mu.Unlock()

	for _, p := range producers {
		p.close(fmt.Errorf("coordination: role %s: %w", p.role, errTransportClosed))
	}
	for _, p := range prepared {
		p.client.Close()
	}
	t.plain.Close()
}

// open reports errTransportClosed after Close.
func (t *KafkaTransport) open() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errTransportClosed
	}
	return nil
}
