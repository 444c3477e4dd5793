package dispatch

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.uber.org/goleak"
)

// commitEntries commits entries to log as an earlier leader would have.
func commitEntries(t *testing.T, log *leaderLog, token coordination.FencingToken, entries ...Entry) {
	t.Helper()
	for _, e := range entries {
		e.Role, e.Member, e.Token = "controller", "node-0", token
		if e.At.IsZero() {
			e.At = time.Now()
		}
		key, value, err := EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		log.append([]coordination.GuardedRecord{{Key: key, Value: value}})
	}
}

func takeoverIssued(cmd Command) Entry {
	cmd.Role = "controller"
	return Entry{Kind: EntryIssued, Issued: &Issued{Command: cmd}}
}

func TestTakeoverSettlesPendingCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		old := fakeToken(t, 3, 9)
		safe := redispatchDevice{&recordingDevice{log: log, t: t}}
		unsafe := &recordingDevice{log: log, t: t}

		expired := newCommand("expired", "safe", time.Second)
		expired.SubmittedAt = expired.SubmittedAt.Add(-time.Hour)
		expired.Deadline = expired.SubmittedAt.Add(time.Second)
		commitEntries(t, log, old,
			takeoverIssued(newCommand("done", "safe", time.Hour)),
			Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: "done", Status: StatusSucceeded, Attempt: FirstAttempt}},
			takeoverIssued(expired),
			takeoverIssued(newCommand("again", "safe", time.Hour)),
			takeoverIssued(newCommand("doubt", "unsafe", time.Hour)),
			takeoverIssued(newCommand("gone", "removed", time.Hour)),
			Entry{Kind: EntryIntake, Intake: &IntakePosition{Topic: DefaultRequestsTopic, Partition: 12, FromOffset: 0, NextOffset: 42}},
		)
		// Another role that shares the partition is none of this leader's
		// business.
		other := newCommand("foreign", "safe", time.Hour)
		other.Role = "other"
		key, value, err := EncodeEntry(Entry{Kind: EntryIssued, Role: "other", Member: "x", Token: old, At: time.Now(), Issued: &Issued{Command: other}})
		if err != nil {
			t.Fatal(err)
		}
		log.append([]coordination.GuardedRecord{{Key: key, Value: value}})

		h := newHarness(t, log, map[string]Device{"safe": safe, "unsafe": unsafe})
		h.leader.token = fakeToken(t, 4, 0)
		h.start(t.Context())
		synctest.Wait()

		outs := log.outcomes(t)
		want := map[string]Status{"expired": StatusExpired, "again": StatusSucceeded, "doubt": StatusInDoubt, "gone": StatusInDoubt}
		for id, status := range want {
			if len(outs[id]) != 1 || outs[id][0].Status != status {
				t.Errorf("%s: outcomes %+v, want one %s", id, outs[id], status)
			}
		}
		if len(outs["done"]) != 1 || len(outs["foreign"]) != 0 {
			t.Errorf("settled or foreign commands touched: %+v", outs)
		}
		if outs["again"][0].Attempt != 2 {
			t.Errorf("redispatch outcome attempt %d, want 2", outs["again"][0].Attempt)
		}
		// The redispatch followed its own record, under the new token.
		calls := safe.seen()
		if len(calls) != 1 || calls[0].id != "again" || calls[0].token != fakeToken(t, 4, 0) {
			t.Fatalf("calls %+v, want one redispatch of again under 4:0", calls)
		}
		var redispatched *Entry
		for _, e := range log.entries(t) {
			if e.Kind == EntryRedispatched {
				redispatched = &e
			}
		}
		if redispatched == nil || redispatched.Redispatched.CommandID != "again" || redispatched.Redispatched.Reason != RedispatchTakeover || redispatched.Token != calls[0].token {
			t.Errorf("Redispatched record %+v", redispatched)
		}
		if len(unsafe.seen()) != 0 {
			t.Error("a device that does not declare redispatch safe got a command again")
		}
		if got := h.d.InDoubt(); len(got) != 2 {
			t.Errorf("InDoubt %v", got)
		}
		// A duplicate of a command the log holds gets its recorded outcome.
		out, err := h.d.Submit(t.Context(), newCommand("done", "safe", time.Hour))
		if err != nil || out.Status != StatusSucceeded {
			t.Errorf("duplicate of a logged command: %+v %v", out, err)
		}
		h.d.mu.Lock()
		intake := h.d.commits.intakePosition()
		h.d.mu.Unlock()
		if intake != 42 {
			t.Errorf("intake position %d, want 42", intake)
		}
		h.stop()
	})
}

func TestRecoveryRetriesTransientReadErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		commitEntries(t, log, fakeToken(t, 3, 0), takeoverIssued(newCommand("done", "valve", time.Hour)),
			Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: "done", Status: StatusSucceeded, Attempt: 1}})
		leader := newFakeLeader(t, log, fakeToken(t, 4, 0))
		reads := 0
		d, err := NewDispatcher(leader, NewRegistry(), LogReaderFunc(func(ctx context.Context, tp coordination.TopicPartition) ([]Entry, error) {
			if reads++; reads < 3 {
				return nil, errors.New("unable to dial: connection refused")
			}
			return log.ReadLog(ctx, tp)
		}))
		if err != nil {
			t.Fatal(err)
		}
		go d.Run(t.Context())
		out, err := d.Submit(t.Context(), newCommand("done", "valve", time.Hour))
		if err != nil || out.Status != StatusSucceeded {
			t.Errorf("a duplicate after a recovery that needed three reads: %+v %v", out, err)
		}
		if reads != 3 {
			t.Errorf("%d reads, want 3", reads)
		}
		leader.end(coordination.ErrNotHeld)
	})
}

func TestRecoveryEndsRunOnMalformedLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		malformed := &MalformedRecordError{Offset: 7, Err: errors.New("truncated")}
		leader := newFakeLeader(t, &leaderLog{}, fakeToken(t, 1, 0))
		d, err := NewDispatcher(leader, NewRegistry(), LogReaderFunc(func(context.Context, coordination.TopicPartition) ([]Entry, error) {
			return nil, errors.Join(malformed)
		}))
		if err != nil {
			t.Fatal(err)
		}
		var got *MalformedRecordError
		if err := d.Run(t.Context()); !errors.As(err, &got) || got.Offset != 7 {
			t.Errorf("Run returned %v, want the malformed record", err)
		}
		if _, err := d.Submit(t.Context(), newCommand("c", "x", time.Minute)); !errors.Is(err, ErrHalted) {
			t.Errorf("Submit after a failed recovery: %v", err)
		}
	})
}

