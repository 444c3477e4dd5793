//go:build integration

package coordination_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

		awaitBystanderLease(ctx, t, bystander, role, renewed)

		// Both records come from the batches of one producer and epoch;
		// under transactions v2 the epoch names the transaction.
		data := readCommitted(t, env, topic, 0)
		if len(data) != 1 {
			t.Fatalf("%d records on the data topic, want 1", len(data))
		}
		carried := committedLeases(t, env, role, renewed)
		for _, r := range carried {
			if r.ProducerID != data[0].ProducerID || r.ProducerEpoch != data[0].ProducerEpoch {
				t.Fatalf("carried lease written by %d:%d, the Write's record by %d:%d",
					r.ProducerID, r.ProducerEpoch, data[0].ProducerID, data[0].ProducerEpoch)
			}
		}
		if len(carried) != 1 {
			t.Fatalf("%d lease records equal the carried renewal, want 1", len(carried))
		}
	})
}

// committedLeases returns the committed records of role's lease key in its
// state partition that hold lease.
func committedLeases(t *testing.T, env kafkaEnv, role coordination.Role, lease coordination.Lease) []*kgo.Record {
	t.Helper()
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	leaseKey := coordination.EncodeKey(coordination.LeaseKey(role))
	var found []*kgo.Record
	for _, r := range readCommitted(t, env, partition.Topic, int32(partition.Partition)) {
		if !bytes.Equal(r.Key, leaseKey) {
			continue
		}
		if l, err := coordination.DecodeLease(r.Value); err == nil && l == lease {
			found = append(found, r)
		}
	}
	return found
}

// awaitBystanderLease waits until a bystander reading role's state through
// tr reads lease.
func awaitBystanderLease(ctx context.Context, t *testing.T, tr *coordination.KafkaTransport, role coordination.Role, lease coordination.Lease) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		state, err := readState(ctx, tr, role)
		if err != nil {
			return err
		}
		if state.Lease == nil || *state.Lease != lease {
			return fmt.Errorf("a bystander reads lease %+v, want %+v", state.Lease, lease)
		}
		return nil
	})
}
