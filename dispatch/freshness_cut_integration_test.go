//go:build integration

package dispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// cutMargin is the safety margin of the partitioned leader. The lease is
// testLease's 3s, renewed every second.
const cutMargin = 500 * time.Millisecond

// cutSlack is how late a device call's context may end after the freshness
// end. The cut is a runtime timer firing plus the wake of the device's
// goroutine; on a loaded two-core machine under the race detector that is a
// few milliseconds, rarely tens. 100ms allows for that and stays well below
// the margin, so a call cut within the slack still ends before the lease
// runs out and a successor may take over.
const cutSlack = 100 * time.Millisecond

// partitionedLeader is a leader in this process whose every Kafka client
// dials through a Partition: the transport's clients and the log reader.
type partitionedLeader struct {
	l         *coordination.Leadership
	d         *dispatch.Dispatcher
	partition *kafkatest.Partition
	lease     time.Duration
	runErr    chan error
}

// leadPartitioned acquires role through a Partition and runs a dispatcher
// with cutMargin. The test's cleanup stops it.
func leadPartitioned(t *testing.T, c cluster, tp topics, role coordination.Role, registry *dispatch.Registry) *partitionedLeader {
	t.Helper()
	p := kafkatest.NewPartition()
	lease := testLease(t)
	transport, err := coordination.NewKafkaTransportWithClientOptions(lease, kgo.SeedBrokers(c.brokers...), p.Option())
	if err != nil {
		t.Fatal(err)
	}
	member, err := coordination.NewMemberID("cut-off")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// As the dispatcher binary: a write that commits within the lead of
	// the renew instant renews the lease, so the cut must end the device
	// call on the freshness of whichever committed last.
	l, err := coordination.AcquireLeadership(ctx, transport, role, member,
		coordination.WithLeaseConfig(lease), coordination.WithPollInterval(100*time.Millisecond),
		coordination.WithRenewalsInWrites(lease.RenewInterval()/4))
	if err != nil {
		transport.Close()
		t.Fatalf("acquire %s: %v", role, err)
	}
	logReader, err := dispatch.NewKafkaLogReader(c.brokers, p.Option())
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.NewDispatcher(l, registry, logReader, append(tp.options(),
		dispatch.WithSafetyMargin(cutMargin), dispatch.WithRetryBackoff(20*time.Millisecond, 100*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	pl := &partitionedLeader{l: l, d: d, partition: p, lease: 3 * time.Second, runErr: make(chan error, 1)}
	go func() { pl.runErr <- d.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		<-pl.runErr
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = l.Resign(rctx)
		cancel()
		transport.Close()
	})
	return pl
}

// freshnessEnd is the end of the leadership's freshness after its last
// committed lease write: the grant instant plus the lease minus the margin.
// GrantedAt is the wall clock in whole milliseconds, read just after the
// monotonic instant that ValidFor counts from, so the true end is within a
// millisecond after this one.
func (pl *partitionedLeader) freshnessEnd() time.Time {
	return time.UnixMilli(pl.l.Lease().GrantedAt).Add(pl.lease - cutMargin)
}

// ctxWatch is a device that holds each call until its context ends, and
// records when each call began and when and why its context ended.
type ctxWatch struct {
	mu     sync.Mutex
	starts []time.Time
	ids    []string

	started chan string
	ended   chan ctxEnd
}

type ctxEnd struct {
	at    time.Time
	cause error
}

func newCtxWatch() *ctxWatch {
	return &ctxWatch{started: make(chan string, 8), ended: make(chan ctxEnd, 8)}
}

func (w *ctxWatch) Dispatch(ctx context.Context, cmd dispatch.Command, _ coordination.FencingToken) (dispatch.Result, error) {
	w.mu.Lock()
	w.starts = append(w.starts, time.Now())
	w.ids = append(w.ids, cmd.ID)
	w.mu.Unlock()
	w.started <- cmd.ID
	<-ctx.Done()
	w.ended <- ctxEnd{at: time.Now(), cause: context.Cause(ctx)}
	// The device wrote before it waited: in doubt.
	return dispatch.Result{}, context.Cause(ctx)
}

func (w *ctxWatch) calls() ([]string, []time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ids...), append([]time.Time(nil), w.starts...)
}

// awaitIssued reads the log until it holds an Issued record for every id.
func awaitIssued(t *testing.T, c cluster, tp topics, ids ...string) {
	t.Helper()
	readLogUntil(t, c, tp, func(entries []dispatch.Entry) bool {
		seen := map[string]bool{}
		for _, e := range entries {
			if e.Kind == dispatch.EntryIssued {
				seen[e.CommandID()] = true
			}
		}
		for _, id := range ids {
			if !seen[id] {
				return false
			}
		}
		return true
	})
}

// awaitQuiet waits until the partitioned leader's dispatcher halts or the
// lease has run out by a few seconds, whichever comes first: long enough
// for any dispatch that the cut failed to stop to show.
func awaitQuiet(t *testing.T, pl *partitionedLeader, end time.Time) {
	t.Helper()
	select {
	case err := <-pl.runErr:
		t.Logf("the cut-off dispatcher halted: %v", err)
		pl.runErr <- err // for the cleanup
	case <-time.After(time.Until(end.Add(pl.lease + 2*time.Second))):
	}
}

// TestPartitionedLeaderDeviceCallEndsWithFreshness cuts every connection of
// a leader to Kafka (no close, no fence: its renewals just go unanswered)
// while a slow device is in a call, and checks that the call's context ends
// by the end of the leadership's freshness, with ErrFreshnessExpired as its
// cause, and that no device call begins after it: the next command of the
// lane, issued before the cut, is never dispatched.
func TestPartitionedLeaderDeviceCallEndsWithFreshness(t *testing.T) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	dev := newCtxWatch()
	registry := dispatch.NewRegistry()
	if err := registry.Register("slow", dev); err != nil {
		t.Fatal(err)
	}
	pl := leadPartitioned(t, c, tp, role, registry)

	for _, id := range []string{"held", "behind"} {
		go func() {
			_, _ = pl.d.Submit(context.Background(), dispatch.Command{ID: id, Device: "slow", Action: "set", Deadline: time.Now().Add(time.Minute)})
		}()
	}
	if id := <-dev.started; id != "held" && id != "behind" {
		t.Fatalf("unexpected call %s", id)
	}
	awaitIssued(t, c, tp, "held", "behind")
	// Renewals commit every second while the call is held; cut between
	// two of them, so the freshness end is neither the first nor a stale
	// one.
	time.Sleep(1500 * time.Millisecond)
	pl.partition.Cut()
	cutAt := time.Now()

	var end ctxEnd
	select {
	case end = <-dev.ended:
	case <-time.After(pl.lease + 5*time.Second):
		t.Fatal("the device call's context did not end after the cut")
	}
	want := pl.freshnessEnd()
	t.Logf("cut %v before the freshness end; the call's ctx ended %v after it (cause: %v)",
		want.Sub(cutAt), end.at.Sub(want), end.cause)
	if !errors.Is(end.cause, dispatch.ErrFreshnessExpired) {
		t.Errorf("ctx cause %v, want ErrFreshnessExpired", end.cause)
	}
	if end.at.Before(want.Add(-time.Millisecond)) {
		t.Errorf("the call was cut %v before the freshness end", want.Sub(end.at))
	}
	if late := end.at.Sub(want); late > cutSlack {
		t.Errorf("the call's ctx ended %v after the freshness end, above the %v slack", late, cutSlack)
	}
	if !want.After(cutAt) {
		t.Errorf("the freshness end %v is not after the cut %v: a renewal committed late or the cut came late", want, cutAt)
	}

	awaitQuiet(t, pl, want)
	ids, starts := dev.calls()
	if len(ids) != 1 {
		t.Errorf("device calls %v, want only the first: nothing dispatched after the freshness ran out", ids)
	}
	for i, s := range starts {
		if s.After(want) {
			t.Errorf("call %s began %v after the freshness end", ids[i], s.Sub(want))
		}
	}
}
