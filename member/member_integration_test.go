//go:build integration

package member_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/member"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// dispatched is one call of a device.
type dispatched struct {
	member string
	id     string
	token  coordination.FencingToken
}

// ledger records every dispatch of every member; a command listed in hold
// blocks at the device until release closes.
type ledger struct {
	mu      sync.Mutex
	calls   []dispatched
	hold    string
	started chan struct{}
	release chan struct{}
}

func (g *ledger) calls0() []dispatched {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]dispatched(nil), g.calls...)
}

// device is one member's device over the shared ledger.
type device struct {
	g      *ledger
	member string
}

func (d device) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	d.g.mu.Lock()
	d.g.calls = append(d.g.calls, dispatched{member: d.member, id: cmd.ID, token: token})
	d.g.mu.Unlock()
	if cmd.ID == d.g.hold {
		close(d.g.started)
		select {
		case <-d.g.release:
		case <-ctx.Done():
			return dispatch.Result{}, ctx.Err()
		}
	}
	return dispatch.Result{Detail: d.member}, nil
}

type running struct {
	m        *member.Member
	events   chan member.Event
	cancel   context.CancelFunc
	finished chan struct{} // closed when Run returned, with err
	err      error
}

// next waits for the member's next event and checks its kind.
func (r *running) next(t *testing.T, kind member.EventKind) member.Event {
	t.Helper()
	select {
	case e := <-r.events:
		if e.Kind != kind {
			t.Fatalf("%s: event %s (%v), want %s", e.Member, e.Kind, e.Err, kind)
		}
		return e
	case <-time.After(60 * time.Second):
		t.Fatalf("no %s event", kind)
		return member.Event{}
	}
}

// stop cancels Run's context and waits for Run.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	within(t, "Run to return", r.finished)
	if r.err != nil {
		t.Errorf("Run: %v", r.err)
	}
}

// within waits for done, for at most a minute.
func within[T any](t *testing.T, what string, done <-chan T) T {
	t.Helper()
	select {
	case v := <-done:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("waited a minute for %s", what)
		var zero T
		return zero
	}
}

