package member

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// journal records what the fakes were asked, in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, s)
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.lines...)
}

// fakeLeadership is a leadership that ends when the test says so.
type fakeLeadership struct {
	term  coordination.Term
	token coordination.FencingToken
	j     *journal
	// resign, when set, answers Resign; nil resigns at once.
	resign func(ctx context.Context) error

	once sync.Once
	done chan struct{}
	err  error
}

func newFakeLeadership(t *testing.T, j *journal, term coordination.Term) *fakeLeadership {
	t.Helper()
	tok, err := coordination.NewFencingToken(int64(1000+term), 0)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeLeadership{term: term, token: tok, j: j, done: make(chan struct{})}
}

func (l *fakeLeadership) end(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.done)
	})
}

func (l *fakeLeadership) Role() coordination.Role { r, _ := coordination.NewRole("r"); return r }
func (l *fakeLeadership) Member() coordination.MemberID {
	m, _ := coordination.NewMemberID("m")
	return m
}
func (l *fakeLeadership) Term() coordination.Term          { return l.term }
func (l *fakeLeadership) Token() coordination.FencingToken { return l.token }
func (l *fakeLeadership) Lease() coordination.Lease        { return coordination.Lease{Token: l.token} }
func (l *fakeLeadership) Done() <-chan struct{}            { return l.done }
func (l *fakeLeadership) ValidFor() time.Duration          { return time.Minute }
func (l *fakeLeadership) Renew(context.Context) error      { return nil }
func (l *fakeLeadership) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

func (l *fakeLeadership) Write(context.Context, func(coordination.FencingToken) ([]coordination.GuardedRecord, error)) (coordination.FencingToken, error) {
	return l.token, errors.New("the fake leadership writes nothing")
}

func (l *fakeLeadership) Resign(ctx context.Context) error {
	l.j.add("resign")
	if l.resign != nil {
		if err := l.resign(ctx); err != nil {
			return err
		}
	}
	l.end(coordination.ErrNotHeld)
	return nil
}

// fakeWork runs until its context or its leadership ends, or stop is
// closed; it is ready when ready closes and drains as drain says.
type fakeWork struct {
	l     *fakeLeadership
	j     *journal
	ready chan struct{}
	stop  chan error
	// drain, when set, answers Drain; nil drains at once.
	drain func(ctx context.Context) error
}

func (w *fakeWork) Ready() <-chan struct{} { return w.ready }

func (w *fakeWork) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		w.j.add("halt")
		return ctx.Err()
	case <-w.l.Done():
		return w.l.Err()
	case err := <-w.stop:
		return err
	}
}

func (w *fakeWork) StopIntake() { w.j.add("stop intake") }

func (w *fakeWork) Drain(ctx context.Context) error {
	w.j.add("drain")
	if w.drain != nil {
		return w.drain(ctx)
	}
	return nil
}

// rig is a member over fakes: each campaign takes the next leadership from
// leaderships, or fails with the next error of failures.
type rig struct {
	t      *testing.T
	m      *Member
	j      *journal
	events chan Event
	works  chan *fakeWork
	grants chan campaignAnswer
	cancel context.CancelFunc
	ran    chan error
}

type campaignAnswer struct {
	l   *fakeLeadership
	err error
}

func newRig(t *testing.T, options ...Option) *rig {
	t.Helper()
	r := &rig{t: t, j: &journal{}, events: make(chan Event, 64), works: make(chan *fakeWork, 8), grants: make(chan campaignAnswer, 8), ran: make(chan error, 1)}
	options = append(options, WithEventHandler(func(e Event) {
		// The journal places the draining event among the calls it follows.
		if e.Kind == EventDraining {
			r.j.add("event draining")
		}
		r.events <- e
	}))
	cfg, err := newSettings(options)
	if err != nil {
		t.Fatal(err)
	}
	role, _ := coordination.NewRole("r")
	id, _ := coordination.NewMemberID("m")
	r.m = newMember(role, id, cfg)
	r.m.acquire = func(ctx context.Context) (leadership, error) {
		r.j.add("campaign")
		select {
		case a := <-r.grants:
			if a.err != nil {
				return nil, a.err
			}
			return a.l, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.m.build = func(l leadership) (work, *dispatch.Dispatcher, error) {
		w := &fakeWork{l: l.(*fakeLeadership), j: r.j, ready: make(chan struct{}), stop: make(chan error, 1)}
		r.works <- w
		return w, nil, nil
	}
	return r
}

func (r *rig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.ran <- r.m.Run(ctx) }()
}

// next returns the next event; the test fails when there is none.
func (r *rig) next() Event {
	r.t.Helper()
	select {
	case e := <-r.events:
		return e
	default:
		r.t.Fatal("no event")
		return Event{}
	}
}

// expect checks the kinds of the events that came, in order, and returns
// them.
func (r *rig) expect(kinds ...EventKind) []Event {
	r.t.Helper()
	var got []Event
	for range kinds {
		select {
		case e := <-r.events:
			got = append(got, e)
		default:
		}
	}
	if len(got) != len(kinds) {
		r.t.Fatalf("events %v, want %v", kindsOf(got), kinds)
	}
	for i, e := range got {
		if e.Kind != kinds[i] {
			r.t.Fatalf("events %v, want %v", kindsOf(got), kinds)
		}
	}
	select {
	case e := <-r.events:
		r.t.Fatalf("unexpected event %v after %v", e.Kind, kinds)
	default:
	}
	return got
}

func kindsOf(es []Event) []EventKind {
	out := make([]EventKind, len(es))
	for i, e := range es {
		out[i] = e.Kind
	}
	return out
}
