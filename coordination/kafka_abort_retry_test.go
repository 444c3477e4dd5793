package coordination_test

import (
	"errors"
	"strings"
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
// ending the leadership; the checks of testGuardedWriteAborts hold: nothing
// of the aborted write is committed, the token does not go back, and the
// next write commits.
//
// kfake stands in for the broker that answers badly; the broker loss itself
// is TestKafkaBrokerLossDuringRenewal on the real cluster.
func TestKafkaAbortRetriedAfterFailedEndTxn(t *testing.T) {
	env, c := fakeEnv(t)
	var refused atomic.Int32
	guardedWriteAborts(t, env, func() {
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
	})
	if n := refused.Load(); n != 1 {
		t.Fatalf("the broker refused %d aborts, want 1: the test did not reach the retry", n)
	}
}

// TestKafkaAbortRetryRefusedByFence: the EndTxn that aborts a failed
// guarded write fails once with an answer that confirms nothing, and the
// re-initialization that franz-go's retry sends is refused with a fence, as
// when another member took the role meanwhile. The write reports ErrFenced,
// the leadership's expected end, rather than an unknown outcome.
func TestKafkaAbortRetryRefusedByFence(t *testing.T) {
	env, c := fakeEnv(t)
	ctx := testCtx(t, 30*time.Second)
	tr := env.transport(t, testLease(t))
	role := uniqueRole(t)
	topic := kafkatest.UniqueName(t, "t")
	env.createTopic(t, topic, 1)
	token, err := tr.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	var refused, fenced atomic.Int32
	c.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.EndTxnRequest)
		if req.Commit || refused.Load() > 0 {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.InitProducerID), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if refused.Load() == 0 {
			return nil, nil, false
		}
		fenced.Add(1)
		resp := kreq.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ProducerFenced.Code
		return resp, nil, true
	})
	_, err = tr.WriteGuarded(ctx, role, token, doomedWrite(topic, token))
	if refused.Load() != 1 || fenced.Load() == 0 {
		t.Fatalf("the broker refused %d aborts and fenced %d re-initializations: the test did not reach the retry (%v)", refused.Load(), fenced.Load(), err)
	}
	if !errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrOutcomeUnknown) {
		t.Fatalf("abort whose retry was fenced: %v, want ErrFenced alone", err)
	}
	// The error names the step of the abort that failed: with franz-go
	// 1.22 the retried EndTxn returns once the producer's re-initialization
	// was sent, and the fence comes with the read of the token after it.
	if !strings.Contains(err.Error(), ": read the token after the abort: ") {
		t.Fatalf("abort whose retry was fenced: %q does not name the step that met the fence", err)
	}
}
