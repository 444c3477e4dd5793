package ceiling

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// A settler settles each commit of a producer with
// coordination.SettleTransaction, the call coordination.KafkaTransport
// makes after each of its own, and the producer begins its next transaction
// after that. A user of franz-go can make the same call after each
// EndTransaction, so the ceiling does: on the test cluster a transaction
// begun before the coordinator completed the one before is held by its
// partition leader for the brokers' add.partitions.to.txn.retry.backoff.ms,
// and the completion itself waits for a request to reach the coordinator's
// broker (docs/OPERATIONS.md).
type settler struct {
	client *kgo.Client
	id     string
	done   chan struct{}
}

// start settles the commit that just returned, in the background. A nil
// settler does nothing.
func (s *settler) start() {
	if s == nil {
		return
	}
	done := make(chan struct{})
	s.done = done
	go func() {
		defer close(done)
		_ = coordination.SettleTransaction(context.Background(), s.client, s.id)
	}()
}

// wait waits for the settle of the last commit to end, if one ran.
func (s *settler) wait() {
	if s != nil && s.done != nil {
		<-s.done
		s.done = nil
	}
}
