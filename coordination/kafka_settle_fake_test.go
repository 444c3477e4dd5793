package coordination_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// settleLog records, on a kfake cluster, the DescribeTransactions questions
// of a transport and, for each produce, how many questions came before it.
type settleLog struct {
	mu        sync.Mutex
	questions int
	produces  []int
}

// watch has c answer each question with answer(n), n counting from 1, or
// as kfake would when answer returns nil, and notes each produce.
func (l *settleLog) watch(c *kfake.Cluster, answer func(req *kmsg.DescribeTransactionsRequest, n int) *kmsg.DescribeTransactionsResponse) {
	c.ControlKey(int16(kmsg.DescribeTransactions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		l.mu.Lock()
		l.questions++
		n := l.questions
		l.mu.Unlock()
		if resp := answer(kreq.(*kmsg.DescribeTransactionsRequest), n); resp != nil {
			return resp, nil, true
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		l.mu.Lock()
		l.produces = append(l.produces, l.questions)
		l.mu.Unlock()
		return nil, nil, false
	})
}

func (l *settleLog) counts() (questions int, produces []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.questions, append([]int(nil), l.produces...)
}

// describeAs answers a question with one transaction in state, or with
// code.
func describeAs(req *kmsg.DescribeTransactionsRequest, state string, code int16) *kmsg.DescribeTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	s := kmsg.NewDescribeTransactionsResponseTransactionState()
	s.TransactionalID, s.State, s.ErrorCode = req.TransactionalIDs[0], state, code
	resp.TransactionStates = append(resp.TransactionStates, s)
	return resp
}

// answering returns a kfake environment whose coordinator answers every
// DescribeTransactions with one transaction in state, or with code, and the
// log of the questions and produces.
func answering(t *testing.T, state string, code int16) (kafkaEnv, *settleLog) {
	t.Helper()
	env, c := fakeEnv(t)
	log := &settleLog{}
	log.watch(c, func(req *kmsg.DescribeTransactionsRequest, _ int) *kmsg.DescribeTransactionsResponse {
		return describeAs(req, state, code)
	})
	return env, log
}

// writeTwice commits two guarded writes of one record on a fresh role and
// topic, and fails the test on an error.
func writeTwice(t *testing.T, env kafkaEnv) { writeN(t, env, 2) }

// writeN commits n guarded writes of one record on a fresh role and topic,
// and fails the test on an error.
func writeN(t *testing.T, env kafkaEnv, n int) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	tr := env.transport(t, testLease(t))
	role := uniqueRole(t)
	topic := kafkatest.UniqueName(t, "t")
	env.createTopic(t, topic, 1)
	token, err := tr.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		records := []coordination.GuardedRecord{{Partition: coordination.TopicPartition{Topic: topic}, Value: []byte("x")}}
		if token, err = tr.WriteGuarded(ctx, role, token, records); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
}

// TestKafkaSettleAsksUntilComplete: after a commit the transport asks the
// coordinator until it describes the transaction as complete, and the
// role's next transaction produces only after that answer.
func TestKafkaSettleAsksUntilComplete(t *testing.T) {
	env, c := fakeEnv(t)
	var log settleLog
	log.watch(c, func(req *kmsg.DescribeTransactionsRequest, n int) *kmsg.DescribeTransactionsResponse {
		switch {
		case n <= 3:
			return describeAs(req, "PrepareCommit", 0)
		case n == 4:
			return describeAs(req, "CompleteCommit", 0)
		}
		return nil
	})
	writeTwice(t, env)
	questions, produces := log.counts()
	if len(produces) != 2 || produces[0] != 0 || produces[1] != 4 {
		t.Fatalf("questions before each produce: %v; want [0 4]: the second transaction begins once the fourth answer said the first was complete", produces)
	}
	if questions < 4 {
		t.Fatalf("%d questions, want at least 4", questions)
	}
}

// TestKafkaSettleEndsAtARefusal: a principal without Describe on the
// transactional id is refused the question; the settle ends at the refusal,
// the producer asks no more, and the writes go on as without it.
func TestKafkaSettleEndsAtARefusal(t *testing.T) {
	env, log := answering(t, "", kerr.TransactionalIDAuthorizationFailed.Code)
	writeN(t, env, 3)
	if questions, produces := log.counts(); questions != 1 || len(produces) != 3 || produces[1] != 1 {
		t.Fatalf("%d questions, %v before each produce; want one question, after the first commit and before the second produce, and none after the refusal", questions, produces)
	}
}

// TestKafkaSettleAsksAgainAfterARetriableError: a coordinator that is
// loading, or that answers UNKNOWN_SERVER_ERROR, refuses nothing; the
// producer asks again after the next commit.
func TestKafkaSettleAsksAgainAfterARetriableError(t *testing.T) {
	for _, ke := range []*kerr.Error{kerr.CoordinatorLoadInProgress, kerr.UnknownServerError} {
		code := ke.Code
		t.Run(ke.Message, func(t *testing.T) {
			env, log := answering(t, "", code)
			writeN(t, env, 3)
			if _, produces := log.counts(); len(produces) != 3 || produces[1] < 1 || produces[2] <= produces[1] {
				t.Fatalf("questions before each produce: %v; want some after the first commit and more after the second", produces)
			}
		})
	}
}

// TestKafkaSettleBounded: a coordinator that never describes the
// transaction as complete holds the next write up to the settle's bound,
// not forever: the second write commits after a bounded number of
// questions.
func TestKafkaSettleBounded(t *testing.T) {
	env, log := answering(t, "PrepareCommit", 0)
	writeTwice(t, env)
	// A question every millisecond for 50 ms at most, each one a round
	// trip: fewer than 50 a settle.
	if _, produces := log.counts(); len(produces) != 2 || produces[1] < 2 || produces[1] > 50 {
		t.Fatalf("questions before each produce: %v; want the second after 2 to 50", produces)
	}
}

// TestSettleTransactionErrors: the exported call reports how a settle
// ended: nil at a complete state, the refusal that ended it, and the bound
// that passed while the coordinator still described the end as pending.
func TestSettleTransactionErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state string
		code  int16
		want  error
	}{
		{"complete", "CompleteCommit", 0, nil},
		{"refused", "", kerr.TransactionalIDAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed},
		{"pending past the bound", "PrepareCommit", 0, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := answering(t, tc.state, tc.code)
			err := coordination.SettleTransaction(testCtx(t, 30*time.Second), env.client(t), "settle")
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("SettleTransaction = %v, want %v", err, tc.want)
			}
		})
	}
}
