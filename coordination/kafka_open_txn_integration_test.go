//go:build integration

package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestKafkaStandbyPastOpenTransaction: another producer holds a transaction
// open on the role's partition of the state topic while a healthy holder
// renews. The renewals commit after the open transaction's first offset, so
// read_committed hides them until it ends; a standby that decided on what it
// could see would find the lease expired and fence the holder. The standby
// must not challenge: the holder keeps the role for several leases. Once the
// transaction ends, a read returns the renewals committed behind it, and a
// resignation still hands the role to the standby.
func TestKafkaStandbyPastOpenTransaction(t *testing.T) {
	eachTxnVersion(t, func(t *testing.T, env kafkaEnv) {
		ctx := testCtx(t, 90*time.Second)
		role := uniqueRole(t)
		// A state topic of the test's own: the open transaction holds back
		// no other test's reads.
		topic := kafkatest.UniqueName(t, "state")
		env.createTopic(t, topic, 1)
		partition := coordination.TopicPartition{Topic: topic, Partition: 0}
		options := leadershipOptions(t, coordination.WithTopic(topic), coordination.WithPartitions(1))
		bystander := env.transport(t, testLease(t))
		holder, err := coordination.AcquireLeadership(ctx, env.transport(t, testLease(t)), role, member(t, "holder"), options...)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			l   *coordination.Leadership
			err error
		}
		won := make(chan result, 1)
		standbyCtx, stopStandby := context.WithCancel(ctx)
		defer stopStandby()
		go func() {
			l, err := coordination.AcquireLeadership(standbyCtx, env.transport(t, testLease(t)), role, member(t, "standby"), options...)
			won <- result{l, err}
		}()
		// The standby's registration is visible before the transaction
		// opens, so the standby ranks and would challenge at the deadline
		// of the last lease it can see.
		eventually(t, 20*time.Second, func() error {
			state, err := coordination.DescribeRoleState(ctx, bystander, role, options...)
			if err != nil {
				return err
			}
			if _, ok := state.Entry(member(t, "standby")); !ok {
				return fmt.Errorf("the standby is not in the roster yet")
			}
			return nil
		})

		// The transaction times out soon after the test needs it, and the
		// test aborts it however it ends.
		other := env.client(t, kgo.TransactionalID(kafkatest.UniqueName(t, "other-producer")),
			kgo.TransactionTimeout(30*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := other.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		ended := false
		t.Cleanup(func() {
			if !ended {
				actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = other.EndTransaction(actx, kgo.TryAbort)
			}
		})
		rec := &kgo.Record{Topic: partition.Topic, Partition: int32(partition.Partition), Key: []byte("other"), Value: []byte("never committed")}
		if err := other.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		opened := rec.Offset

		// Three leases pass with the transaction open: the holder renews
		// throughout, and the standby neither wins nor fences it.
		lease := testLease(t)
		select {
		case r := <-won:
			standbyEnded(t, r.l, r.err)
		case <-holder.Done():
			t.Fatalf("the holder lost the role while it renewed: %v", holder.Err())
		case <-time.After(3 * lease.Duration()):
		}
		if err := holder.Renew(ctx); err != nil {
			t.Fatalf("the holder's renewal after three leases: %v", err)
		}
		wantBoundedRead(t, ctx, bystander, partition, opened)

		ended = true
		if err := other.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
		// The read returns the renewals committed behind the transaction.
		records, err := bystander.ReadPartition(ctx, partition)
		if err != nil {
			t.Fatal(err)
		}
		leaseKey := string(coordination.EncodeKey(coordination.LeaseKey(role)))
		var renewal *coordination.StateRecord
		for i := range records {
			if string(records[i].Key) == leaseKey {
				renewal = &records[i]
			}
		}
		if renewal == nil || renewal.Offset <= opened {
			t.Fatalf("after the abort the lease record is %+v; want the holder's renewal behind offset %d", renewal, opened)
		}
		if l, err := coordination.DecodeLease(renewal.Value); err != nil || l.Member != member(t, "holder") {
			t.Fatalf("the lease behind the open transaction: %+v, %v", l, err)
		}
		select {
		case r := <-won:
			standbyEnded(t, r.l, r.err)
		case <-holder.Done():
			t.Fatalf("the holder lost the role: %v", holder.Err())
		default:
		}

		// The standby is still competing: a resignation hands it the role.
		if err := holder.Resign(ctx); err != nil {
			t.Fatalf("resign: %v", err)
		}
		r := <-won
		if r.err != nil {
			t.Fatalf("the standby after the resignation: %v", r.err)
		}
		t.Cleanup(func() { _ = r.l.Resign(context.Background()) })
	})
}

// wantBoundedRead checks ReadPartitionWaiting against another producer's
// transaction open at offset opened: a bound of zero gives up at the first
// fetch that finds the read blocked, a bound of 300ms after that long, and
// each returns an *OpenTransactionError whose records stop before opened.
func wantBoundedRead(t *testing.T, ctx context.Context, reader *coordination.KafkaTransport, partition coordination.TopicPartition, opened int64) {
	t.Helper()
	for _, bound := range []time.Duration{0, 300 * time.Millisecond} {
		began := time.Now()
		_, err := reader.ReadPartitionWaiting(ctx, partition, bound)
		took := time.Since(began)
		var open *coordination.OpenTransactionError
		if !errors.As(err, &open) {
			t.Fatalf("ReadPartitionWaiting with a bound of %v past an open transaction: %v, want an *OpenTransactionError", bound, err)
		}
		if open.StableOffset != opened || open.Waited < bound || took > bound+2*time.Second {
			t.Errorf("ReadPartitionWaiting with a bound of %v stopped at %d after waiting %v (%v in all), want at %d after %v and little more",
				bound, open.StableOffset, open.Waited, took, opened, bound)
		}
		t.Logf("ReadPartitionWaiting with a bound of %v stopped at offset %d after waiting %v, %v in all", bound, open.StableOffset, open.Waited, took)
		for _, r := range open.Records {
			if r.Offset >= opened {
				t.Errorf("the view before the open transaction holds offset %d, at or past %d", r.Offset, opened)
			}
		}
	}
}

// standbyEnded fails the test for a standby's campaign that ended while the
// holder renewed.
func standbyEnded(t *testing.T, l *coordination.Leadership, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("the standby's campaign failed while the holder renewed: %v", err)
	}
	_ = l.Resign(context.Background())
	t.Fatalf("the standby took the role, under %s, from a holder that renewed", l.Token())
}

