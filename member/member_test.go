package member

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// TestStopDrainsThenHaltsThenResigns: stopping a leader drains its work
// first, halts it after, resigns last, and the events say so in that order.
func TestStopDrainsThenHaltsThenResigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		l := newFakeLeadership(t, r.j, 7)
		r.grants <- campaignAnswer{l: l}
		r.start()
		w := <-r.works
		synctest.Wait()
		if s := r.m.Status(); s.Phase != PhaseRecovering || !s.Leading() || s.Recovered() || s.Authority.Term != 7 {
			t.Errorf("before recovery: %+v leading %v recovered %v", s, s.Leading(), s.Recovered())
		}
		close(w.ready)
		synctest.Wait()
		if s := r.m.Status(); s.Phase != PhaseLeading || !s.Recovered() || s.Elections != 1 {
			t.Errorf("after recovery: %+v recovered %v", s, s.Recovered())
		}
		elected := r.expect(EventElected, EventReady)[0]
		if elected.Term != 7 || elected.Token != l.token || elected.Member != "m" || elected.Role != "r" {
			t.Errorf("elected %+v", elected)
		}

		r.cancel()
		if err := <-r.ran; err != nil {
			t.Fatalf("Run: %v", err)
		}
		r.expect(EventDraining, EventResigned, EventStopped)
		if got, want := r.j.all(), []string{"campaign", "stop intake", "event draining", "drain", "halt", "resign"}; !slices.Equal(got, want) {
			t.Errorf("calls %v, want %v", got, want)
		}
		if s := r.m.Status(); s.Phase != PhaseStopped || s.Leading() || s.Authority.Term != coordination.NoTerm {
			t.Errorf("after stop: %+v", s)
		}
	})
}

// TestDrainIsBounded: work that never drains is halted after the drain
// timeout, to the instant, and the member still resigns.
func TestDrainIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, WithDrainTimeout(3*time.Second))
		r.grants <- campaignAnswer{l: newFakeLeadership(t, r.j, 1)}
		r.start()
		w := <-r.works
		w.drain = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		close(w.ready)
		synctest.Wait()
		r.expect(EventElected, EventReady)
		if s := r.m.Status(); !s.Recovered() {
			t.Fatal("not recovered")
		}

		r.cancel()
		synctest.Wait()
		if s := r.m.Status(); s.Phase != PhaseDraining || !s.Recovered() || !s.Leading() {
			t.Errorf("while draining: %+v", s)
		}
		draining := r.next()
		<-r.ran
		resigned := r.expect(EventResigned, EventStopped)[0]
		if draining.Kind != EventDraining || resigned.At.Sub(draining.At) != 3*time.Second {
			t.Errorf("drained from %v to %v, want the 3s bound", draining.At, resigned.At)
		}
	})
}

// TestResignIsBounded: a resignation that hangs is given up after the
// resign timeout, and the member reports the role abandoned.
func TestResignIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, WithResignTimeout(2*time.Second))
		l := newFakeLeadership(t, r.j, 1)
		l.resign = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		r.grants <- campaignAnswer{l: l}
		r.start()
		close((<-r.works).ready)
		synctest.Wait()
		r.expect(EventElected, EventReady)
		start := time.Now()
		r.cancel()
		synctest.Wait()
		if s := r.m.Status(); s.Phase != PhaseResigning || s.Leading() || s.Authority.Term != coordination.NoTerm {
			t.Errorf("while resigning: %+v, want resigning and no longer leading", s)
		}
		<-r.ran
		got := r.expect(EventDraining, EventAbandoned, EventStopped)
		if !errors.Is(got[1].Err, context.DeadlineExceeded) || got[1].At.Sub(start) != 2*time.Second {
			t.Errorf("abandoned %+v after %v, want the deadline after 2s", got[1], got[1].At.Sub(start))
		}
	})
}

