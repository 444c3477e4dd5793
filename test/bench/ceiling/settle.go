package ceiling

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A settler asks a transaction coordinator, after each commit of a
// producer, for the state of the producer's transaction until the commit is
// complete there, as coordination.KafkaTransport does after each of its
// own, and the producer begins its next transaction after that. A user of
// franz-go can do the same in a few lines, so the ceiling does: on the test
// cluster a transaction begun before the coordinator completed the one
// before is held by its partition leader for the brokers'
// add.partitions.to.txn.retry.backoff.ms, and the completion itself waits for
// a request to reach the coordinator's broker (docs/OPERATIONS.md).
type settler struct {
	client *kgo.Client
	id     string
	done   chan struct{}
}

// settleEvery and settleFor are the settler's pause between questions and
// its bound, the transport's own.
const (
	settleEvery = time.Millisecond
	settleFor   = 50 * time.Millisecond
)

// start begins asking about the commit that just returned. A nil settler
// asks nothing.
func (s *settler) start() {
	if s == nil {
		return
	}
	done := make(chan struct{})
	s.done = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), settleFor)
		defer cancel()
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{s.id}
		for ctx.Err() == nil {
			resp, err := req.RequestWith(ctx, s.client)
			if err != nil || len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != 0 {
				return
			}
			switch resp.TransactionStates[0].State {
			case "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
			default:
				return
			}
			time.Sleep(settleEvery)
		}
	}()
}

// wait waits for the questions about the last commit to end, if any were
// asked.
func (s *settler) wait() {
	if s != nil && s.done != nil {
		<-s.done
		s.done = nil
	}
}
