package coordination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Append writes a registration outside a transaction, through the plain
// client: idempotent, acks=all, pinned to the partition. It carries no
// authority and takes no epoch. A nil value writes a tombstone.
func (t *KafkaTransport) Append(ctx context.Context, partition TopicPartition, key, value []byte) error {
	if err := t.open(); err != nil {
		return err
	}
	if err := checkPartition(partition); err != nil {
		return fmt.Errorf("coordination: append: %w", err)
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	record := &kgo.Record{Topic: partition.Topic, Partition: int32(partition.Partition), Key: key, Value: value}
	if err := t.plain.ProduceSync(ctx, record).FirstErr(); err != nil {
		return fmt.Errorf("coordination: append to %s[%d]: %w", partition.Topic, partition.Partition, err)
	}
	return nil
}

// WriteLease writes and commits one lease record under token, in a
// transaction of the role's producer that [KafkaTransport.AcquireEpoch]
// created. A nil value writes a tombstone, which clears the lease. It is
// [KafkaTransport.WriteGuarded] with one record, for a caller that does not
// follow the token; the role is read from the lease key.
func (t *KafkaTransport) WriteLease(ctx context.Context, partition TopicPartition, token FencingToken, key, value []byte) error {
	k, err := DecodeKey(key)
	if err != nil {
		return fmt.Errorf("coordination: write lease: %w", err)
	}
	_, err = t.WriteGuarded(ctx, k.Role, token, []GuardedRecord{{Partition: partition, Key: key, Value: value}})
	return err
}

// WriteGuarded writes the records in one transaction of the role's producer
// and commits them, and returns the token the coordinator holds after the
// commit: the same token under transactions v1, the bumped one under v2, and
// a new producer id at epoch 0 when the epoch ran out. That new id comes from
// the block of whichever broker coordinates the role at the time, so it may be
// lower than the old one; the producer follows it all the same. Each record
// goes to the partition it names, and on success its Offset is set to the
// offset it took. Transactions of one role run one at a time.
//
// After each commit or abort the producer asks the role's transaction
// coordinator, every millisecond for 50ms at most, until the coordinator has
// completed that transaction's end, and the role's next transaction begins
// after that: one begun before would be held by its partition leader for
// the brokers' add.partitions.to.txn.retry.backoff.ms (20ms by default), and
// on a quiet cluster the completion itself waits for a request to reach the
// coordinator's broker. The questions are that request. A call returns as
// soon as its commit does, so the wait falls on the next transaction, and
// only when the next transaction comes before the coordinator is done. A
// coordinator that refuses the question (a principal without DESCRIBE on
// the transactional id) is not asked again by that producer.
//
// token must be the role producer's current token, the last one that
// AcquireEpoch or a WriteGuarded of this role returned. A token that this
// producer held before fails with an error that wraps [ErrFenced] without a
// request, because the coordinator already holds a newer one.
//
// The errors:
//   - one that wraps [ErrFenced]: the broker refused the token (error codes
//     47 and 90), at any step, the abort of a failed transaction and its
//     retry included, or a later AcquireEpoch of this transport took the
//     role. The producer is closed.
//   - one that wraps [ErrOutcomeUnknown]: the commit was sent and no answer
//     came, or the producer met INVALID_TXN_STATE, or the abort of a failed
//     transaction failed without a fence. The records are in doubt and the
//     producer is closed, because franz-go would recover it with a new
//     InitProducerId.
//   - any other: a produce failed and the transaction was aborted, so none
//     of the records committed. The producer stays usable, and the returned
//     token is the one it holds after the abort, which under transactions v2
//     is a newer one: the caller adopts it for its next write.
//
// After the producer was closed every call returns the error that closed it.
func (t *KafkaTransport) WriteGuarded(ctx context.Context, role Role, token FencingToken, records []GuardedRecord) (FencingToken, error) {
	if role.name == "" {
		return token, errors.New("coordination: guarded write: role is empty")
	}
	for _, r := range records {
		if err := checkPartition(r.Partition); err != nil {
			return token, fmt.Errorf("coordination: kafka transport: role %s: %w", role, err)
		}
	}
	t.mu.Lock()
	closed, p := t.closed, t.producers[role.name]
	t.mu.Unlock()
	switch {
	case closed:
		return token, errTransportClosed
	case p == nil:
		return token, fmt.Errorf("coordination: kafka transport: role %s: the transport holds no producer of the role; AcquireEpoch mints one: %w", role, ErrNotHeld)
	}

	ctx, cancel := t.bound(ctx)
	defer cancel()
	if err := p.acquire(ctx); err != nil {
		return token, fmt.Errorf("coordination: kafka transport: role %s: wait for the transaction before: %w", role, err)
	}
	defer p.release()

	current, ended := p.state()
	switch {
	case token != current && p.held(token):
		return current, fmt.Errorf("coordination: kafka transport: role %s: token %s is older than %s, which the coordinator holds (a commit or an abort under transactions v2 moves it; write with the token the last WriteGuarded returned): %w", role, token, current, ErrFenced)
	case ended != nil:
		return current, ended
	case token != current:
		return current, fmt.Errorf("coordination: kafka transport: role %s: token %s was not minted by this transport, whose producer holds %s", role, token, current)
	}
	if len(records) == 0 {
		return current, nil
	}
	return t.transact(ctx, p, token, records)
}

// transact runs one transaction on p, which the caller holds the slot of.
func (t *KafkaTransport) transact(ctx context.Context, p *roleProducer, token FencingToken, records []GuardedRecord) (FencingToken, error) {
	fail := func(sentinel error, step string, err error) (FencingToken, error) {
		err = fmt.Errorf("coordination: kafka transport: role %s, token %s: %s: %w: %w", p.role, token, step, sentinel, err)
		p.end(err)
		return token, err
	}

	if err := p.waitSettled(ctx); err != nil {
		return token, fmt.Errorf("coordination: kafka transport: role %s: wait for the coordinator to complete the transaction before: %w", p.role, err)
	}
	if err := p.client.BeginTransaction(); err != nil {
		return fail(ErrOutcomeUnknown, "begin transaction", err)
	}
	// The records and their headers each take one allocation, not one a
	// record: a transaction may carry thousands.
	nh := 0
	for _, r := range records {
		nh += len(r.Headers)
	}
	krs := make([]*kgo.Record, len(records))
	backing := make([]kgo.Record, len(records))
	headers := make([]kgo.RecordHeader, 0, nh)
	for i, r := range records {
		kr := &backing[i]
		kr.Topic, kr.Partition, kr.Key, kr.Value = r.Partition.Topic, int32(r.Partition.Partition), r.Key, r.Value
		from := len(headers)
		for _, h := range r.Headers {
			headers = append(headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if len(headers) > from {
			kr.Headers = headers[from:len(headers):len(headers)]
		}
		krs[i] = kr
	}
	// Wait for every result: franz-go commits whatever part of a
	// transaction succeeded, so one failure must abort the whole.
	if err := p.client.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		switch {
		case isFenceErr(err):
			return fail(ErrFenced, "produce", err)
		case errors.Is(err, kerr.InvalidTxnState):
			return fail(ErrOutcomeUnknown, "produce", err)
		}
		return t.abort(p, token, err)
	}

	// The commit runs to its end even when the caller gives up, because an
	// EndTxn cut short has an unknown outcome; the transport's own bound
	// still applies.
	commitCtx, cancel := t.bound(context.WithoutCancel(ctx))
	defer cancel()
	if err := p.client.EndTransaction(commitCtx, kgo.TryCommit); err != nil {
		if isFenceErr(err) {
			return fail(ErrFenced, "commit", err)
		}
		return fail(ErrOutcomeUnknown, "commit", err)
	}
	p.startSettle()
	next, err := t.tokenAfter(commitCtx, p)
	if err != nil {
		return fail(ErrOutcomeUnknown, "read the token after the commit", err)
	}
	for i, kr := range krs {
		records[i].Offset = kr.Offset
	}
	return next, nil
}

// abort ends a transaction whose produce failed for another reason than a
// fence. The producer stays usable when the abort succeeds.
func (t *KafkaTransport) abort(p *roleProducer, token FencingToken, cause error) (FencingToken, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.lease.duration)
	defer cancel()
	// A fence refuses whatever step meets it, the re-initialization of a
	// retried abort included (which the token's read after it reports):
	// the broker answered, another member holds the role.
	// The step names which request failed: they fail alike when a broker
	// goes away.
	fail := func(step string, err error) (FencingToken, error) {
		sentinel := ErrOutcomeUnknown
		if isFenceErr(err) {
			sentinel = ErrFenced
		}
		err = fmt.Errorf("coordination: kafka transport: role %s, token %s: abort after %v: %s: %w: %w", p.role, token, cause, step, sentinel, err)
		p.end(err)
		return token, err
	}
	if err := p.client.AbortBufferedRecords(ctx); err != nil {
		return fail("drop the buffered records", err)
	}
	if err := endAbort(ctx, p.client); err != nil {
		return fail("end the transaction", err)
	}
	p.startSettle()
	next, err := t.tokenAfter(ctx, p)
	if err != nil {
		return fail("read the token after the abort", err)
	}
	return next, fmt.Errorf("coordination: kafka transport: role %s, token %s: aborted, nothing committed: %w", p.role, token, cause)
}

// endAbort sends the EndTxn that aborts the open transaction, and sends it
// again while it fails with an answer that confirms nothing: a dropped
// connection, a coordinator that moved or died, a retriable code that
// outlived franz-go's own retries, UNKNOWN_SERVER_ERROR. Each such failure
// leaves the transaction open or aborted, never committed, because only this
// producer could commit it. franz-go's retry of an unconfirmed end
// re-initializes the producer at the id and epoch it holds, which bumps the
// epoch and aborts whatever the coordinator still holds open; when another
// member has taken the role since, the broker refuses that with a fence. A
// definite refusal ends the retries, and so does ctx.
func endAbort(ctx context.Context, cl *kgo.Client) error {
	for tries := 0; ; tries++ {
		err := cl.EndTransaction(ctx, kgo.TryAbort)
		if err == nil || isFenceErr(err) || !unconfirmed(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(retryBackoff(tries)):
		}
	}
}

// unconfirmed reports whether err, from an EndTxn, leaves its outcome
// unconfirmed rather than refused, so that a retry may confirm it: every
// error but a closed client and a broker's non-retriable code, of which
// UNKNOWN_SERVER_ERROR confirms nothing either.
func unconfirmed(err error) bool {
	if errors.Is(err, kgo.ErrClientClosed) {
		return false
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return true
	}
	return ke.Retriable || ke.Code == kerr.UnknownServerError.Code
}

// tokenAfter reads the producer id and epoch that the client holds after
// an EndTxn and records them. Under transactions v2 franz-go took them from
// the EndTxn response, so no request is sent.
func (t *KafkaTransport) tokenAfter(ctx context.Context, p *roleProducer) (FencingToken, error) {
	id, epoch, err := p.client.ProducerID(ctx)
	if err != nil {
		return NoEpoch, err
	}
	next, err := NewFencingToken(id, epoch)
	if err != nil {
		return NoEpoch, err
	}
	p.setToken(next)
	return next, nil
}

// checkPartition rejects a partition that cannot name a Kafka partition.
func checkPartition(partition TopicPartition) error {
	if partition.Topic == "" {
		return errors.New("partition has no topic")
	}
	if partition.Partition < 0 || partition.Partition > 1<<31-1 {
		return fmt.Errorf("partition %d of %s is out of range", partition.Partition, partition.Topic)
	}
	return nil
}
