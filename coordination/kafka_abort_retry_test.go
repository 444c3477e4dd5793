package coordination_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestKafkaAbortRetriedAfterFailedEndTxn: the EndTxn that aborts a failed
// guarded write fails once with an answer that confirms nothing, as when the
// transaction coordinator's broker dies under it. The transport retries the
// abort, which re-initializes the producer at its own epoch instead of
// ending the leadership; nothing of the aborted write is committed, the token
// does not go back, and the next write commits.
//
// kfake stands in for the broker that answers badly; the broker loss itself
// is TestKafkaBrokerLossDuringRenewal on the real cluster.
func TestKafkaAbortRetriedAfterFailedEndTxn(t *testing.T) {
	c := kafkatest.NewFake(t)
	env := kafkaEnv{
		name:    "kfake",
		brokers: c.ListenAddrs(),
		bumps:   true,
		createTopic: func(t *testing.T, name string, partitions int) {
			kafkatest.CreateFakeTopic(t, c, name, partitions, nil)
		},
	}
	ctx := testCtx(t, 60*time.Second)
	tr := env.transport(t, testLease(t))
	role := uniqueRole(t)
	topic := kafkatest.UniqueName(t, "t")
	env.createTopic(t, topic, 1)

	token, err := tr.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}

	var refused atomic.Int32
	c.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.EndTxnRequest)
		if req.Commit {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil, true
	})

	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	next, err := tr.WriteGuarded(short, role, token, []coordination.GuardedRecord{
		{Partition: coordination.TopicPartition{Topic: topic, Partition: 0}, Value: tokenValue("doomed", token)},
		{Partition: coordination.TopicPartition{Topic: topic, Partition: 7}, Value: tokenValue("missing", token)},
	})
	cancel()
	if refused.Load() != 1 {
		t.Fatalf("the broker refused %d aborts, want 1: the test did not reach the retry", refused.Load())
	}
	if err == nil {
		t.Fatal("a write to a missing partition succeeded")
	}
	if errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrOutcomeUnknown) {
		t.Fatalf("an abort that failed once ended the producer: %v", err)
	}
	if next.Compare(token) < 0 {
		t.Fatalf("after the abort the token went back from %s to %s", token, next)
	}
	assertDescribed(ctx, t, tr, role, next)

	after, err := tr.WriteGuarded(ctx, role, next, []coordination.GuardedRecord{
		{Partition: coordination.TopicPartition{Topic: topic, Partition: 0}, Value: tokenValue("kept", next)},
	})
	if err != nil {
		t.Fatalf("write after the retried abort: %v", err)
	}
	if !after.Supersedes(next) && after != next {
		t.Fatalf("the token went back from %s to %s", next, after)
	}
	got := readCommitted(t, env, topic, 0)
	if len(got) != 1 {
		t.Fatalf("%s[0] holds %d committed records, want only the one after the abort", topic, len(got))
	}
	if prefix, _ := valueToken(t, got[0].Value); prefix != "kept" {
		t.Fatalf("committed %q; the aborted record leaked", got[0].Value)
	}
}
