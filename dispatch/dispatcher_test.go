package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

func TestSubmitDispatchesAfterCommitWithRecordToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.leader.bump = true // transactions v2: the epoch moves on every commit
		h.start(t.Context())

		for i := range 3 {
			out, err := h.d.Submit(t.Context(), newCommand(fmt.Sprintf("c%d", i), "valve", time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != StatusSucceeded || out.Result.Detail != "ok" || out.Attempt != FirstAttempt {
				t.Fatalf("outcome %+v, want succeeded with the device's result", out)
			}
		}
		calls := dev.seen()
		if len(calls) != 3 {
			t.Fatalf("%d dispatches, want 3", len(calls))
		}
		for _, c := range calls {
			if !c.logged {
				t.Errorf("command %s dispatched before its Issued record committed", c.id)
			}
			issued, _ := log.issued(t, c.id)
			if issued.Token != c.token {
				t.Errorf("command %s dispatched with token %s, its record has %s", c.id, c.token, issued.Token)
			}
		}
		// Every record carries the token of the transaction that wrote it,
		// and the tokens never go backwards in log order.
		prev := coordination.NoEpoch
		for _, e := range log.entries(t) {
			if e.Token.Compare(prev) < 0 {
				t.Errorf("offset %d: token %s after %s", e.Offset, e.Token, prev)
			}
			prev = e.Token
			if e.Member != "node-1" || e.Role != "controller" {
				t.Errorf("offset %d: member %q role %q", e.Offset, e.Member, e.Role)
			}
		}
		for id, outs := range log.outcomes(t) {
			if len(outs) != 1 || outs[0].Status != StatusSucceeded {
				t.Errorf("command %s: outcomes %+v", id, outs)
			}
		}
		if err := h.stop(); !errors.Is(err, coordination.ErrNotHeld) {
			t.Errorf("Run returned %v, want the leadership's error", err)
		}
	})
}

func TestRecordsCarryTokenAndMemberHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}})
		h.start(t.Context())
		if _, err := h.d.Submit(t.Context(), newCommand("a", "valve", time.Minute)); err != nil {
			t.Fatal(err)
		}
		h.stop()
		for i, r := range log.records {
			got := map[string]string{}
			for _, hd := range r.Headers {
				got[hd.Key] = string(hd.Value)
			}
			if got[HeaderToken] != "7:0" || got[HeaderMember] != "node-1" {
				t.Errorf("record %d headers %v", i, got)
			}
			if r.Partition != h.d.LogPartition() {
				t.Errorf("record %d went to %v, want %v", i, r.Partition, h.d.LogPartition())
			}
		}
	})
}

func TestGroupCommitBatchesWhileTransactionInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithMaxBatchRecords(4))
		release := make(chan struct{})
		var once sync.Once
		h.leader.beforeWrite = func([]coordination.GuardedRecord) error {
			once.Do(func() { <-release })
			return nil
		}
		h.start(t.Context())

		var wg sync.WaitGroup
		submit := func(id string) {
			wg.Go(func() {
				if _, err := h.d.Submit(t.Context(), newCommand(id, "valve", time.Minute)); err != nil {
					t.Error(err)
				}
			})
		}
		submit("first")
		synctest.Wait() // the first transaction is in flight and held
		for i := range 6 {
			submit(fmt.Sprintf("next-%d", i))
		}
		synctest.Wait()
		if n := h.leader.writeCount(); n != 0 {
			t.Fatalf("%d transactions committed while the first was held", n)
		}
		close(release)
		wg.Wait()

		h.leader.mu.Lock()
		writes := h.leader.writes
		h.leader.mu.Unlock()
		// The first transaction holds one Issued record; the six commands
		// that queued behind it go into the next ones, at most four records
		// each.
		if got := countKind(t, writes[0], EntryIssued); got != 1 {
			t.Errorf("first transaction has %d Issued records, want 1", got)
		}
		if got := countKind(t, writes[1], EntryIssued); got != 4 {
			t.Errorf("second transaction has %d Issued records, want 4 (the batch bound)", got)
		}
		for i, w := range writes {
			if len(w) > 4 {
				t.Errorf("transaction %d has %d records, above the bound of 4", i, len(w))
			}
		}
		h.stop()
	})
}