// TestKafkaStandbyPastHoldersOwnOpenTransaction: the holder died in the
// middle of a renewal, so its own transaction stays open on the role's
// partition until the transaction coordinator times it out. That transaction
// hides nothing the standby must wait for: it is the holder's unfinished
// word. The standby decides on the view before it and challenges at the
// deadline of the last committed lease, and its InitProducerId aborts the
// transaction, long before the transaction would time out.
func TestKafkaStandbyPastHoldersOwnOpenTransaction(t *testing.T) {
	eachTxnVersion(t, func(t *testing.T, env kafkaEnv) {
		ctx := testCtx(t, 90*time.Second)
		role := uniqueRole(t)
		topic := kafkatest.UniqueName(t, "state")
		env.createTopic(t, topic, 1)
		options := leadershipOptions(t, coordination.WithTopic(topic), coordination.WithPartitions(1))

		// The holder writes as the role's producer would: a lease in one
		// committed transaction, then a renewal in one that never ends. Its
		// transaction timeout is far longer than the test waits.
		holder := env.client(t, kgo.TransactionalID(role.String()),
			kgo.TransactionTimeout(2*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		id, epoch, err := holder.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		token, err := coordination.NewFencingToken(id, epoch)
		if err != nil {
			t.Fatal(err)
		}
		var deadline int64 // of the last lease that the holder committed
		leaseRecord := func() *kgo.Record {
			now := time.Now().UnixMilli()
			deadline = now + testLease(t).Duration().Milliseconds()
			return &kgo.Record{Topic: topic, Partition: 0,
				Key: coordination.EncodeKey(coordination.LeaseKey(role)),
				Value: coordination.EncodeLease(coordination.Lease{Member: member(t, "holder"), Token: token,
					GrantedAt: now, Deadline: deadline})}
		}
		if err := holder.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := holder.ProduceSync(ctx, leaseRecord()).FirstErr(); err != nil {
			t.Fatal(err)
		}
		committed := deadline
		if err := holder.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		if err := holder.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := holder.ProduceSync(ctx, leaseRecord()).FirstErr(); err != nil {
			t.Fatal(err)
		}
		hung := time.Now()

		watch := &epochWatch{KafkaTransport: env.transport(t, testLease(t))}
		standby, err := coordination.AcquireLeadership(testCtx(t, 30*time.Second), watch, role, member(t, "standby"), options...)
		if err != nil {
			t.Fatalf("the standby did not take over from a holder that died mid-renewal: %v", err)
		}
		defer func() { _ = standby.Resign(context.Background()) }()
		watch.mu.Lock()
		challenged := watch.challenged.Sub(time.UnixMilli(committed))
		watch.mu.Unlock()
		t.Logf("the standby challenged %v after the deadline of the holder's last committed lease, took over %v after its renewal hung, under %s, term %s",
			challenged.Round(time.Millisecond), time.Since(hung).Round(time.Millisecond), standby.Token(), standby.Term())
		// Every read of the standby stops at the holder's transaction, and
		// none may wait on it past a poll interval after the deadline. The
		// bound is that poll interval and half a second for the read, the
		// look-ups of the open transaction's producers and of the epoch,
		// which the suite's parallel tests stretch; a read that waited its
		// whole bound (a second) each time challenged 1.5 s late or more.
		if challenged < 0 {
			t.Fatalf("the standby challenged %v before the deadline", -challenged)
		}
		if bound := 200*time.Millisecond + 500*time.Millisecond; challenged > bound {
			t.Errorf("the standby challenged %v after the deadline, above the bound of %v: a read waited on the dead holder's transaction", challenged, bound)
		}
		if err := holder.EndTransaction(ctx, kgo.TryCommit); err == nil {
			t.Error("the dead holder's renewal committed after the standby took over")
		}
	})
}