func TestResolve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		commitEntries(t, log, fakeToken(t, 3, 0),
			takeoverIssued(newCommand("a", "valve", time.Hour)),
			takeoverIssued(newCommand("b", "valve", time.Hour)),
			takeoverIssued(newCommand("pending", "valve", time.Hour)),
			Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: "pending", Status: StatusSucceeded, Attempt: 1}},
		)
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.start(t.Context())
		synctest.Wait()
		if n := len(dev.seen()); n != 0 {
			t.Fatalf("%d dispatches of in-doubt commands", n)
		}

		out, err := h.d.Resolve(t.Context(), "a", ResolveRedispatch)
		if err != nil || out.Status != StatusSucceeded || out.Attempt != 2 {
			t.Errorf("redispatch: %+v %v", out, err)
		}
		if calls := dev.seen(); len(calls) != 1 || calls[0].id != "a" {
			t.Errorf("calls %+v", calls)
		}
		out, err = h.d.Resolve(t.Context(), "b", ResolveCancel)
		if err != nil || out.Status != StatusCancelled {
			t.Errorf("cancel: %+v %v", out, err)
		}
		var notInDoubt *NotInDoubtError
		if _, err := h.d.Resolve(t.Context(), "b", ResolveCancel); !errors.As(err, &notInDoubt) || notInDoubt.Status != StatusCancelled {
			t.Errorf("second resolve: %v", err)
		}
		var unknown *UnknownCommandError
		if _, err := h.d.Resolve(t.Context(), "nope", ResolveCancel); !errors.As(err, &unknown) {
			t.Errorf("unknown: %v", err)
		}
		if _, err := h.d.Resolve(t.Context(), "a", ResolveAction(9)); err == nil {
			t.Error("an unknown action was accepted")
		}
		// The Redispatched record precedes the dispatch and its outcome.
		var kinds []EntryKind
		for _, e := range log.entries(t) {
			if e.CommandID() == "a" {
				kinds = append(kinds, e.Kind)
			}
		}
		want := []EntryKind{EntryIssued, EntryOutcome, EntryRedispatched, EntryOutcome}
		if len(kinds) != len(want) {
			t.Fatalf("records of a: %v, want %v", kinds, want)
		}
		for i := range want {
			if kinds[i] != want[i] {
				t.Errorf("records of a: %v, want %v", kinds, want)
			}
		}
		if got := h.d.InDoubt(); len(got) != 0 {
			t.Errorf("still in doubt: %v", got)
		}
		h.stop()
	})
}

func TestResolveRedispatchOfAnUnregisteredDeviceStaysInDoubt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		commitEntries(t, log, fakeToken(t, 3, 0), takeoverIssued(newCommand("orphan", "gone", time.Hour)))
		h := newHarness(t, log, map[string]Device{})
		h.start(t.Context())
		synctest.Wait() // the takeover records it in doubt
		out, err := h.d.Resolve(t.Context(), "orphan", ResolveRedispatch)
		if err != nil || out.Status != StatusInDoubt || out.Attempt != 2 {
			t.Errorf("resolve: %+v %v, want in doubt again at attempt 2", out, err)
		}
		if got := h.d.InDoubt(); len(got) != 1 {
			t.Errorf("InDoubt %v", got)
		}
		h.stop()
	})
}

// TestSuccessorAfterACancelledInDoubtCommand is the log an operator's cancel
// of an in-doubt command leaves: an outcome in doubt, then a cancelled one.
// The successor recovers it without a panic, leaves the command settled, and
// leads: it takes a new command and dispatches it.
func TestSuccessorAfterACancelledInDoubtCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		commitEntries(t, log, fakeToken(t, 3, 0),
			takeoverIssued(newCommand("doubt", "valve", time.Hour)),
			Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: "doubt", Status: StatusInDoubt, Attempt: FirstAttempt}},
			Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: "doubt", Status: StatusCancelled, Attempt: FirstAttempt}},
		)
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.start(t.Context())
		out, err := h.d.Submit(t.Context(), newCommand("next", "valve", time.Hour))
		if err != nil || out.Status != StatusSucceeded {
			t.Fatalf("a new command after the takeover: %+v %v", out, err)
		}
		if calls := dev.seen(); len(calls) != 1 || calls[0].id != "next" {
			t.Errorf("device calls %+v, want only the new command", calls)
		}
		if out, ok := h.d.Lookup("doubt"); !ok || out.Status != StatusCancelled {
			t.Errorf("the cancelled command: %+v %v", out, ok)
		}
		var notInDoubt *NotInDoubtError
		if _, err := h.d.Resolve(t.Context(), "doubt", ResolveCancel); !errors.As(err, &notInDoubt) || !notInDoubt.Settled() || notInDoubt.Status != StatusCancelled {
			t.Errorf("a second cancel: %v, want a settled *NotInDoubtError", err)
		}
		if got := h.d.InDoubt(); len(got) != 0 {
			t.Errorf("InDoubt %v", got)
		}
		if err := h.stop(); !errors.Is(err, coordination.ErrNotHeld) {
			t.Errorf("Run returned %v", err)
		}
	})
}

