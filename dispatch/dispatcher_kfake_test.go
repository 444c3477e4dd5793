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

// TestDispatcherKfakeSmoke runs a dispatcher over the Kafka transport, the
// log reader and the request source against kfake: commands through Submit
// and through the requests topic reach the recording device after their
// Issued records committed, and the log verifies clean.
//
// No fencing claim rests on this test: kfake does not fence like Kafka (it
// accepts an InitProducerId with a stale epoch, lets a fenced producer's
// abort succeed under transactions v2, opens a transaction on a stale
// produce, compacts past the last stable offset, and ignores
// min.insync.replicas). The fencing tests run on the real cluster under the
// integration tag.
func TestDispatcherKfakeSmoke(t *testing.T) {
	fake := kafkatest.NewFake(t)
	c := cluster{brokers: fake.ListenAddrs(), createTopic: func(t *testing.T, name string) {
		kafkatest.CreateFakeTopic(t, fake, name, 1, nil)
	}}
	tp := c.newTopics(t)
	role := testRole(t)
	server := newRecorder(t)
	logReader, err := dispatch.NewKafkaLogReader(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	registry := dispatch.NewRegistry()
	dev := recorder.NewDevice("valve", server.URL(), "m1").CheckLog(logReader, tp.logPartition(), role.String())
	if err := registry.Register("valve", dev); err != nil {
		t.Fatal(err)
	}
	ld := lead(t, c, tp, role, "m1", registry)
	client := newClient(t, c, tp)

	viaSubmit, viaTopic := ids("submit", 10), ids("topic", 10)
	var wg sync.WaitGroup
	for _, id := range viaSubmit {
		wg.Go(func() {
			out, err := ld.d.Submit(t.Context(), dispatch.Command{ID: id, Device: "valve", Action: "open"})
			if err != nil || out.Status != dispatch.StatusSucceeded {
				t.Errorf("Submit %s: %+v %v", id, out, err)
			}
		})
	}
	for _, id := range viaTopic {
		cmd := dispatch.Command{ID: id, Role: role.String(), Device: "valve", Action: "open", Deadline: time.Now().Add(time.Minute)}
		if err := client.Submit(t.Context(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	all := append(viaSubmit, viaTopic...)
	outcomes, entries := waitSettled(t, c, tp, role.String(), all, 30*time.Second)
	for _, id := range all {
		if outcomes[id].Status != dispatch.StatusSucceeded {
			t.Errorf("%s: %+v", id, outcomes[id])
		}
	}
	dispatches := server.Dispatches()
	if len(dispatches) != len(all) {
		t.Errorf("%d dispatches, want %d", len(dispatches), len(all))
	}
	checkDurableBeforeDispatch(t, entries, dispatches)
	verifyLog(t, entries)
	var intake *dispatch.IntakePosition
	for _, e := range entries {
		if e.Kind == dispatch.EntryIntake {
			intake = e.Intake
		}
		if e.Token == coordination.NoEpoch {
			t.Errorf("offset %d carries no token", e.Offset)
		}
	}
	if intake == nil || intake.NextOffset < int64(len(viaTopic)) {
		t.Errorf("last intake position %+v, want at least %d", intake, len(viaTopic))
	}
}

// holdOnce blocks its first dispatch until the context ends, and acts on
// every later one. It declares a redispatch safe.
type holdOnce struct {
	mu    sync.Mutex
	calls []coordination.FencingToken
	held  chan struct{}
}

func (h *holdOnce) Dispatch(ctx context.Context, _ dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	h.mu.Lock()
	h.calls = append(h.calls, token)
	first := len(h.calls) == 1
	h.mu.Unlock()
	if first {
		close(h.held)
		<-ctx.Done()
		return dispatch.Result{}, ctx.Err()
	}
	return dispatch.Result{Detail: "acted"}, nil
}

func (*holdOnce) RedispatchSafe(dispatch.Command) bool { return true }

// TestTakeoverKfakeSmoke checks the takeover plumbing over Kafka: a leader
// resigns while a dispatch is in flight, and its successor reads the log,
// writes a Redispatched record and dispatches the command under its own
// token. kfake does not fence like Kafka, so this test claims nothing about
// fencing; the process tests on the real cluster do.
func TestTakeoverKfakeSmoke(t *testing.T) {
	fake := kafkatest.NewFake(t)
	c := cluster{brokers: fake.ListenAddrs(), createTopic: func(t *testing.T, name string) {
		kafkatest.CreateFakeTopic(t, fake, name, 1, nil)
	}}
	tp := c.newTopics(t)
	role := testRole(t)
	dev := &holdOnce{held: make(chan struct{})}
	registry := dispatch.NewRegistry()
	if err := registry.Register("valve", dev); err != nil {
		t.Fatal(err)
	}
	a := lead(t, c, tp, role, "a", registry)
	submitted := make(chan error, 1)
	go func() {
		_, err := a.d.Submit(context.Background(), dispatch.Command{ID: "held", Device: "valve", Action: "open"})
		submitted <- err
	}()
	<-dev.held
	rctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_ = a.l.Resign(rctx)
	cancel()
	if err := <-submitted; !errors.Is(err, dispatch.ErrHalted) {
		t.Fatalf("Submit of the held command: %v, want ErrHalted", err)
	}

	lead(t, c, tp, role, "b", registry)
	outcomes, entries := waitSettled(t, c, tp, role.String(), []string{"held"}, 30*time.Second)
	if o := outcomes["held"]; o.Status != dispatch.StatusSucceeded || o.Attempt != 2 {
		t.Errorf("outcome %+v, want succeeded at attempt 2", o)
	}
	dev.mu.Lock()
	calls := append([]coordination.FencingToken(nil), dev.calls...)
	dev.mu.Unlock()
	var redispatched *dispatch.Entry
	for i, e := range entries {
		if e.Kind == dispatch.EntryRedispatched {
			redispatched = &entries[i]
		}
	}
	if redispatched == nil || len(calls) != 2 || calls[1] != redispatched.Token || !calls[1].Supersedes(calls[0]) {
		t.Errorf("calls %v, Redispatched record %+v: want the second dispatch under the successor's record token", calls, redispatched)
	}
	verifyLog(t, entries)
}
