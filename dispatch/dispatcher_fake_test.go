package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.uber.org/goleak"
)

// fakeLeader is a Leader over an in-memory log. It commits a Write by
// appending its records, and under bump it moves to the next epoch after
// each commit, as Kafka transactions v2 do.
type fakeLeader struct {
	t      testing.TB
	role   coordination.Role
	member coordination.MemberID
	bump   bool
	done   chan struct{}

	mu       sync.Mutex
	token    coordination.FencingToken
	err      error
	validFor time.Duration
	renews   int
	renewErr error
	renewTo  time.Duration // ValidFor after a successful Renew
	log      *leaderLog
	writes   [][]coordination.GuardedRecord
	// beforeWrite runs before a Write commits; an error aborts it.
	beforeWrite func(records []coordination.GuardedRecord) error
}

// leaderLog is the committed records of the command log.
type leaderLog struct {
	mu      sync.Mutex
	records []coordination.GuardedRecord
}

// append adds records at the end of the log and returns the offset of the
// first.
func (l *leaderLog) append(records []coordination.GuardedRecord) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	base := int64(len(l.records))
	l.records = append(l.records, records...)
	return base
}

// entries decodes the committed records, with their offsets.
func (l *leaderLog) entries(t testing.TB) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Entry
	for i, r := range l.records {
		e, err := DecodeEntry(r.Key, r.Value)
		if err != nil {
			t.Errorf("offset %d: %v", i, err)
			continue
		}
		e.Offset = int64(i)
		out = append(out, e)
	}
	return out
}

// ReadLog implements LogReader.
func (l *leaderLog) ReadLog(ctx context.Context, _ coordination.TopicPartition) ([]Entry, error) {
	var out []Entry
	l.mu.Lock()
	records := append([]coordination.GuardedRecord(nil), l.records...)
	l.mu.Unlock()
	for i, r := range records {
		e, err := DecodeEntry(r.Key, r.Value)
		if err != nil {
			return nil, err
		}
		e.Offset = int64(i)
		e.Trace = traceFromHeaders(r.Headers)
		out = append(out, e)
	}
	return out, nil
}

// issuedAt reports whether the log holds an Issued record for id.
func (l *leaderLog) issued(t testing.TB, id string) (Entry, bool) {
	for _, e := range l.entries(t) {
		if e.Kind == EntryIssued && e.Issued.Command.ID == id {
			return e, true
		}
	}
	return Entry{}, false
}

// outcomes returns the outcome records, by command ID.
func (l *leaderLog) outcomes(t testing.TB) map[string][]Outcome {
	out := make(map[string][]Outcome)
	for _, e := range l.entries(t) {
		if e.Kind == EntryOutcome {
			out[e.Outcome.CommandID] = append(out[e.Outcome.CommandID], *e.Outcome)
		}
	}
	return out
}

func fakeToken(t testing.TB, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	tok, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newFakeLeader(t testing.TB, log *leaderLog, token coordination.FencingToken) *fakeLeader {
	t.Helper()
	role, err := coordination.NewRole("controller")
	if err != nil {
		t.Fatal(err)
	}
	member, err := coordination.NewMemberID("node-1")
	if err != nil {
		t.Fatal(err)
	}
	return &fakeLeader{t: t, role: role, member: member, done: make(chan struct{}),
		token: token, validFor: time.Hour, renewTo: time.Hour, log: log}
}

func (f *fakeLeader) Role() coordination.Role       { return f.role }
func (f *fakeLeader) Member() coordination.MemberID { return f.member }
func (f *fakeLeader) Done() <-chan struct{}         { return f.done }
func (f *fakeLeader) Term() coordination.Term       { return fakeTerm }

// fakeTerm is the term of every fake leadership.
const fakeTerm coordination.Term = 7

func (f *fakeLeader) Token() coordination.FencingToken {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.token
}

func (f *fakeLeader) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *fakeLeader) ValidFor() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0
	}
	return f.validFor
}

func (f *fakeLeader) setValidFor(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.validFor = d
}

func (f *fakeLeader) Renew(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renews++
	if f.err != nil {
		return coordination.ErrNotHeld
	}
	if f.renewErr != nil {
		if errors.Is(f.renewErr, coordination.ErrFenced) {
			f.endLocked(f.renewErr)
		}
		return f.renewErr
	}
	f.validFor = f.renewTo
	return nil
}

// end ends the leadership, as a fence does.
func (f *fakeLeader) end(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endLocked(err)
}

func (f *fakeLeader) endLocked(err error) {
	if f.err != nil {
		return
	}
	f.err = err
	close(f.done)
}