// TestDeposedCampaignsAgainAfterPause: a fenced leadership is reported with
// its cause and is not drained or resigned; the member campaigns again after
// a jittered pause within the backoff's bounds, and wins the next term.
func TestDeposedCampaignsAgainAfterPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const first = time.Second
		r := newRig(t, WithCampaignBackoff(first, 4*first))
		l1 := newFakeLeadership(t, r.j, 1)
		r.grants <- campaignAnswer{l: l1}
		r.start()
		close((<-r.works).ready)
		synctest.Wait()
		r.expect(EventElected, EventReady)

		l1.end(coordination.ErrFenced)
		synctest.Wait()
		deposed := r.expect(EventDeposed)[0]
		if !errors.Is(deposed.Err, coordination.ErrFenced) || deposed.Term != 1 {
			t.Errorf("deposed %+v", deposed)
		}
		if deposed.Pause < first/2 || deposed.Pause > first*3/2 {
			t.Errorf("pause %v outside the first backoff's jitter [%v, %v]", deposed.Pause, first/2, first*3/2)
		}
		if s := r.m.Status(); s.Phase != PhasePausing || !errors.Is(s.LastErr, coordination.ErrFenced) || s.Leading() {
			t.Errorf("pausing: %+v", s)
		}
		if got := r.j.all(); slices.Contains(got, "drain") || slices.Contains(got, "resign") {
			t.Errorf("a deposed leadership was drained or resigned: %v", got)
		}
		time.Sleep(deposed.Pause - time.Nanosecond)
		synctest.Wait()
		if n := len(r.j.all()); n != 1 {
			t.Fatalf("campaigned again before the pause ended: %v", r.j.all())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if s := r.m.Status(); s.Phase != PhaseCampaigning {
			t.Fatalf("after the pause: %v", s.Phase)
		}
		r.grants <- campaignAnswer{l: newFakeLeadership(t, r.j, 2)}
		close((<-r.works).ready)
		synctest.Wait()
		if e := r.expect(EventElected, EventReady)[0]; e.Term != 2 {
			t.Errorf("elected in term %v, want 2", e.Term)
		}
		r.cancel()
		<-r.ran
	})
}

// TestCampaignFailuresBackOffWithinBounds: failed campaigns are retried
// after pauses that grow and never exceed the longest backoff.
func TestCampaignFailuresBackOffWithinBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const first, longest = 100 * time.Millisecond, 400 * time.Millisecond
		r := newRig(t, WithCampaignBackoff(first, longest))
		boom := errors.New("brokers unreachable")
		for range 6 {
			r.grants <- campaignAnswer{err: boom}
		}
		r.start()
		var pauses []time.Duration
		for range 6 {
			synctest.Wait()
			e := r.next()
			if e.Kind != EventCampaignFailed || !errors.Is(e.Err, boom) {
				t.Fatalf("event %+v, want a failed campaign", e)
			}
			pauses = append(pauses, e.Pause)
			time.Sleep(e.Pause)
		}
		for i, p := range pauses {
			if p <= 0 || p > longest {
				t.Errorf("pause %d is %v, outside (0, %v]", i, p, longest)
			}
		}
		if pauses[0] > first*3/2 {
			t.Errorf("first pause %v above the first backoff's jitter", pauses[0])
		}
		r.cancel()
		<-r.ran
		if e := r.next(); e.Kind != EventStopped {
			t.Errorf("last event %v, want stopped", e.Kind)
		}
	})
}

// TestDispatcherStopResigns: work that stops on its own while the
// leadership holds makes the member resign and report why.
func TestDispatcherStopResigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.grants <- campaignAnswer{l: newFakeLeadership(t, r.j, 1)}
		r.start()
		w := <-r.works
		close(w.ready)
		synctest.Wait()
		r.expect(EventElected, EventReady)
		bug := errors.New("device bug")
		w.stop <- bug
		synctest.Wait()
		deposed := r.expect(EventDeposed)[0]
		if !errors.Is(deposed.Err, ErrDispatcherStopped) || !errors.Is(deposed.Err, bug) {
			t.Errorf("deposed with %v", deposed.Err)
		}
		if got := r.j.all(); !slices.Equal(got, []string{"campaign", "resign"}) {
			t.Errorf("calls %v, want a resignation", got)
		}
		r.cancel()
		<-r.ran
	})
}

