package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	"github.com/krabka-io/krabka-dispatch/test/recorder"
)

// cluster is a Kafka cluster for the dispatcher tests: kfake for the smoke
// tests, the real one under the integration tag.
type cluster struct {
	brokers     []string
	createTopic func(t *testing.T, name string)
}

// topics is a fresh pair of one-partition topics for one test.
type topics struct{ log, requests string }

func (c cluster) newTopics(t *testing.T) topics {
	t.Helper()
	tp := topics{log: kafkatest.UniqueName(t, "log"), requests: kafkatest.UniqueName(t, "requests")}
	c.createTopic(t, tp.log)
	c.createTopic(t, tp.requests)
	return tp
}

func (tp topics) options() []dispatch.Option {
	return []dispatch.Option{dispatch.WithLogTopic(tp.log, 1), dispatch.WithRequestsTopic(tp.requests, 1)}
}

func (tp topics) logPartition() coordination.TopicPartition {
	return coordination.TopicPartition{Topic: tp.log, Partition: 0}
}

// testLease is short, so a takeover takes seconds.
func testLease(t *testing.T) coordination.LeaseConfig {
	t.Helper()
	lease, err := coordination.NewLeaseConfig(3*time.Second, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// leader is a member in this process that holds a role and runs a
// dispatcher.
type leader struct {
	l         *coordination.Leadership
	d         *dispatch.Dispatcher
	transport *coordination.KafkaTransport
	stop      context.CancelFunc
	runErr    chan error
	done      chan struct{}
}

// lead acquires role for member and runs a dispatcher; the test's cleanup
// halts it, resigns and closes the transport.
func lead(t *testing.T, c cluster, tp topics, role coordination.Role, member string, registry *dispatch.Registry, options ...dispatch.Option) *leader {
	t.Helper()
	lease := testLease(t)
	transport, err := coordination.NewKafkaTransport(lease, c.brokers...)
	if err != nil {
		t.Fatal(err)
	}
	id, err := coordination.NewMemberID(member)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// The renewals ride in the dispatcher's writes when one is due, as the
	// dispatcher binary acquires its roles.
	l, err := coordination.AcquireLeadership(ctx, transport, role, id,
		coordination.WithLeaseConfig(lease), coordination.WithPollInterval(100*time.Millisecond),
		coordination.WithRenewalsInWrites(lease.RenewInterval()/4))
	if err != nil {
		transport.Close()
		t.Fatalf("acquire %s for %s: %v", role, member, err)
	}
	logReader, err := dispatch.NewKafkaLogReader(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	source, err := dispatch.NewKafkaRequestSource(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	opts := append(tp.options(), dispatch.WithRequestSource(source), dispatch.WithSafetyMargin(500*time.Millisecond),
		dispatch.WithRetryBackoff(20*time.Millisecond, 100*time.Millisecond))
	d, err := dispatch.NewDispatcher(l, registry, logReader, append(opts, options...)...)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ld := &leader{l: l, d: d, transport: transport, stop: stop, runErr: make(chan error, 1), done: make(chan struct{})}
	var runErr error
	go func() {
		runErr = d.Run(runCtx)
		ld.runErr <- runErr
		source.Close()
		close(ld.done)
	}()
	t.Cleanup(func() {
		stop()
		<-ld.done
		if t.Failed() {
			t.Logf("the dispatcher of %s ended with: %v", member, runErr)
		}
		rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_ = l.Resign(rctx)
		cancel()
		transport.Close()
	})
	return ld
}

// readLog reads the role's committed log.
func readLog(t *testing.T, c cluster, tp topics) []dispatch.Entry {
	t.Helper()
	r, err := dispatch.NewKafkaLogReader(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	// A broker that is away fails a read; the suite shares the cluster with
	// tests that take brokers away, so a read is tried again for a while.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		entries, err := r.ReadLog(ctx, tp.logPartition())
		cancel()
		if err == nil {
			return entries
		}
		if time.Now().After(deadline) || t.Context().Err() != nil {
			t.Fatalf("read the log: %v", err)
		}
		t.Logf("read the log: %v; trying again", err)
		select {
		case <-time.After(500 * time.Millisecond):
		case <-t.Context().Done():
		}
	}
}

// waitSettled polls the committed log until every command of ids has an
// outcome that is terminal or in doubt, and returns the latest of each.
func waitSettled(t *testing.T, c cluster, tp topics, role string, ids []string, timeout time.Duration) (map[string]dispatch.Outcome, []dispatch.Entry) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		entries := readLog(t, c, tp)
		latest := map[string]dispatch.Outcome{}
		for _, e := range entries {
			if e.Kind == dispatch.EntryOutcome && e.Role == role {
				latest[e.Outcome.CommandID] = *e.Outcome
			}
		}
		var missing []string
		for _, id := range ids {
			if _, ok := latest[id]; !ok {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return latest, entries
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d commands have no outcome, such as %v", timeout, len(missing), missing[:min(5, len(missing))])
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// checkDurableBeforeDispatch checks every recorded dispatch against the log:
// the device found the command's Issued record in the committed log when it
// was called, and the token it received is that of the Issued or
// Redispatched record that allowed it.
//
// A transaction has committed when the coordinator has durably recorded the
// decision and answered EndTxn; the markers that make its records visible to
// read_committed readers follow asynchronously. So a device that reads at
// once may miss a record that committed a moment before; it reads again, up
// to recorder.LogLagBound, and the check reports how many had to.
func checkDurableBeforeDispatch(t *testing.T, entries []dispatch.Entry, dispatches []recorder.Dispatch) {
	t.Helper()
	allowed := map[string]map[coordination.FencingToken]bool{}
	for _, e := range entries {
		id := e.CommandID()
		if e.Kind == dispatch.EntryIssued || e.Kind == dispatch.EntryRedispatched {
			if allowed[id] == nil {
				allowed[id] = map[coordination.FencingToken]bool{}
			}
			allowed[id][e.Token] = true
		}
	}
	lagged, maxLag := 0, time.Duration(0)
	defer func() {
		if lagged > 0 {
			t.Logf("%d of %d dispatches found their Issued record only after the transaction markers landed, at most %v later", lagged, len(dispatches), maxLag)
		}
	}()
	for _, d := range dispatches {
		if d.LogChecked && !d.Logged {
			t.Errorf("%s reached %s and its Issued record was not in the committed log within %v", d.CommandID, d.Device, recorder.LogLagBound)
		}
		if d.LogLag > 0 {
			lagged++
			maxLag = max(maxLag, d.LogLag)
		}
		if !allowed[d.CommandID][d.Token] {
			t.Errorf("%s reached %s with token %s, which no Issued or Redispatched record of it carries", d.CommandID, d.Device, d.Token)
		}
	}
}

// verifyLog fails the test for every violation Verify finds.
func verifyLog(t *testing.T, entries []dispatch.Entry) {
	t.Helper()
	for _, v := range dispatch.Verify(entries) {
		t.Errorf("Verify: %s", v)
	}
}

func newRecorder(t *testing.T) *recorder.Server {
	t.Helper()
	s, err := recorder.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func testRole(t *testing.T) coordination.Role {
	t.Helper()
	role, err := coordination.NewRole(kafkatest.UniqueName(t, "role"))
	if err != nil {
		t.Fatal(err)
	}
	return role
}

func newClient(t *testing.T, c cluster, tp topics) *dispatch.Client {
	t.Helper()
	client, err := dispatch.NewClient(c.brokers, dispatch.WithClientLogTopic(tp.log, 1), dispatch.WithClientRequestsTopic(tp.requests, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}
