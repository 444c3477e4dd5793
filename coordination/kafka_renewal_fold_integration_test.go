//go:build integration

package coordination_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestKafkaWriteCarriesRenewal checks WithRenewalsInWrites on the real
// cluster: a Write within the lead commits its record and the lease record,
// on two topics, in one transaction, and a bystander reads the renewed lease.
func TestKafkaWriteCarriesRenewal(t *testing.T) {
	eachTxnVersion(t, func(t *testing.T, env kafkaEnv) {
		ctx := testCtx(t, 60*time.Second)
		role := uniqueRole(t)
		topic := kafkatest.UniqueName(t, "t")
		env.createTopic(t, topic, 1)
		bystander := env.transport(t, testLease(t))

		// A lead a millisecond under the renew interval: a Write that
		// starts a millisecond after the grant carries the first renewal.
		lead := testLease(t).RenewInterval() - time.Millisecond
		l, err := coordination.AcquireLeadership(ctx, env.transport(t, testLease(t)), role, member(t, "a"),
			leadershipOptions(t, coordination.WithRenewalsInWrites(lead))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Resign(context.Background()) })
		grant := l.Lease()
		for time.Now().UnixMilli() <= grant.GrantedAt {
			time.Sleep(time.Millisecond)
		}
		used, err := l.Write(ctx, func(token coordination.FencingToken) ([]coordination.GuardedRecord, error) {
			return []coordination.GuardedRecord{{
				Partition: coordination.TopicPartition{Topic: topic},
				Value:     tokenValue("a", token),
			}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		renewed := l.Lease()
		if renewed.GrantedAt <= grant.GrantedAt || renewed.Token != used {
			t.Fatalf("lease after a Write within the lead: %+v, grant %+v, written under %s", renewed, grant, used)
		}

		eventually(t, 10*time.Second, func() error {
			state, err := readState(ctx, bystander, role)
			if err != nil {
				return err
			}
			if state.Lease == nil || *state.Lease != renewed {
				return fmt.Errorf("bystander reads lease %+v, want %+v", state.Lease, renewed)
			}
			return nil
		})

		// Both records come from the batches of one producer and epoch;
		// under transactions v2 the epoch names the transaction.
		data := readCommitted(t, env, topic, 0)
		if len(data) != 1 {
			t.Fatalf("%d records on the data topic, want 1", len(data))
		}
		partition, err := coordination.RoleTopicPartition(role)
		if err != nil {
			t.Fatal(err)
		}
		leaseKey := coordination.EncodeKey(coordination.LeaseKey(role))
		var carried int
		for _, r := range readCommitted(t, env, partition.Topic, int32(partition.Partition)) {
			if !bytes.Equal(r.Key, leaseKey) {
				continue
			}
			lease, err := coordination.DecodeLease(r.Value)
			if err != nil || lease != renewed {
				continue
			}
			carried++
			if r.ProducerID != data[0].ProducerID || r.ProducerEpoch != data[0].ProducerEpoch {
				t.Fatalf("carried lease written by %d:%d, the Write's record by %d:%d",
					r.ProducerID, r.ProducerEpoch, data[0].ProducerID, data[0].ProducerEpoch)
			}
		}
		if carried != 1 {
			t.Fatalf("%d lease records equal the carried renewal, want 1", carried)
		}
	})
}