// TestHandOverOnStop runs two members on the real cluster. The leader is
// stopped (its context cancelled, as SIGTERM does) while a command is at its
// device: it stops intake from both sides, lets that command finish, and
// resigns; the standby takes over at once. A request produced to the
// requests topic during the drain is dispatched by the new leader, not the
// draining one, and every command has exactly one dispatch and a succeeded
// outcome. Each member's events come in order.
func TestHandOverOnStop(t *testing.T) {
	locking := time.Now()
	brokers := kafkatest.Brokers(t)
	t.Logf("the cluster's fault lock was taken after %v", time.Since(locking).Round(time.Millisecond))
	logTopic := kafkatest.UniqueName(t, "log")
	requestsTopic := kafkatest.UniqueName(t, "requests")
	kafkatest.CreateTopic(t, brokers, logTopic, 1, nil)
	kafkatest.CreateTopic(t, brokers, requestsTopic, 1, nil)
	role, err := coordination.NewRole(kafkatest.UniqueName(t, "role"))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := coordination.NewLeaseConfig(3*time.Second, 500*time.Millisecond, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	g := &ledger{hold: "slow", started: make(chan struct{}), release: make(chan struct{})}

	start := func(name string) *running {
		t.Helper()
		tr, err := coordination.NewKafkaTransport(lease, brokers...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		logReader, err := dispatch.NewKafkaLogReader(brokers)
		if err != nil {
			t.Fatal(err)
		}
		source, err := dispatch.NewKafkaRequestSource(brokers)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(source.Close)
		reg := dispatch.NewRegistry()
		if err := reg.Register("valve", device{g: g, member: name}); err != nil {
			t.Fatal(err)
		}
		id, _ := coordination.NewMemberID(name)
		r := &running{events: make(chan member.Event, 32), finished: make(chan struct{})}
		r.m, err = member.New(tr, role, id,
			member.WithCoordination(coordination.WithLeaseConfig(lease), coordination.WithPollInterval(50*time.Millisecond)),
			member.WithDispatcher(reg, logReader,
				dispatch.WithLogTopic(logTopic, 1),
				dispatch.WithRequestsTopic(requestsTopic, 1),
				dispatch.WithRequestSource(source),
				dispatch.WithSafetyMargin(500*time.Millisecond)),
			member.WithDrainTimeout(30*time.Second),
			member.WithEventHandler(func(e member.Event) { r.events <- e }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() {
			defer close(r.finished)
			r.err = r.m.Run(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-r.finished:
			case <-time.After(time.Minute):
				t.Errorf("%s: Run did not return a minute after its context ended", name)
			}
		})
		return r
	}
	client, err := dispatch.NewClient(brokers, dispatch.WithClientLogTopic(logTopic, 1), dispatch.WithClientRequestsTopic(requestsTopic, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	submit := func(id string) {
		t.Helper()
		now := time.Now()
		cmd := dispatch.Command{ID: id, Role: role.String(), Device: "valve", Action: "open", SubmittedAt: now, Deadline: now.Add(5 * time.Minute)}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Submit(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(id string) dispatch.Outcome {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := client.Wait(ctx, role.String(), id)
		if err != nil {
			t.Fatalf("waiting for %s: %v", id, err)
		}
		return out
	}

	began := time.Now()
	a := start("a")
	first := a.next(t, member.EventElected)
	aReady := a.next(t, member.EventReady)
	t.Logf("a elected after %v, ready %v later", first.At.Sub(began).Round(time.Millisecond), aReady.At.Sub(first.At).Round(time.Millisecond))
	if s := a.m.Status(); !s.Leading() || !s.Recovered() || s.Authority.Term != first.Term {
		t.Fatalf("leader status %+v", s)
	}
	b := start("b")

	submit("before")
	if out := wait("before"); out.Status != dispatch.StatusSucceeded || out.Result.Detail != "a" {
		t.Fatalf("before: %+v, want succeeded by a", out)
	}

	// slow reaches a's device through the API side and stays there.
	slowDone := make(chan error, 1)
	d := a.m.Dispatcher()
	go func() {
		_, err := d.Submit(context.Background(), dispatch.Command{ID: "slow", Device: "valve", Action: "open"})
		slowDone <- err
	}()
	within(t, "slow to reach the device", g.started)

	a.cancel() // SIGTERM
	a.next(t, member.EventDraining)
	if s := a.m.Status(); s.Phase != member.PhaseDraining || !s.Leading() {
		t.Errorf("status while draining: %+v", s)
	}
	// Both intakes are closed during the drain.
	if _, err := d.Submit(context.Background(), dispatch.Command{ID: "api-late", Device: "valve", Action: "open"}); !errors.Is(err, dispatch.ErrIntakeStopped) {
		t.Errorf("Submit during the drain: %v, want ErrIntakeStopped", err)
	}
	submit("late")
	// The draining leader's intake would have taken late well within this
	// while, were it still reading: there is no event to wait for when the
	// point is that nothing happens.
	time.Sleep(2 * time.Second)
	if _, ok := d.Lookup("late"); ok {
		t.Error("the draining leader took late from the requests topic")
	}
	close(g.release)
	if err := within(t, "slow to finish", slowDone); err != nil {
		t.Errorf("slow: %v", err)
	}
	resigned := a.next(t, member.EventResigned)
	a.next(t, member.EventStopped)
	a.stop(t)

	next := b.next(t, member.EventElected)
	bReady := b.next(t, member.EventReady)
	t.Logf("b elected %v after a resigned, ready %v later", next.At.Sub(resigned.At).Round(time.Millisecond), bReady.At.Sub(next.At).Round(time.Millisecond))
	if next.Term.Compare(first.Term) <= 0 {
		t.Errorf("b leads in term %s after %s", next.Term, first.Term)
	}
	if took := next.At.Sub(resigned.At); took > lease.Duration() {
		t.Errorf("b took over %v after the resignation, no faster than the lease", took)
	}

	for id, by := range map[string]string{"before": "a", "slow": "a", "late": "b"} {
		out := wait(id)
		if out.Status != dispatch.StatusSucceeded || out.Result.Detail != by {
			t.Errorf("%s: %+v, want succeeded by %s", id, out, by)
		}
	}
	count := map[string]int{}
	for _, c := range g.calls0() {
		count[c.id]++
	}
	for _, id := range []string{"before", "slow", "late"} {
		if count[id] != 1 {
			t.Errorf("%s dispatched %d times, want once", id, count[id])
		}
	}
	if count["api-late"] != 0 {
		t.Error("the command refused during the drain was dispatched")
	}
	entries, err := client.ReadLog(context.Background(), role.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range dispatch.Verify(entries) {
		t.Errorf("audit: %v", v)
	}
	b.stop(t)
	b.next(t, member.EventDraining)
	b.next(t, member.EventResigned)
	b.next(t, member.EventStopped)
}
