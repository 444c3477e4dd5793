package coordination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transaction's end is not complete at the coordinator when EndTxn
// returns: the coordinator still writes the markers to the partitions and
// then its own CompleteCommit (or CompleteAbort) record. Until that record is
// replicated, a produce of the next transaction is held by its partition
// leader, which asks the coordinator, is answered CONCURRENT_TRANSACTIONS,
// and asks again after the brokers' add.partitions.to.txn.retry.backoff.ms
// (20 ms by default).
//
// On a cluster with little other traffic the completion waits much longer
// than its work: measured on three brokers of Kafka 4.1, a transaction begun
// anywhere from 2 to 300 ms after the last commit was held once nearly every
// time, and one begun at once twice. Requests sent to the coordinator's
// broker a few milliseconds after each commit spared every transaction;
// the same requests to the other brokers spared few. That fits Kafka's
// code as we read it: the coordinator appends the completion from the
// thread that reads the markers' answers, and a broker wakes the followers'
// fetches parked on such an append only when it next handles a request
// (KafkaApis runs its queued delayed actions at the end of each request),
// so the record waits for the next request to reach the coordinator's
// broker, or for a follower's fetch to time out (replica.fetch.wait.max.ms,
// 500 ms by default). The next transaction's own produce is that request:
// it wakes the followers and is itself held.
//
// So after each end a producer settles ([SettleTransaction]): it asks the
// coordinator for the transaction's state (DescribeTransactions) every
// settlePoll until the state is no longer a Prepare one, and the next
// transaction of the role begins after that. Each question is a request the coordinator's broker
// handles, so the completion goes on at once, and the answer says when it
// is done. On the same cluster, over pauses from none to 300 ms, 5 of 800
// transactions begun after a settle were held, against 704 of 800 without
// (the benchmarks' txnsteps, with and without -settle; docs/OPERATIONS.md).

const (
	// settlePoll is the pause between two questions of a settle.
	settlePoll = time.Millisecond

	// settleBound is the longest a settle asks. A transaction begun later
	// than that is held no longer than it would have been without a settle,
	// and a coordinator that does not answer within it does not delay the
	// next write further.
	settleBound = 50 * time.Millisecond
)

// SettleTransaction asks the transaction coordinator of transactionalID,
// through client, for the state of the id's transaction (DescribeTransactions)
// every millisecond until the coordinator has completed its last commit or
// abort, for 50ms at most. A producer that begins its next transaction after
// it returns is not held by a partition leader for a transaction still
// ending, and on a quiet cluster the questions are what lets the coordinator
// complete it (see above). [KafkaTransport] settles each of its transactions
// so; a program with a franz-go transactional producer of its own can call
// it after each EndTransaction.
//
// It returns nil once the answer names a state other than a Prepare one, the
// error of ctx or context.DeadlineExceeded when the bound passes first, and
// the request's or the answer's error otherwise: a broker without
// DescribeTransactions (before Kafka 3.0), or a principal without DESCRIBE
// on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Such an
// error costs only the shortcut.
func SettleTransaction(ctx context.Context, client *kgo.Client, transactionalID string) error {
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{transactionalID}
	for {
		resp, err := req.RequestWith(ctx, client)
		switch {
		case err != nil:
			return fmt.Errorf("coordination: settle the transaction of %s: %w", transactionalID, err)
		case len(resp.TransactionStates) != 1:
			return fmt.Errorf("coordination: settle the transaction of %s: the coordinator described %d transactions", transactionalID, len(resp.TransactionStates))
		}
		s := resp.TransactionStates[0]
		if err := kerr.ErrorForCode(s.ErrorCode); err != nil {
			return fmt.Errorf("coordination: settle the transaction of %s: %w", transactionalID, err)
		}
		if !ending(s.State) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(settlePoll):
		}
	}
}

// ending reports whether state, as DescribeTransactions names it, is that of
// a transaction whose end the coordinator has not completed.
func ending(state string) bool {
	switch state {
	case "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return true
	}
	return false
}

// startSettle starts the settle of the transaction that just ended, unless
// the producer has ended or a coordinator refused to describe its
// transactions.
func (p *roleProducer) startSettle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended != nil || p.noSettle {
		return
	}
	done := make(chan struct{})
	p.settled = done
	// At most one settle of a producer runs at a time: the next
	// transaction waits for this one, and only a transaction's end starts
	// one. Its error costs only the shortcut (see SettleTransaction); a
	// refusal would cost each later transaction a question for nothing.
	go func() {
		defer close(done)
		if err := SettleTransaction(context.Background(), p.client, p.role.name); refused(err) {
			p.mu.Lock()
			p.noSettle = true
			p.mu.Unlock()
		}
	}()
}

// refused reports whether err is a coordinator's answer that asking again
// will not change, such as TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a
// principal without DESCRIBE on the transactional id: an error of Kafka that
// confirms something, as unconfirmed tells them apart for an EndTxn. A
// coordinator that is loading or moving, UNKNOWN_SERVER_ERROR, a broker that
// went away and the settle's bound are not refusals.
func refused(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && !unconfirmed(err)
}

// settling returns the channel of the last settle, closed once it ended, or
// nil when none ran.
func (p *roleProducer) settling() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settled
}

// waitSettled waits for the settle of the last transaction, or returns the
// error of ctx.
func (p *roleProducer) waitSettled(ctx context.Context) error {
	done := p.settling()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close lets the settle of the last transaction end, which takes no longer
// than settleBound, so that a successor's InitProducerId finds that
// transaction complete, then ends the producer with reason.
func (p *roleProducer) close(reason error) {
	if done := p.settling(); done != nil {
		<-done
	}
	p.end(reason)
	// A transaction that was in flight may have ended and started a settle
	// meanwhile; the closed client ends it at its next request.
	if done := p.settling(); done != nil {
		<-done
	}
}
