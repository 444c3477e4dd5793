package member

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// okDevice succeeds at once and remembers the tokens it was given.
type okDevice struct {
	mu     sync.Mutex
	tokens map[string]coordination.FencingToken
}

func (d *okDevice) Dispatch(_ context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tokens[cmd.ID] = token
	return dispatch.Result{Detail: "done"}, nil
}

type started struct {
	m      *Member
	cancel context.CancelFunc
	done   chan error
}

// panicDevice panics on the command "boom" and succeeds on every other.
type panicDevice struct{}

func (panicDevice) Dispatch(_ context.Context, cmd dispatch.Command, _ coordination.FencingToken) (dispatch.Result, error) {
	if cmd.ID == "boom" {
		panic("device bug")
	}
	return dispatch.Result{Detail: "done"}, nil
}

func startMember(t *testing.T, brokers []string, id string, peers map[string]string, events chan<- Event, devices ...dispatch.Device) *started {
	t.Helper()
	return startMemberWith(t, brokers, id, peers, events, nil, devices...)
}

// startMemberWith is startMember with configure, when set, called on the
// member's config before New.
func startMemberWith(t *testing.T, brokers []string, id string, peers map[string]string, events chan<- Event, configure func(*Config), devices ...dispatch.Device) *started {
	t.Helper()
	lease, err := coordination.NewLeaseConfig(2*time.Second, 500*time.Millisecond, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := coordination.NewKafkaTransport(lease, brokers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	logReader, err := dispatch.NewKafkaLogReader(brokers)
	if err != nil {
		t.Fatal(err)
	}
	reg := dispatch.NewRegistry()
	var dev dispatch.Device = &okDevice{tokens: map[string]coordination.FencingToken{}}
	if len(devices) > 0 {
		dev = devices[0]
	}
	if err := reg.Register("dev", dev); err != nil {
		t.Fatal(err)
	}
	role, _ := coordination.NewRole("r")
	mid, _ := coordination.NewMemberID(id)
	cfg := Config{
		Transport: tr, Role: role, Member: mid, Registry: reg, Log: logReader, Peers: peers,
		Coordination:    []coordination.Option{coordination.WithLeaseConfig(lease), coordination.WithPollInterval(50 * time.Millisecond)},
		PollInterval:    50 * time.Millisecond,
		Dispatch:        []dispatch.Option{dispatch.WithSafetyMargin(300 * time.Millisecond)},
		ShutdownTimeout: time.Second,
		OnEvent:         func(e Event) { events <- e },
	}
	if configure != nil {
		configure(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- m.Run(ctx) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *started) stop(t *testing.T) {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if err := <-s.done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// fakeCluster starts an in-process cluster with the log and requests
// topics of the defaults, and returns its addresses.
func fakeCluster(t *testing.T) []string {
	t.Helper()
	cluster := kafkatest.NewFake(t)
	kafkatest.CreateFakeTopic(t, cluster, dispatch.DefaultLogTopic, dispatch.DefaultTopicPartitions, nil)
	kafkatest.CreateFakeTopic(t, cluster, dispatch.DefaultRequestsTopic, dispatch.DefaultTopicPartitions, nil)
	return cluster.ListenAddrs()
}

func waitEvent(t *testing.T, events <-chan Event, kind EventKind) Event {
	t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		select {
		case e := <-events:
			if e.Kind == kind {
				return e
			}
		case <-timer.C:
			t.Fatalf("no %s event", kind)
		}
	}
}

func TestLeadRedirectHandOver(t *testing.T) {
	brokers := fakeCluster(t)
	peers := map[string]string{"a": "http://127.0.0.1:1", "b": "http://127.0.0.1:2"}
	events := make(chan Event, 16)

	a := startMember(t, brokers, "a", peers, events)
	elected := waitEvent(t, events, EventElected)
	if elected.Member != "a" {
		t.Fatalf("%s elected, want a", elected.Member)
	}
	b := startMember(t, brokers, "b", peers, events)

	// The standby names the leader and its URL once it has read the role.
	deadline := time.Now().Add(30 * time.Second)
	for b.m.Leadership().Holder != "a" || b.m.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("standby view %+v", b.m.Leadership())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := b.m.Leadership().Term; got != elected.Term {
		t.Errorf("the standby shows term %s, the leader's is %s", got, elected.Term)
	}
	_, err := b.m.Submit(context.Background(), dispatch.Command{ID: "x", Device: "dev", Action: "go"}, 0)
	var nl *httpapi.NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != "a" || nl.LeaderURL != "http://127.0.0.1:1" {
		t.Fatalf("standby Submit: %v", err)
	}

	st, err := a.m.Submit(context.Background(), dispatch.Command{ID: "c1", Device: "dev", Action: "go"}, 10*time.Second)
	if err != nil || st.State != dispatch.StatusSucceeded.String() || st.Detail != "done" {
		t.Fatalf("leader Submit: %+v, %v", st, err)
	}
	if got := a.m.Recent(10); len(got) != 1 || got[0].ID != "c1" {
		t.Errorf("recent %+v", got)
	}
	if l := b.m.Leadership(); l.State != httpapi.StateStandby {
		t.Errorf("standby state %q", l.State)
	}
	// The leader's submission settled, so its dispatcher recovered.
	if l := a.m.Leadership(); !l.Leader || l.State != httpapi.StateLeading || l.Token == "" || l.Term != elected.Term || l.LeaseRemainingMS <= 0 {
		t.Errorf("leader view %+v, want term %s", l, elected.Term)
	}
	if auth, ok := a.m.Leading(); !ok || auth.Term != elected.Term {
		t.Errorf("Leading = %s, %v; want term %s", auth, ok, elected.Term)
	}
	// A malformed command is refused before it is accepted.
	if _, err := a.m.Submit(context.Background(), dispatch.Command{ID: "", Device: "dev"}, 0); err == nil {
		t.Error("a command without an ID was accepted")
	}
	// c1 again, the same command: its state, not a second dispatch.
	if st, err := a.m.Submit(context.Background(), dispatch.Command{ID: "c1", Device: "dev", Action: "go"}, 0); err != nil || st.State != dispatch.StatusSucceeded.String() {
		t.Errorf("c1 again: %+v, %v", st, err)
	}
	// c1 reused for another command, and a command for no device: refused
	// before anything is written.
	var conflict *dispatch.IDConflictError
	if _, err := a.m.Submit(context.Background(), dispatch.Command{ID: "c1", Device: "dev", Action: "stop"}, 0); !errors.As(err, &conflict) {
		t.Errorf("c1 reused: %v, want *dispatch.IDConflictError", err)
	}
	var unknown *dispatch.UnknownDeviceError
	if _, err := a.m.Submit(context.Background(), dispatch.Command{ID: "c2", Device: "nowhere", Action: "go"}, 0); !errors.As(err, &unknown) {
		t.Errorf("unknown device: %v, want *dispatch.UnknownDeviceError", err)
	}
	if got := a.m.Recent(10); len(got) != 1 {
		t.Errorf("recent %+v, want c1 alone", got)
	}

	// Stopping the leader resigns; the standby takes over well before the
	// lease would have run out, and learns of c1 from the log.
	stoppedAt := time.Now()
	a.stop(t)
	waitEvent(t, events, EventResigned)
	next := waitEvent(t, events, EventElected)
	if next.Member != "b" || next.Term.Compare(elected.Term) <= 0 {
		t.Fatalf("next leader %s with term %s after term %s", next.Member, next.Term, elected.Term)
	}
	if took := next.At.Sub(stoppedAt); took > 2*time.Second {
		t.Errorf("handover took %v, longer than the lease", took)
	}
	st, ok := b.m.Command("c1")
	if !ok || st.State != dispatch.StatusSucceeded.String() {
		t.Errorf("the new leader's view of c1: %+v %v", st, ok)
	}
}

// TestDispatcherPanicResignsAndLeadsAgain: a panic in the dispatcher (here a
// device's) ends the dispatcher, and the member gives the role up at once
// instead of renewing a lease it no longer dispatches under. It competes
// again, its next dispatcher records the command in doubt, and it takes and
// dispatches the next command.
func TestDispatcherPanicResignsAndLeadsAgain(t *testing.T) {
	brokers := fakeCluster(t)
	events := make(chan Event, 16)
	a := startMember(t, brokers, "a", nil, events, panicDevice{})
	first := waitEvent(t, events, EventElected)

	if st, err := a.m.Submit(context.Background(), dispatch.Command{ID: "boom", Device: "dev", Action: "go"}, 10*time.Second); err == nil && st.State == dispatch.StatusSucceeded.String() {
		t.Error("the command whose dispatch panicked succeeded")
	}
	deposed := waitEvent(t, events, EventDeposed)
	var perr *dispatch.PanicError
	if !errors.As(deposed.Err, &perr) {
		t.Fatalf("deposed with %v, want the dispatcher's *PanicError", deposed.Err)
	}
	again := waitEvent(t, events, EventElected)
	if !again.Token.Supersedes(first.Token) {
		t.Fatalf("elected again under %s after %s", again.Token, first.Token)
	}
	// A resignation lets the member compete at once; waiting out the lease
	// would take its whole 2 s.
	if took := again.At.Sub(deposed.At); took > time.Second {
		t.Errorf("elected again %v after the panic: the lease ran out rather than being given up", took)
	}
	st, err := a.m.Submit(context.Background(), dispatch.Command{ID: "after", Device: "dev", Action: "go"}, 10*time.Second)
	if err != nil || st.State != dispatch.StatusSucceeded.String() {
		t.Fatalf("a command after the panic: %+v %v", st, err)
	}
	if st, ok := a.m.Command("boom"); !ok || st.State != dispatch.StatusInDoubt.String() {
		t.Errorf("the command whose dispatch panicked: %+v %v, want in doubt", st, ok)
	}
}

// gateDevice holds the command "slow" until release closes.
type gateDevice struct {
	started chan struct{}
	release chan struct{}
}

func (g *gateDevice) Dispatch(ctx context.Context, cmd dispatch.Command, _ coordination.FencingToken) (dispatch.Result, error) {
	if cmd.ID == "slow" {
		close(g.started)
		select {
		case <-g.release:
		case <-ctx.Done():
			return dispatch.Result{}, ctx.Err()
		}
	}
	return dispatch.Result{Detail: "done"}, nil
}

// TestStopRefusesSubmissionsWhileDraining: once a stopping leader drains,
// the API refuses new commands as a member that does not lead does, and is
// not ready for them; the command in flight finishes before the member
// resigns.
func TestStopRefusesSubmissionsWhileDraining(t *testing.T) {
	brokers := fakeCluster(t)
	events := make(chan Event, 16)
	dev := &gateDevice{started: make(chan struct{}), release: make(chan struct{})}
	a := startMemberWith(t, brokers, "a", nil, events, func(c *Config) { c.ShutdownTimeout = 30 * time.Second }, dev)
	waitEvent(t, events, EventReady)

	if _, err := a.m.Submit(context.Background(), dispatch.Command{ID: "slow", Device: "dev", Action: "go"}, 0); err != nil {
		t.Fatal(err)
	}
	<-dev.started
	a.cancel()
	a.cancel = nil
	waitEvent(t, events, EventDraining)
	_, err := a.m.Submit(context.Background(), dispatch.Command{ID: "late", Device: "dev", Action: "go"}, 0)
	var nl *httpapi.NotLeaderError
	if !errors.As(err, &nl) {
		t.Errorf("Submit while draining: %v, want *httpapi.NotLeaderError", err)
	}
	if s := a.m.Status(); !s.Leading() || s.Phase.String() != "draining" {
		t.Errorf("status while draining: %+v", s)
	}
	close(dev.release)
	waitEvent(t, events, EventResigned)
	if err := <-a.done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if st, ok := a.m.Command("slow"); !ok || st.State != dispatch.StatusSucceeded.String() {
		t.Errorf("slow after the drain: %+v %v, want succeeded", st, ok)
	}
	if _, ok := a.m.Command("late"); ok {
		t.Error("the command refused while draining is known")
	}
}

// TestSubmitBatchThroughTheMember: a batch is checked command by command
// before anything is written, as single submissions are, and what it takes
// reaches the dispatcher in one SubmitBatch and settles.
func TestSubmitBatchThroughTheMember(t *testing.T) {
	brokers := fakeCluster(t)
	events := make(chan Event, 16)
	dev := &countingDevice{calls: map[string]int{}}
	a := startMember(t, brokers, "a", nil, events, dev)
	waitEvent(t, events, EventReady)

	ctx := context.Background()
	if st, err := a.m.Submit(ctx, dispatch.Command{ID: "before", Device: "dev", Action: "go"}, 10*time.Second); err != nil || st.State != dispatch.StatusSucceeded.String() {
		t.Fatalf("Submit: %+v %v", st, err)
	}
	cmds := []dispatch.Command{
		{ID: "b1", Device: "dev", Action: "go"},
		{ID: "b2", Device: "dev", Action: "go"},
		{ID: "", Device: "dev", Action: "go"},
		{ID: "b1", Device: "dev", Action: "go"},
		{ID: "b1", Device: "dev", Action: "stop"},
		{ID: "b3", Device: "nowhere", Action: "go"},
		{ID: "before", Device: "dev", Action: "go"},
		{ID: "before", Device: "dev", Action: "stop"},
	}
	results, err := a.m.SubmitBatch(ctx, cmds, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(cmds) {
		t.Fatalf("%d results for %d commands", len(results), len(cmds))
	}
	succeeded := dispatch.StatusSucceeded.String()
	for _, i := range []int{0, 1, 3, 6} {
		if r := results[i]; r.Err != nil || r.State.ID != cmds[i].ID || r.State.State != succeeded {
			t.Errorf("command %d (%s): %+v, want succeeded", i, cmds[i].ID, r)
		}
	}
	var invalid *dispatch.InvalidCommandError
	var conflict *dispatch.IDConflictError
	var unknown *dispatch.UnknownDeviceError
	if !errors.As(results[2].Err, &invalid) {
		t.Errorf("no ID: %v, want *dispatch.InvalidCommandError", results[2].Err)
	}
	for _, i := range []int{4, 7} {
		if !errors.As(results[i].Err, &conflict) || conflict.ID != cmds[i].ID {
			t.Errorf("command %d, another under %s: %v, want *dispatch.IDConflictError", i, cmds[i].ID, results[i].Err)
		}
	}
	if !errors.As(results[5].Err, &unknown) {
		t.Errorf("no such device: %v, want *dispatch.UnknownDeviceError", results[5].Err)
	}
	// Each command taken was dispatched once.
	for _, id := range []string{"before", "b1", "b2"} {
		if n := dev.count(id); n != 1 {
			t.Errorf("%s dispatched %d times, want once", id, n)
		}
	}
}

// countingDevice succeeds and counts the calls of each command.
type countingDevice struct {
	mu    sync.Mutex
	calls map[string]int
}

func (d *countingDevice) Dispatch(_ context.Context, cmd dispatch.Command, _ coordination.FencingToken) (dispatch.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[cmd.ID]++
	return dispatch.Result{Detail: "done"}, nil
}

func (d *countingDevice) count(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[id]
}
