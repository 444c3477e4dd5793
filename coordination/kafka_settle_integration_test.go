//go:build integration

package coordination_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestKafkaSettlesEachCommit checks that the transport has the coordinator
// complete each commit before it begins the role's next transaction: once a
// transport that committed has closed, which waits for that, the
// coordinator describes the transaction as complete (CompleteCommit), where
// on a cluster with nothing else to do it still describes a commit of a
// bare franz-go producer as PrepareCommit for up to the followers' fetch
// wait. Each round uses a new transport, so each ends with its settle.
func TestKafkaSettlesEachCommit(t *testing.T) {
	eachTxnVersion(t, func(t *testing.T, env kafkaEnv) {
		ctx := testCtx(t, 60*time.Second)
		topic := kafkatest.UniqueName(t, "settle")
		env.createTopic(t, topic, 1)
		role := uniqueRole(t)
		adm := kadm.NewClient(env.client(t))
		for round := range 5 {
			tr := env.transport(t, testLease(t))
			token, err := tr.AcquireEpoch(ctx, role)
			if err != nil {
				t.Fatal(err)
			}
			records := []coordination.GuardedRecord{{Partition: coordination.TopicPartition{Topic: topic}, Value: []byte("settle")}}
			if _, err := tr.WriteGuarded(ctx, role, token, records); err != nil {
				t.Fatalf("round %d: write: %v", round, err)
			}
			tr.Close()
			described, err := adm.DescribeTransactions(ctx, role.String())
			if err != nil {
				t.Fatalf("round %d: describe: %v", round, err)
			}
			txn, ok := described[role.String()]
			if !ok || txn.Err != nil {
				t.Fatalf("round %d: describe %s: %+v", round, role, txn)
			}
			if txn.State != "CompleteCommit" {
				t.Errorf("round %d: after the transport closed, the coordinator describes the transaction as %s, want CompleteCommit", round, txn.State)
			}
		}
	})
}
