//go:build integration

package dispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	"github.com/krabka-io/krabka-dispatch/test/recorder"
)

func realCluster(t *testing.T) cluster {
	t.Helper()
	brokers := kafkatest.Brokers(t)
	return cluster{brokers: brokers, createTopic: func(t *testing.T, name string) {
		kafkatest.CreateTopic(t, brokers, name, 1, nil)
	}}
}

// cancelWatch is a device that blocks until its context ends and reports
// when that happened.
type cancelWatch struct {
	started   chan struct{}
	cancelled chan time.Time
}

func (c *cancelWatch) Dispatch(ctx context.Context, _ dispatch.Command, _ coordination.FencingToken) (dispatch.Result, error) {
	close(c.started)
	<-ctx.Done()
	c.cancelled <- time.Now()
	return dispatch.Result{}, ctx.Err()
}

// TestDispatcherOnCluster drives one leader on the real cluster through a
// stream of commands from Submit and from the requests topic, with
// duplicates, expired deadlines, a failing device that is retried, poison
// commands that are rejected while the rest flow, and finally a halt that
// must cancel a blocked dispatch within 50 ms.
func TestDispatcherOnCluster(t *testing.T) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	server := newRecorder(t)
	server.Behave("flaky", recorder.Behaviour{FailFirst: 2})
	logReader, err := dispatch.NewKafkaLogReader(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	registry := dispatch.NewRegistry()
	for _, name := range []string{"valve", "pump", "flaky"} {
		dev := recorder.NewDevice(name, server.URL(), "m1").CheckLog(logReader, tp.logPartition(), role.String())
		if err := registry.Register(name, dev); err != nil {
			t.Fatal(err)
		}
	}
	blocker := &cancelWatch{started: make(chan struct{}), cancelled: make(chan time.Time, 1)}
	if err := registry.Register("blocker", blocker); err != nil {
		t.Fatal(err)
	}
	ld := lead(t, c, tp, role, "m1", registry)
	client := newClient(t, c, tp)

	// The stream, with poison interleaved.
	viaSubmit, viaTopic := ids("submit", 40), ids("topic", 40)
	poisonSubmit, poisonTopic := ids("poison-submit", 3), ids("poison-topic", 4)
	var wg sync.WaitGroup
	for i, id := range viaSubmit {
		device := []string{"valve", "pump"}[i%2]
		wg.Go(func() {
			out, err := ld.d.Submit(t.Context(), dispatch.Command{ID: id, Device: device, Action: "set"})
			if err != nil || out.Status != dispatch.StatusSucceeded {
				t.Errorf("Submit %s: %+v %v", id, out, err)
			}
		})
	}
	for _, id := range poisonSubmit {
		wg.Go(func() {
			out, err := ld.d.Submit(t.Context(), dispatch.Command{ID: id, Device: "valve", Action: recorder.RejectAction})
			if err != nil || out.Status != dispatch.StatusRejected {
				t.Errorf("poison Submit %s: %+v %v", id, out, err)
			}
		})
	}
	submit := func(cmd dispatch.Command) {
		t.Helper()
		cmd.Role = role.String()
		if cmd.Deadline.IsZero() {
			cmd.Deadline = time.Now().Add(time.Minute)
		}
		if err := client.Submit(t.Context(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range viaTopic {
		submit(dispatch.Command{ID: id, Device: []string{"valve", "pump"}[i%2], Action: "set"})
		if i%13 == 0 {
			submit(dispatch.Command{ID: poisonTopic[i/13], Device: "no-such-device", Action: "set"})
		}
	}
	// Duplicates of commands already sent, through both paths. On the
	// topic they reuse the IDs for other commands: refused, with a warning.
	for _, id := range viaTopic[:5] {
		submit(dispatch.Command{ID: id, Device: "valve", Action: "again"})
	}
	wg.Wait()
	// Through Submit, the same command again gets the first's outcome, and
	// another command under the same ID a conflict.
	for i, id := range viaSubmit[:5] {
		out, err := ld.d.Submit(t.Context(), dispatch.Command{ID: id, Device: []string{"valve", "pump"}[i%2], Action: "set"})
		if err != nil || out.Status != dispatch.StatusSucceeded || out.CommandID != id {
			t.Errorf("duplicate Submit %s: %+v %v", id, out, err)
		}
		var conflict *dispatch.IDConflictError
		if _, err := ld.d.Submit(t.Context(), dispatch.Command{ID: id, Device: "pump", Action: "again"}); !errors.As(err, &conflict) || conflict.ID != id {
			t.Errorf("Submit of another command as %s: %v, want *dispatch.IDConflictError", id, err)
		}
	}
	// Expired before issue, through both paths.
	past := time.Now().Add(-time.Minute)
	out, err := ld.d.Submit(t.Context(), dispatch.Command{ID: "expired-submit", Device: "valve", SubmittedAt: past.Add(-time.Second), Deadline: past})
	if err != nil || out.Status != dispatch.StatusExpired {
		t.Errorf("expired Submit: %+v %v", out, err)
	}
	submit(dispatch.Command{ID: "expired-topic", Device: "valve", SubmittedAt: past.Add(-time.Second), Deadline: past})
	// A failing device, retried until it acts.
	out, err = ld.d.Submit(t.Context(), dispatch.Command{ID: "flaky-1", Device: "flaky", Action: "set"})
	if err != nil || out.Status != dispatch.StatusSucceeded {
		t.Errorf("flaky: %+v %v", out, err)
	}

	all := append(append(append([]string{}, viaSubmit...), viaTopic...), poisonTopic...)
	all = append(all, "expired-topic")
	outcomes, entries := waitSettled(t, c, tp, role.String(), all, time.Minute)
	for _, id := range append(viaSubmit, viaTopic...) {
		if outcomes[id].Status != dispatch.StatusSucceeded {
			t.Errorf("%s: %+v", id, outcomes[id])
		}
	}
	for _, id := range poisonTopic {
		if outcomes[id].Status != dispatch.StatusRejected {
			t.Errorf("poison %s: %+v", id, outcomes[id])
		}
	}
	if outcomes["expired-topic"].Status != dispatch.StatusExpired {
		t.Errorf("expired-topic: %+v", outcomes["expired-topic"])
	}

	calls := map[string]int{}
	for _, d := range server.Dispatches() {
		calls[d.Device+"/"+d.CommandID]++
	}
	for key, n := range calls {
		want := 1
		if key == "flaky/flaky-1" {
			want = 3
		}
		if n != want {
			t.Errorf("%s dispatched %d times, want %d", key, n, want)
		}
	}
	for _, id := range []string{"expired-submit", "expired-topic"} {
		if calls["valve/"+id] != 0 {
			t.Errorf("expired command %s was dispatched", id)
		}
	}
	checkDurableBeforeDispatch(t, entries, server.Dispatches())

	// Halt: a dispatch that blocks until its context ends is cancelled
	// within 50 ms of the leadership's end, and nothing more is written.
	halted := make(chan error, 1)
	go func() {
		_, err := ld.d.Submit(context.Background(), dispatch.Command{ID: "blocked", Device: "blocker", Action: "hold"})
		halted <- err
	}()
	<-blocker.started
	// The blocked command's Issued record committed before its dispatch, and
	// every record queued before it committed with it or earlier; a reader
	// sees the commit once its markers land, a moment after the commit.
	before := len(readLogUntil(t, c, tp, func(entries []dispatch.Entry) bool {
		for _, e := range entries {
			if e.Kind == dispatch.EntryIssued && e.CommandID() == "blocked" {
				return true
			}
		}
		return false
	}))
	ended := make(chan time.Time, 1)
	go func() {
		<-ld.l.Done()
		ended <- time.Now()
	}()
	rctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_ = ld.l.Resign(rctx)
	cancel()
	doneAt, cancelledAt := <-ended, <-blocker.cancelled
	if took := cancelledAt.Sub(doneAt); took > 50*time.Millisecond {
		t.Errorf("the blocked dispatch was cancelled %v after Done closed, above 50ms", took)
	} else {
		t.Logf("halt: the blocked dispatch saw its cancel %v after Done closed", took)
	}
	if err := <-halted; !errors.Is(err, dispatch.ErrHalted) {
		t.Errorf("Submit of the blocked command returned %v, want ErrHalted", err)
	}
	if err := <-ld.runErr; !errors.Is(err, coordination.ErrNotHeld) {
		t.Errorf("Run returned %v, want the resignation", err)
	}
	final := readLog(t, c, tp)
	if len(final) != before {
		t.Errorf("%d records written after the halt", len(final)-before)
	}
	verifyLog(t, final)
}

// readLogUntil reads the log until it satisfies done, for a record whose
// commit a reader sees only once the commit markers land.
func readLogUntil(t *testing.T, c cluster, tp topics, done func([]dispatch.Entry) bool) []dispatch.Entry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries := readLog(t, c, tp)
		if done(entries) {
			return entries
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log of %d records never showed the awaited record", len(entries))
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}