// TestStopWhileCampaigning: a member that does not lead stops at once, with
// nothing to drain or resign.
func TestStopWhileCampaigning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.start()
		synctest.Wait()
		if s := r.m.Status(); s.Phase != PhaseCampaigning {
			t.Errorf("phase %v", s.Phase)
		}
		r.cancel()
		if err := <-r.ran; err != nil {
			t.Fatal(err)
		}
		r.expect(EventStopped)
	})
}

// TestCampaignSlotsBoundCampaigns: members that share one slot campaign
// one at a time.
func TestCampaignSlotsBoundCampaigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slots := make(chan struct{}, 1)
		a, b := newRig(t, WithCampaignSlots(slots)), newRig(t, WithCampaignSlots(slots))
		a.start()
		synctest.Wait()
		b.start()
		synctest.Wait()
		if got := b.j.all(); len(got) != 0 {
			t.Fatalf("b campaigned while a held the only slot: %v", got)
		}
		a.grants <- campaignAnswer{err: errors.New("no")}
		synctest.Wait()
		if got := b.j.all(); len(got) != 1 {
			t.Errorf("b did not campaign once a gave the slot back: %v", got)
		}
		a.cancel()
		b.cancel()
		<-a.ran
		<-b.ran
	})
}

func TestOptionsRejectBadValues(t *testing.T) {
	for name, o := range map[string]Option{
		"drain":    WithDrainTimeout(0),
		"resign":   WithResignTimeout(-time.Second),
		"backoff":  WithCampaignBackoff(time.Second, time.Millisecond),
		"slots":    WithCampaignSlots(make(chan struct{})),
		"registry": WithDispatcher(nil, nil),
	} {
		if _, err := newSettings([]Option{o}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.start()
		synctest.Wait()
		if err := r.m.Run(t.Context()); !errors.Is(err, ErrAlreadyRunning) {
			t.Errorf("second Run: %v", err)
		}
		r.cancel()
		<-r.ran
	})
}

// TestFencedWhileDraining: a leadership that ends during the drain is
// reported deposed, is not resigned, and the member stops without
// campaigning again.
func TestFencedWhileDraining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		l := newFakeLeadership(t, r.j, 3)
		r.grants <- campaignAnswer{l: l}
		r.start()
		w := <-r.works
		w.drain = func(ctx context.Context) error {
			l.end(coordination.ErrFenced)
			return errors.New("halted")
		}
		close(w.ready)
		synctest.Wait()
		r.expect(EventElected, EventReady)
		r.cancel()
		<-r.ran
		got := r.expect(EventDraining, EventDeposed, EventStopped)
		if !errors.Is(got[1].Err, coordination.ErrFenced) || got[1].Pause != 0 {
			t.Errorf("deposed %+v, want the fence and no pause", got[1])
		}
		if calls := r.j.all(); slices.Contains(calls, "resign") {
			t.Errorf("calls %v: a fenced leadership was resigned", calls)
		}
		if n := len(slices.DeleteFunc(r.j.all(), func(c string) bool { return c != "campaign" })); n != 1 {
			t.Errorf("campaigned %d times, want once", n)
		}
	})
}

// TestHoldOnlyLeadsUntilStopped: a member without a dispatcher is ready as
// soon as it is elected, and on stop resigns with nothing to drain.
func TestHoldOnlyLeadsUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.m.build = func(l leadership) (work, *dispatch.Dispatcher, error) { return newHoldOnly(l), nil, nil }
		l := newFakeLeadership(t, r.j, 4)
		r.grants <- campaignAnswer{l: l}
		r.start()
		synctest.Wait()
		r.expect(EventElected, EventReady)
		if s := r.m.Status(); !s.Recovered() || r.m.Dispatcher() != nil {
			t.Errorf("status %+v, dispatcher %v", s, r.m.Dispatcher())
		}
		r.cancel()
		<-r.ran
		r.expect(EventDraining, EventResigned, EventStopped)
		if got := r.j.all(); !slices.Equal(got, []string{"campaign", "event draining", "resign"}) {
			t.Errorf("calls %v", got)
		}
	})
}

