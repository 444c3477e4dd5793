package coordination

import (
	"context"
	"time"
)

// Coordinator mints and reports the leadership epoch of a role. An adapter
// implements it over the transaction coordinator of a cluster.
//
// The two calls carry different weight. AcquireEpoch takes the role, and
// DescribeEpoch only looks.
type Coordinator interface {
	// AcquireEpoch mints a new epoch for the role and fences the previous
	// holder. The implementation calls InitProducerId with
	// transactional.id = <role>, and it keeps the producer that the epoch
	// binds, because [LeaseWriter.WriteLease] writes through that producer.
	//
	// The transaction coordinator picks the epoch, so the quorum mints the
	// value and the value only grows. The implementation should pass the
	// lease duration as transaction_timeout_ms, so the coordinator aborts the
	// open transaction of a dead holder without a client.
	AcquireEpoch(ctx context.Context, role Role) (FencingToken, error)

	// DescribeEpoch reports the token that the transaction coordinator holds
	// for the role. It reports false for a role that no member has ever
	// taken. The implementation calls DescribeTransactions, which joins no
	// group and takes no epoch.
	DescribeEpoch(ctx context.Context, role Role) (FencingToken, bool, error)
}

// StateReader reads one partition of [StateTopic]. An adapter implements it
// with a plain assign, seek, and poll loop over the partition.
type StateReader interface {
	// ReadPartition returns every committed record of the partition, oldest
	// first. The read takes committed records only, so an aborted lease write
	// stays invisible. The reader walks from the first offset of the
	// partition to the last stable offset.
	ReadPartition(ctx context.Context, partition TopicPartition) ([]StateRecord, error)
}

// Registrar appends the registration record of one candidate.
//
// This call carries no authority. A candidate holds no epoch when it announces
// itself, and it must take no epoch to do so, so the append sits outside a
// transaction. The offset that the broker assigns is the join sequence that
// the succession rules rank on.
type Registrar interface {
	// Append appends one record to the partition. The producer behind it
	// pins the partition, and it applies no partitioner of its own.
	Append(ctx context.Context, partition TopicPartition, key, value []byte) error
}

// LeaseWriter writes the lease record of a role in a transaction under the
// epoch of the role.
//
// A lease record authenticates itself. The broker fences any writer that does
// not hold the current epoch, so a lease record that reached the log is proof
// that its author held the epoch.
type LeaseWriter interface {
	// WriteLease writes one record under the token, inside a transaction of
	// the producer that minted the token. A nil value clears the lease. The
	// producer pins the partition, and it applies no partitioner of its own.
	//
	// The implementation returns an error that wraps [ErrFenced] when the
	// broker rejects the token. That rejection is how a deposed holder learns
	// that it lost the role.
	WriteLease(ctx context.Context, partition TopicPartition, token FencingToken, key, value []byte) error
}

// PartitionWaiter is an optional interface of a [Transport]. It lets a
// standby block until the partition of its role changes, instead of sleeping
// between two reads.
//
// [AcquireLeadership] uses it while it waits for its turn: it waits for a
// record above the highest offset it has read, and at most until the next
// evaluation is due or a poll interval passed, whichever comes first. A
// standby then sees a resignation within a round trip. Without it, the
// standby reads again after the poll interval, and sees the resignation that
// much later. [KafkaTransport] implements it with a long-poll fetch.
type PartitionWaiter interface {
	// WaitPartition blocks until the partition holds a committed record at
	// an offset above after, and returns nil then. It returns the error of
	// ctx when ctx ends first. An after of -1 waits for the first record.
	WaitPartition(ctx context.Context, partition TopicPartition, after int64) error
}

// EpochPreparer is implemented by a [Transport] that can get ready to take a
// role's epoch ahead of [Coordinator.AcquireEpoch], so that the call costs
// the InitProducerId and little else.
//
// [AcquireLeadership] calls it in the background while this member is the
// first in line for a role that another member holds, at most once per poll
// interval, and ignores its error: preparing is an optimisation, and the
// challenge works without it. PrepareEpoch must not take the epoch or touch
// the role's transactional state: a prepared transport fences no one.
// [KafkaTransport] creates the role's transactional client and opens its
// connections, which a handover would otherwise pay for after the
// resignation.
type EpochPreparer interface {
	// PrepareEpoch gets ready to take the epoch of role. It is cheap to call
	// again once ready.
	PrepareEpoch(ctx context.Context, role Role) error
}

// OpenWaitReader is an optional interface of a [Transport]: a read of the
// state topic whose wait on open transactions has a bound that the caller
// sets for each read.
//
// A transaction that the holder of a role began and did not end (a renewal
// of a holder that died in its middle) holds the partition's last stable
// offset until the transaction coordinator times it out, one lease duration
// later. A read that waited on it for its whole bound at the lease's deadline
// would put off the failover by that bound. [AcquireLeadership] therefore
// tells the read how long to wait on an open transaction: until one poll
// interval past the instant at which it acts, and no longer. A Transport
// without it reads with [StateReader.ReadPartition], whose wait the
// implementation bounds alone. [KafkaTransport] implements it; a wrapper of
// a transport (for metrics or tracing) must pass it through, as it passes
// [PartitionWaiter] and [EpochPreparer], or its standbys fail over later.
type OpenWaitReader interface {
	// ReadPartitionWaiting is [StateReader.ReadPartition] with a bound on
	// the time the read waits on open transactions, which the transport's
	// own bound still caps. Past it, the read returns an error that wraps an
	// *[OpenTransactionError]. A bound of zero returns that error on the
	// first fetch that finds the read blocked.
	ReadPartitionWaiting(ctx context.Context, partition TopicPartition, openWait time.Duration) ([]StateRecord, error)
}

// Transport is every cluster operation that this package performs, and it is
// nothing else. One adapter type satisfies all four interfaces.
//
// The library pins no Kafka client, so a caller writes the adapter over the
// client it already runs. The adapter needs two producers for one role. The
// transactional producer carries transactional.id = <role>, and it writes the
// lease records of that role. A second, plain producer appends the
// registration records, because Kafka puts every send of a transactional
// producer inside a transaction, and a candidate holds no epoch to open one
// with.
//
// A Transport may also implement [GuardedWriter]. A [Leadership] then writes
// its lease records through it, so the token it shows follows an epoch that
// the coordinator bumps on every commit, and [Leadership.Write] works. A
// Transport that implements [PartitionWaiter] lets a standby see a change of
// its role without a poll interval of delay, and one that implements
// [OpenWaitReader] lets it challenge a holder that died inside a transaction
// without waiting out the read's whole bound.
type Transport interface {
	Coordinator
	StateReader
	Registrar
	LeaseWriter
}