// TestResolveRefusesASettledCommandAfterALateInDoubt covers a log where an
// outcome in doubt follows a terminal one: the command stays settled, so a
// resolve is refused and writes nothing.
func TestResolveRefusesASettledCommandAfterALateInDoubt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		commitEntries(t, log, fakeToken(t, 3, 0),
			takeoverIssued(newCommand("done", "valve", time.Hour)),
			Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: "done", Status: StatusSucceeded, Attempt: FirstAttempt}},
			Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: "done", Status: StatusInDoubt, Attempt: FirstAttempt}},
		)
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.start(t.Context())
		synctest.Wait()
		before := len(log.entries(t))
		for _, action := range []ResolveAction{ResolveCancel, ResolveRedispatch} {
			var notInDoubt *NotInDoubtError
			if _, err := h.d.Resolve(t.Context(), "done", action); !errors.As(err, &notInDoubt) || !notInDoubt.Settled() || notInDoubt.Status != StatusSucceeded {
				t.Errorf("%s of a settled command: %v", action, err)
			}
		}
		synctest.Wait()
		if n := len(log.entries(t)); n != before || len(dev.seen()) != 0 {
			t.Errorf("%d records after the resolves, %d before; %d device calls", n, before, len(dev.seen()))
		}
		h.leader.end(coordination.ErrNotHeld)
		<-h.runErr
	})
}

// TestRunReturnsOnAPanicInRecovery: a panic while the dispatcher recovers
// does not leave Run blocked, and so the leadership held without a
// dispatcher: Run returns a *PanicError, and Submit fails.
func TestRunReturnsOnAPanicInRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leader := newFakeLeader(t, &leaderLog{}, fakeToken(t, 1, 0))
		d, err := NewDispatcher(leader, NewRegistry(), LogReaderFunc(func(context.Context, coordination.TopicPartition) ([]Entry, error) {
			panic("a reader bug")
		}))
		if err != nil {
			t.Fatal(err)
		}
		var perr *PanicError
		if err := d.Run(t.Context()); !errors.As(err, &perr) || perr.Where != "recovery" || perr.Value != "a reader bug" || len(perr.Stack) == 0 {
			t.Errorf("Run returned %v, want the recovery's *PanicError", err)
		}
		if _, err := d.Submit(t.Context(), newCommand("c", "x", time.Minute)); !errors.Is(err, ErrHalted) {
			t.Errorf("Submit after the panic: %v", err)
		}
		select {
		case <-leader.Done():
			t.Error("the dispatcher ended the leadership itself; its caller resigns it")
		default:
		}
	})
}

// TestRunReturnsOnAPanicInADevice: a device that panics halts the
// dispatcher, and Run returns a *PanicError instead of the process crashing
// or the dispatcher going on without the worker.
func TestRunReturnsOnAPanicInADevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t, respond: func(context.Context, Command, int) (Result, error) {
			panic(errors.New("device bug"))
		}}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.start(t.Context())
		if _, err := h.d.Submit(t.Context(), newCommand("boom", "valve", time.Hour)); !errors.Is(err, ErrHalted) {
			t.Errorf("Submit of the command whose dispatch panicked: %v", err)
		}
		var perr *PanicError
		err := <-h.runErr
		if !errors.As(err, &perr) || perr.Where != "the worker of device valve" {
			t.Fatalf("Run returned %v, want the worker's *PanicError", err)
		}
		if err.Error() != "dispatch: panic in the worker of device valve: device bug" || errors.Unwrap(err) == nil {
			t.Errorf("error %q unwraps to %v", err, errors.Unwrap(err))
		}
		// The command is pending in the log: the next leader settles it.
		if outs := log.outcomes(t); len(outs["boom"]) != 0 {
			t.Errorf("outcomes %+v", outs)
		}
		if lerr := goleak.Find(h.before); lerr != nil {
			t.Errorf("goroutines left after Run returned: %v", lerr)
		}
	})
}
