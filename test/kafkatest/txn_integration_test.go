//go:build integration

package kafkatest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestBumpEpochToExhaustion checks the harness against Kafka's rules at the
// end of a producer's epochs: BumpEpoch moves a new transactional id to
// ExhaustedEpoch under one producer id in well under the bound (about 35s on
// an idle cluster; the bound leaves room for a loaded machine), DescribeTransactions
// agrees, and the next bare InitProducerId rotates the id to a new producer
// id at epoch 0.
func TestBumpEpochToExhaustion(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	id := kafkatest.UniqueName(t, "txn")
	coordinator := kafkatest.TxnCoordinator(t, brokers, id)
	t.Logf("broker %d coordinates %s", coordinator, id)

	start := time.Now()
	got := kafkatest.BumpEpoch(t, brokers, id, kafkatest.ExhaustedEpoch)
	if took := time.Since(start); took > 3*time.Minute {
		t.Errorf("bumping to epoch %d took %v", kafkatest.ExhaustedEpoch, took)
	}
	if got.Epoch != kafkatest.ExhaustedEpoch {
		t.Fatalf("bumped to %s, want epoch %d", got, kafkatest.ExhaustedEpoch)
	}
	if described := describe(t, brokers, id); described != got {
		t.Fatalf("DescribeTransactions shows %s, BumpEpoch returned %s", described, got)
	}

	cl := client(t, brokers)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID, req.ProducerEpoch = -1, -1
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	rotated := kafkatest.ProducerIDEpoch{ProducerID: resp.ProducerID, Epoch: resp.ProducerEpoch}
	t.Logf("InitProducerId at %s answered %s (error code %d)", got, rotated, resp.ErrorCode)
	if resp.ErrorCode != 0 || rotated.ProducerID == got.ProducerID || rotated.Epoch != 0 {
		t.Fatalf("InitProducerId at the exhausted epoch %s answered %s, error code %d; want a new producer id at epoch 0", got, rotated, resp.ErrorCode)
	}
}

// TestRaiseProducerIDBlock checks that RaiseProducerIDBlock leaves the
// broker handing out ids above those of every other broker, which is what
// makes a rotation at another broker go to a lower producer id.
func TestRaiseProducerIDBlock(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	const raised = 1
	block := kafkatest.RaiseProducerIDBlock(t, brokers, raised)
	if block%kafkatest.ProducerIDBlockSize != 0 {
		t.Errorf("the new block starts at %d, not at a multiple of %d", block, kafkatest.ProducerIDBlockSize)
	}
	if next := kafkatest.MintProducerID(t, brokers, raised); next <= block || next >= block+kafkatest.ProducerIDBlockSize {
		t.Errorf("broker %d handed out %d after the block of %d", raised, next, block)
	}
	for n := 1; n <= kafkatest.NumBrokers; n++ {
		if n == raised {
			continue
		}
		if id := kafkatest.MintProducerID(t, brokers, n); id >= block {
			t.Errorf("broker %d handed out %d, not below the block of %d", n, id, block)
		}
	}
}