func (f *fakeLeader) Write(ctx context.Context, build func(coordination.FencingToken) ([]coordination.GuardedRecord, error)) (coordination.FencingToken, error) {
	f.mu.Lock()
	if f.err != nil {
		f.mu.Unlock()
		return coordination.NoEpoch, fmt.Errorf("write: %w", coordination.ErrNotHeld)
	}
	token := f.token
	hook := f.beforeWrite
	f.mu.Unlock()

	records, err := build(token)
	if err != nil {
		return coordination.NoEpoch, err
	}
	if hook != nil {
		if err := hook(records); err != nil {
			return token, err
		}
	}
	if err := ctx.Err(); err != nil {
		return token, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return token, fmt.Errorf("write: %w", coordination.ErrFenced)
	}
	// The records are copied: the caller may reuse its buffers.
	copied := make([]coordination.GuardedRecord, len(records))
	for i, r := range records {
		r.Value = append([]byte(nil), r.Value...)
		copied[i] = r
	}
	base := f.log.append(copied)
	for i := range records {
		records[i].Offset = base + int64(i) // as the Kafka writer sets them
	}
	f.writes = append(f.writes, copied)
	if f.bump {
		f.token = fakeToken(f.t, token.ProducerID(), token.ProducerEpoch()+1)
	}
	return token, nil
}

func (f *fakeLeader) writeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

// deviceCall is one Dispatch call seen by a recordingDevice.
type deviceCall struct {
	id    string
	token coordination.FencingToken
	// logged reports whether the command's Issued record was in the log
	// when Dispatch was called.
	logged bool
}

// recordingDevice records its calls, checks that each command is in the log
// first, and answers with respond.
type recordingDevice struct {
	log     *leaderLog
	t       testing.TB
	respond func(ctx context.Context, cmd Command, n int) (Result, error)

	mu       sync.Mutex
	calls    []deviceCall
	inFlight int
	maxIn    int
}

func (d *recordingDevice) Dispatch(ctx context.Context, cmd Command, token coordination.FencingToken) (Result, error) {
	_, logged := d.log.issued(d.t, cmd.ID)
	d.mu.Lock()
	d.calls = append(d.calls, deviceCall{id: cmd.ID, token: token, logged: logged})
	n := 0
	for _, c := range d.calls {
		if c.id == cmd.ID {
			n++
		}
	}
	d.inFlight++
	d.maxIn = max(d.maxIn, d.inFlight)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inFlight--
		d.mu.Unlock()
	}()
	if d.respond != nil {
		return d.respond(ctx, cmd, n)
	}
	return Result{Detail: "ok"}, nil
}

func (d *recordingDevice) seen() []deviceCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]deviceCall(nil), d.calls...)
}

// redispatchDevice is a recordingDevice that declares a redispatch safe.
type redispatchDevice struct{ *recordingDevice }

func (redispatchDevice) RedispatchSafe(Command) bool { return true }

// harness runs a Dispatcher over a fake leader.
type harness struct {
	t        testing.TB
	log      *leaderLog
	leader   *fakeLeader
	registry *Registry
	d        *Dispatcher
	runErr   chan error
	// before are the goroutines that ran before the dispatcher; stop
	// checks that the dispatcher left no other behind.
	before goleak.Option
}

func newHarness(t testing.TB, log *leaderLog, devices map[string]Device, options ...Option) *harness {
	t.Helper()
	if log == nil {
		log = &leaderLog{}
	}
	h := &harness{t: t, log: log, registry: NewRegistry(), runErr: make(chan error, 1), before: goleak.IgnoreCurrent()}
	h.leader = newFakeLeader(t, log, fakeToken(t, 7, 0))
	for name, dev := range devices {
		if err := h.registry.Register(name, dev); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	// The harness's tests check the dispatcher's state the instant a record
	// queues, so the linger, the gap after a commit and the outcome linger
	// are off unless a test asks for them.
	options = append([]Option{WithCommitLinger(0), WithCommitGap(0), WithOutcomeLinger(0)}, options...)
	h.d, err = NewDispatcher(h.leader, h.registry, log, options...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) start(ctx context.Context) {
	go func() { h.runErr <- h.d.Run(ctx) }()
}

// stop ends the leadership, waits for Run, and checks the log with Verify.
func (h *harness) stop() error {
	h.leader.end(fmt.Errorf("test over: %w", coordination.ErrNotHeld))
	err := <-h.runErr
	verifyClean(h.t, h.log)
	if lerr := goleak.Find(h.before); lerr != nil {
		h.t.Errorf("goroutines left after Run returned: %v", lerr)
	}
	return err
}

// newCommand builds a valid command for device, due within ttl.
func newCommand(id, device string, ttl time.Duration) Command {
	now := time.Now()
	return Command{ID: id, Device: device, Action: "set", Payload: []byte(id), SubmittedAt: now, Deadline: now.Add(ttl)}
}

// verifyClean fails the test for every violation that Verify finds in log.
func verifyClean(t testing.TB, log *leaderLog) {
	t.Helper()
	for _, v := range Verify(log.entries(t)) {
		t.Errorf("Verify: %s", v)
	}
}

// The real leadership is a Leader.
var _ Leader = (*coordination.Leadership)(nil)