func countKind(t *testing.T, records []coordination.GuardedRecord, kind EntryKind) int {
	n := 0
	for _, r := range records {
		e, err := DecodeEntry(r.Key, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func TestGroupCommitBoundedByBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithMaxBatchBytes(600))
		release := make(chan struct{})
		var once sync.Once
		h.leader.beforeWrite = func([]coordination.GuardedRecord) error {
			once.Do(func() { <-release })
			return nil
		}
		h.start(t.Context())
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				cmd := newCommand(fmt.Sprintf("c%d", i), "valve", time.Minute)
				cmd.Payload = make([]byte, 250)
				if _, err := h.d.Submit(t.Context(), cmd); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait()
		}
		close(release)
		wg.Wait()
		h.stop()
		for i, w := range h.leader.writes {
			if n := countKind(t, w, EntryIssued); n > 2 {
				t.Errorf("transaction %d has %d Issued records of ~300 bytes, above the 600-byte bound", i, n)
			}
		}
	})
}

func TestOneDeviceInLogOrderOneAtATimeOthersInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		gate := make(chan struct{})
		slow := &recordingDevice{log: log, t: t, respond: func(ctx context.Context, cmd Command, _ int) (Result, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
			return Result{}, nil
		}}
		other := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"slow": slow, "other": other})
		h.start(t.Context())

		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				if _, err := h.d.Submit(t.Context(), newCommand(fmt.Sprintf("s%d", i), "slow", time.Minute)); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait() // keep the submission order
		}
		// The slow device holds its first command; another device still gets
		// its own at once.
		if _, err := h.d.Submit(t.Context(), newCommand("o1", "other", time.Minute)); err != nil {
			t.Fatal(err)
		}
		if len(slow.seen()) != 1 {
			t.Fatalf("the slow device has %d calls while its first is blocked, want 1", len(slow.seen()))
		}
		close(gate)
		wg.Wait()
		calls := slow.seen()
		for i, c := range calls {
			if want := fmt.Sprintf("s%d", i); c.id != want {
				t.Errorf("call %d is %s, want %s (log order)", i, c.id, want)
			}
		}
		if slow.maxIn != 1 {
			t.Errorf("the slow device saw %d concurrent calls", slow.maxIn)
		}
		h.stop()
	})
}

func TestMaxParallelDevicesBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		gate := make(chan struct{})
		var mu sync.Mutex
		inFlight, peak := 0, 0
		respond := func(ctx context.Context, cmd Command, _ int) (Result, error) {
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()
			<-gate
			mu.Lock()
			inFlight--
			mu.Unlock()
			return Result{}, nil
		}
		devices := map[string]Device{}
		for i := range 4 {
			devices[fmt.Sprintf("d%d", i)] = &recordingDevice{log: log, t: t, respond: respond}
		}
		h := newHarness(t, log, devices, WithMaxParallelDevices(2))
		h.start(t.Context())
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() { h.d.Submit(t.Context(), newCommand(fmt.Sprintf("c%d", i), fmt.Sprintf("d%d", i), time.Minute)) })
		}
		synctest.Wait()
		mu.Lock()
		if inFlight != 2 {
			t.Errorf("%d devices driven at once, want the bound of 2", inFlight)
		}
		mu.Unlock()
		close(gate)
		wg.Wait()
		if peak != 2 {
			t.Errorf("peak of %d devices at once, want 2", peak)
		}
		h.stop()
	})
}

func TestExpiredCommandNeverDispatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		gate := make(chan struct{})
		dev := &recordingDevice{log: log, t: t, respond: func(ctx context.Context, cmd Command, _ int) (Result, error) {
			if cmd.ID == "blocker" {
				<-gate
			}
			return Result{}, nil
		}}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.start(t.Context())

		// Already past its deadline when submitted.
		late := newCommand("late", "valve", time.Second)
		late.SubmittedAt = late.SubmittedAt.Add(-time.Minute)
		late.Deadline = late.SubmittedAt.Add(time.Second)
		out, err := h.d.Submit(t.Context(), late)
		if err != nil || out.Status != StatusExpired {
			t.Fatalf("late command: %+v, %v; want expired", out, err)
		}

		// Expires while queued behind a command that holds the device.
		go h.d.Submit(t.Context(), newCommand("blocker", "valve", time.Hour))
		synctest.Wait()
		done := make(chan Outcome)
		go func() {
			out, _ := h.d.Submit(t.Context(), newCommand("queued", "valve", time.Second))
			done <- out
		}()
		synctest.Wait()
		time.Sleep(2 * time.Second) // fake time, inside the bubble
		close(gate)
		if out := <-done; out.Status != StatusExpired {
			t.Errorf("queued command: %+v, want expired", out)
		}
		for _, c := range dev.seen() {
			if c.id == "late" || c.id == "queued" {
				t.Errorf("expired command %s was dispatched", c.id)
			}
		}
		if _, ok := log.issued(t, "late"); !ok {
			t.Error("the expired command has no Issued record before its outcome")
		}
		h.stop()
	})
}