// bareTransport is a transport that writes no guarded transactions; New
// only inspects it.
type bareTransport struct{ coordination.Transport }

func TestNewChecksArguments(t *testing.T) {
	role, _ := coordination.NewRole("r")
	id, _ := coordination.NewMemberID("m")
	if _, err := New(nil, role, id); err == nil {
		t.Error("a nil transport was accepted")
	}
	if _, err := New(bareTransport{}, coordination.Role{}, id); err == nil {
		t.Error("an empty role was accepted")
	}
	if _, err := New(bareTransport{}, role, coordination.MemberID{}); err == nil {
		t.Error("an empty member id was accepted")
	}
	if _, err := New(bareTransport{}, role, id); err != nil {
		t.Errorf("a member that only holds the role: %v", err)
	}
	reg := dispatch.NewRegistry()
	if _, err := New(bareTransport{}, role, id, WithDispatcher(reg, &dispatch.KafkaLogReader{})); err == nil {
		t.Error("a dispatcher over a transport without guarded writes was accepted")
	}
}

// boundsCounter is an empty log that counts the reads of its bounds: the
// first request of each read ahead.
type boundsCounter struct{ n atomic.Int64 }

func (b *boundsCounter) ReadLog(context.Context, coordination.TopicPartition) ([]dispatch.Entry, error) {
	return nil, nil
}

func (b *boundsCounter) Bounds(context.Context, coordination.TopicPartition) (int64, int64, error) {
	b.n.Add(1)
	return 0, 0, nil
}

func (b *boundsCounter) ReadRange(context.Context, coordination.TopicPartition, dispatch.LogRange) ([]dispatch.Entry, error) {
	return nil, nil
}

// TestReadsAheadWhileNotLeading: a member's standby reads ahead as the
// member starts to campaign, every PrefetchInterval while it waits, not
// while it leads, and again as it campaigns after a lost leadership; the
// goroutine that does it ends with Run.
func TestReadsAheadWhileNotLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		log := &boundsCounter{}
		standby, err := dispatch.NewStandby(r.m.role, log)
		if err != nil {
			t.Fatal(err)
		}
		r.m.standby = standby
		r.start()
		synctest.Wait()
		if n := log.n.Load(); n != 1 {
			t.Fatalf("%d reads ahead as the campaign began, want 1", n)
		}
		time.Sleep(PrefetchInterval)
		synctest.Wait()
		if n := log.n.Load(); n != 2 {
			t.Fatalf("%d reads ahead after a campaign of one interval, want 2", n)
		}

		l := newFakeLeadership(t, r.j, 1)
		r.grants <- campaignAnswer{l: l}
		close((<-r.works).ready)
		synctest.Wait()
		r.expect(EventElected, EventReady)
		time.Sleep(3 * PrefetchInterval)
		synctest.Wait()
		if n := log.n.Load(); n != 2 {
			t.Fatalf("%d reads ahead after three intervals of leading, want still 2", n)
		}

		l.end(coordination.ErrFenced)
		synctest.Wait()
		pause := r.expect(EventDeposed)[0].Pause
		time.Sleep(pause)
		synctest.Wait()
		if s := r.m.Status(); s.Phase != PhaseCampaigning {
			t.Fatalf("after the pause: %v", s.Phase)
		}
		if n := log.n.Load(); n != 3 {
			t.Fatalf("%d reads ahead after the next campaign began, want 3", n)
		}
		r.cancel()
		if err := <-r.ran; err != nil {
			t.Fatal(err)
		}
	})
}
