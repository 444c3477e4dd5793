package coordination

import "context"

// Header is one header of a record of a guarded write.
type Header struct {
	Key   string
	Value []byte
}

// GuardedRecord is one record of a guarded write. The record goes to the
// partition it names; the writer applies no partitioner of its own.
type GuardedRecord struct {
	Partition TopicPartition
	Key       []byte
	Value     []byte
	Headers   []Header
}

// GuardedWriter is an optional interface of a [Transport]. It writes several
// records, possibly on several topics, in one transaction under the epoch of a
// role. [Leadership.Write] needs it; [KafkaTransport] implements it.
type GuardedWriter interface {
	// WriteGuarded writes the records in one transaction of the producer that
	// minted token, and commits them. It returns the token that the
	// transaction coordinator holds for the role after the commit: the same
	// token under Kafka transactions v1, and the bumped one under v2.
	//
	// The implementation checks every produce result and aborts the
	// transaction on any error, so the records commit all together or not at
	// all. It returns an error that wraps [ErrFenced] when the broker rejects
	// the token, and an error that wraps [ErrOutcomeUnknown] when it cannot
	// tell whether the transaction committed.
	WriteGuarded(ctx context.Context, role Role, token FencingToken, records []GuardedRecord) (FencingToken, error)
}