func TestDeviceErrorsClassified(t *testing.T) {
	errBus := errors.New("bus down")
	cases := []struct {
		name     string
		respond  func(n int) error
		want     Status
		dispatch int
	}{
		{"retryable then success", func(n int) error {
			if n < 3 {
				return Retryable(errBus)
			}
			return nil
		}, StatusSucceeded, 3},
		{"retryable exhausted", func(int) error { return Retryable(errBus) }, StatusFailed, 4},
		{"rejected", func(int) error { return Rejected(errBus) }, StatusRejected, 1},
		{"unclassified is in doubt", func(int) error { return errBus }, StatusInDoubt, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &leaderLog{}
				dev := &recordingDevice{log: log, t: t, respond: func(_ context.Context, _ Command, n int) (Result, error) {
					return Result{}, tc.respond(n)
				}}
				h := newHarness(t, log, map[string]Device{"valve": dev}, WithMaxAttempts(4), WithRetryBackoff(time.Second, 4*time.Second))
				h.start(t.Context())
				start := time.Now()
				out, err := h.d.Submit(t.Context(), newCommand("c", "valve", time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				if out.Status != tc.want {
					t.Errorf("status %s (%s), want %s", out.Status, out.Reason, tc.want)
				}
				if n := len(dev.seen()); n != tc.dispatch {
					t.Errorf("%d dispatches, want %d", n, tc.dispatch)
				}
				if tc.want == StatusFailed {
					// Backoff 1s, 2s, 4s between the four attempts.
					if took := time.Since(start); took != 7*time.Second {
						t.Errorf("retries took %v, want 7s of backoff", took)
					}
				}
				h.stop()
			})
		})
	}
}

func TestRetriesStopWhenLeadershipEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t, respond: func(context.Context, Command, int) (Result, error) {
			return Result{}, Retryable(errors.New("offline"))
		}}
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithMaxAttempts(10), WithRetryBackoff(time.Second, time.Second))
		h.start(t.Context())
		done := make(chan error)
		go func() {
			_, err := h.d.Submit(t.Context(), newCommand("c", "valve", time.Hour))
			done <- err
		}()
		time.Sleep(1500 * time.Millisecond) // two attempts
		synctest.Wait()
		h.leader.end(coordination.ErrFenced)
		if err := <-done; !errors.Is(err, ErrHalted) {
			t.Errorf("Submit returned %v, want ErrHalted", err)
		}
		<-h.runErr
		if n := len(dev.seen()); n != 2 {
			t.Errorf("%d attempts, want 2: no retry after the leadership ended", n)
		}
		if outs := log.outcomes(t); len(outs) != 0 {
			t.Errorf("outcomes written after the halt: %v", outs)
		}
	})
}

func TestDuplicateIDNotDispatchedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.start(t.Context())
		first, err := h.d.Submit(t.Context(), newCommand("same", "valve", time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		// The same command, retried a moment later.
		again := newCommand("same", "valve", time.Minute)
		second, err := h.d.Submit(t.Context(), again)
		if err != nil {
			t.Fatal(err)
		}
		if second.Status != first.Status || second.CommandID != "same" {
			t.Errorf("duplicate got %+v, want the first's %+v", second, first)
		}
		if n := len(dev.seen()); n != 1 {
			t.Errorf("%d dispatches, want 1", n)
		}
		n := 0
		for _, e := range log.entries(t) {
			if e.Kind == EntryIssued {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d Issued records, want 1", n)
		}
		h.stop()
	})
}

func TestUnknownDeviceRefusedWhileOthersFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.start(t.Context())
		_, err := h.d.Submit(t.Context(), newCommand("poison", "nowhere", time.Minute))
		var unknown *UnknownDeviceError
		if !errors.As(err, &unknown) || unknown.Name != "nowhere" {
			t.Errorf("unknown device: %v, want *UnknownDeviceError", err)
		}
		out, err := h.d.Submit(t.Context(), newCommand("good", "valve", time.Minute))
		if err != nil || out.Status != StatusSucceeded {
			t.Errorf("good command after poison: %+v, %v", out, err)
		}
		// An invalid command is refused, and not recorded.
		bad := newCommand("", "valve", time.Minute)
		var invalid *InvalidCommandError
		if _, err := h.d.Submit(t.Context(), bad); !errors.As(err, &invalid) {
			t.Errorf("invalid command: %v, want *InvalidCommandError", err)
		}
		h.stop()
		if _, ok := log.issued(t, "poison"); ok {
			t.Error("the command for an unknown device was written to the log")
		}
	})
}

func TestHaltCancelsInFlightDispatchAtOnce(t *testing.T) {
	// Real time: the bound is about the scheduler, not a timer.
	log := &leaderLog{}
	started := make(chan struct{})
	cancelled := make(chan time.Time, 1)
	dev := &recordingDevice{log: log, t: t, respond: func(ctx context.Context, cmd Command, _ int) (Result, error) {
		close(started)
		<-ctx.Done()
		cancelled <- time.Now()
		return Result{}, ctx.Err()
	}}
	h := newHarness(t, log, map[string]Device{"valve": dev})
	h.start(t.Context())
	submitted := make(chan error, 1)
	go func() {
		_, err := h.d.Submit(t.Context(), newCommand("held", "valve", time.Hour))
		submitted <- err
	}()
	<-started
	before := len(log.entries(t))
	halt := time.Now()
	h.leader.end(fmt.Errorf("lost: %w", coordination.ErrFenced))
	at := <-cancelled
	if took := at.Sub(halt); took > 50*time.Millisecond {
		t.Errorf("the device saw the cancel %v after the halt, above 50ms", took)
	}
	if err := <-submitted; !errors.Is(err, ErrHalted) {
		t.Errorf("Submit returned %v, want ErrHalted", err)
	}
	err := <-h.runErr
	if !errors.Is(err, coordination.ErrFenced) {
		t.Errorf("Run returned %v, want the fence", err)
	}
	if after := len(log.entries(t)); after != before {
		t.Errorf("%d records written after the halt", after-before)
	}
	if _, err := h.d.Submit(t.Context(), newCommand("after", "valve", time.Hour)); !errors.Is(err, ErrHalted) {
		t.Errorf("Submit after the halt: %v, want ErrHalted", err)
	}
	if err := h.d.Run(t.Context()); !errors.Is(err, ErrAlreadyRun) {
		t.Errorf("second Run: %v", err)
	}
}

func TestRunContextEndHalts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}})
		ctx, cancel := context.WithCancel(t.Context())
		h.start(ctx)
		cancel()
		if err := <-h.runErr; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
}

func TestFreshnessGuardRenewsBeforeDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithSafetyMargin(time.Second))
		h.leader.setValidFor(500 * time.Millisecond) // stale: below the margin
		h.leader.renewTo = 10 * time.Second
		h.start(t.Context())
		out, err := h.d.Submit(t.Context(), newCommand("c", "valve", time.Minute))
		if err != nil || out.Status != StatusSucceeded {
			t.Fatalf("%+v, %v", out, err)
		}
		h.leader.mu.Lock()
		renews := h.leader.renews
		h.leader.mu.Unlock()
		if renews != 1 {
			t.Errorf("%d renewals before the dispatch, want 1", renews)
		}
		h.stop()
	})
}

func TestFreshnessGuardNeverDispatchesOnStaleLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithSafetyMargin(time.Second))
		h.leader.setValidFor(0) // paused past its deadline
		// A successor took over: the renewal is fenced, and ends the
		// leadership.
		h.leader.renewErr = fmt.Errorf("renew: %w", coordination.ErrFenced)
		h.start(t.Context())
		_, err := h.d.Submit(t.Context(), newCommand("c", "valve", time.Minute))
		if !errors.Is(err, ErrHalted) {
			t.Errorf("Submit returned %v, want ErrHalted", err)
		}
		if err := <-h.runErr; !errors.Is(err, coordination.ErrFenced) {
			t.Errorf("Run returned %v", err)
		}
		if n := len(dev.seen()); n != 0 {
			t.Errorf("%d dispatches on a stale lease", n)
		}
	})
}

func TestFreshnessWaitsThroughFailedRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithSafetyMargin(time.Second))
		h.leader.setValidFor(0)
		h.leader.renewErr = errors.New("broker unreachable")
		h.start(t.Context())
		done := make(chan Outcome)
		go func() {
			out, _ := h.d.Submit(t.Context(), newCommand("c", "valve", time.Minute))
			done <- out
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(dev.seen()); n != 0 {
			t.Fatalf("%d dispatches while the lease is stale", n)
		}
		h.leader.mu.Lock()
		h.leader.renewErr = nil
		h.leader.renewTo = 10 * time.Second
		h.leader.mu.Unlock()
		if out := <-done; out.Status != StatusSucceeded {
			t.Errorf("%+v", out)
		}
		h.stop()
	})
}

func TestWriteFailureRetriedWhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		fails := 2
		h.leader.beforeWrite = func([]coordination.GuardedRecord) error {
			if fails > 0 {
				fails--
				return errors.New("transaction aborted: not enough replicas")
			}
			return nil
		}
		h.start(t.Context())
		out, err := h.d.Submit(t.Context(), newCommand("c", "valve", time.Minute))
		if err != nil || out.Status != StatusSucceeded {
			t.Fatalf("%+v, %v", out, err)
		}
		if n := len(dev.seen()); n != 1 {
			t.Errorf("%d dispatches, want 1", n)
		}
		h.stop()
	})
}

func TestSubmitFillsDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithCommandTimeout(30*time.Second))
		h.start(t.Context())
		if _, err := h.d.Submit(t.Context(), Command{ID: "bare", Device: "valve"}); err != nil {
			t.Fatal(err)
		}
		e, ok := log.issued(t, "bare")
		if !ok {
			t.Fatal("no Issued record")
		}
		cmd := e.Issued.Command
		if cmd.Role != "controller" || cmd.SubmittedAt.IsZero() || cmd.Deadline.Sub(cmd.SubmittedAt) != 30*time.Second {
			t.Errorf("issued %+v", cmd)
		}
		if out, ok := h.d.Lookup("bare"); !ok || out.Status != StatusSucceeded {
			t.Errorf("Lookup: %+v %v", out, ok)
		}
		if _, ok := h.d.Lookup("never"); ok {
			t.Error("Lookup found a command never submitted")
		}
		h.stop()
	})
}

func TestNewDispatcherRejectsBadArguments(t *testing.T) {
	log := &leaderLog{}
	leader := newFakeLeader(t, log, fakeToken(t, 1, 0))
	reg := NewRegistry()
	for name, tc := range map[string]struct {
		leader Leader
		reg    *Registry
		log    LogReader
		opts   []Option
	}{
		"nil leader":        {nil, reg, log, nil},
		"nil registry":      {leader, nil, log, nil},
		"nil log":           {leader, reg, nil, nil},
		"zero batch":        {leader, reg, log, []Option{WithMaxBatchRecords(0)}},
		"negative margin":   {leader, reg, log, []Option{WithSafetyMargin(-time.Second)}},
		"backoff inverted":  {leader, reg, log, []Option{WithRetryBackoff(time.Second, time.Millisecond)}},
		"empty log topic":   {leader, reg, log, []Option{WithLogTopic("", 3)}},
		"zero partitions":   {leader, reg, log, []Option{WithRequestsTopic("r", 0)}},
		"nil meterprovider": {leader, reg, log, []Option{WithMeterProvider(nil)}},
	} {
		if _, err := NewDispatcher(tc.leader, tc.reg, tc.log, tc.opts...); err == nil {
			t.Errorf("%s: NewDispatcher accepted it", name)
		}
	}
	d, err := NewDispatcher(leader, reg, log, WithLogTopic("audit", 3), WithRequestsTopic("in", 5))
	if err != nil {
		t.Fatal(err)
	}
	lp, _ := coordination.RolePartition(leader.Role(), 3)
	rp, _ := coordination.RolePartition(leader.Role(), 5)
	if d.LogPartition() != (coordination.TopicPartition{Topic: "audit", Partition: lp}) || d.RequestsPartition() != (coordination.TopicPartition{Topic: "in", Partition: rp}) {
		t.Errorf("partitions %v %v", d.LogPartition(), d.RequestsPartition())
	}
}
