package coordination_test

import (
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
