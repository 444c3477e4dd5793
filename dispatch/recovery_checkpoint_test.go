package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// rangeLog is a leaderLog that also reads ranges, as the Kafka reader does,
// and counts the records it returns.
type rangeLog struct {
	*leaderLog
	read atomic.Int64
}

func (l *rangeLog) Bounds(context.Context, coordination.TopicPartition) (int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return 0, int64(len(l.records)), nil
}

func (l *rangeLog) ReadRange(_ context.Context, _ coordination.TopicPartition, rng LogRange) ([]Entry, error) {
	l.mu.Lock()
	from, to := max(rng.From, 0), min(rng.Until, int64(len(l.records)))
	records := append([]coordination.GuardedRecord(nil), l.records[from:to]...)
	l.mu.Unlock()
	out := make([]Entry, 0, len(records))
	for i, r := range records {
		e, err := DecodeEntry(r.Key, r.Value)
		if err != nil {
			return nil, err
		}
		e.Offset = from + int64(i)
		e.Trace = traceFromHeaders(r.Headers)
		out = append(out, e)
	}
	l.read.Add(int64(len(out)))
	return out, nil
}

// ReadLog counts what it reads too.
func (l *rangeLog) ReadLog(ctx context.Context, tp coordination.TopicPartition) ([]Entry, error) {
	out, err := l.leaderLog.ReadLog(ctx, tp)
	l.read.Add(int64(len(out)))
	return out, err
}

// countingDevice succeeds at once and counts its calls by command ID.
type countingDevice struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingDevice) Dispatch(_ context.Context, cmd Command, _ coordination.FencingToken) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = make(map[string]int)
	}
	c.calls[cmd.ID]++
	return Result{Detail: "done"}, nil
}

func (c *countingDevice) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// leaderRun is a dispatcher running over a fake leader.
type leaderRun struct {
	leader *fakeLeader
	d      *Dispatcher
	err    chan error
}

func startLeader(t *testing.T, log *leaderLog, reader LogReader, epoch int16, devices map[string]Device, options ...Option) *leaderRun {
	t.Helper()
	registry := NewRegistry()
	for name, dev := range devices {
		if err := registry.Register(name, dev); err != nil {
			t.Fatal(err)
		}
	}
	leader := newFakeLeader(t, log, fakeToken(t, 7, epoch))
	d, err := NewDispatcher(leader, registry, reader, append([]Option{WithCommitLinger(0), WithCommitGap(0)}, options...)...)
	if err != nil {
		t.Fatal(err)
	}
	r := &leaderRun{leader: leader, d: d, err: make(chan error, 1)}
	go func() { r.err <- d.Run(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for !d.Recovered() {
		select {
		case err := <-r.err:
			t.Fatalf("Run returned before it recovered: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the dispatcher did not recover")
		}
		time.Sleep(time.Millisecond)
	}
	return r
}

func (r *leaderRun) stop(t *testing.T) {
	t.Helper()
	r.leader.end(fmt.Errorf("test over: %w", coordination.ErrNotHeld))
	<-r.err
}

// submitMany submits n commands named prefix-i, from a few goroutines, and
// fails the test for any that does not succeed.
func submitMany(t *testing.T, d *Dispatcher, prefix string, n int, submitted time.Time) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				cmd := Command{ID: fmt.Sprintf("%s-%d", prefix, i), Device: "dev", Action: "set", Payload: []byte("p"),
					SubmittedAt: submitted, Deadline: submitted.Add(2 * time.Hour)}
				o, err := d.Submit(context.Background(), cmd)
				if err == nil && o.Status != StatusSucceeded {
					err = fmt.Errorf("%s: %s", cmd.ID, o.Status)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// otherRole appends n records of another role to the log, as a neighbour
// sharing the partition writes them.
func otherRole(t *testing.T, log *leaderLog, round, n int) {
	t.Helper()
	for i := range n {
		e := Entry{Kind: EntryOutcome, Role: "neighbour", Token: fakeToken(t, 99, 0), Member: "node-9", At: time.Now(),
			Outcome: &Outcome{CommandID: fmt.Sprintf("n-%d-%d", round, i), Status: StatusRejected, Attempt: NoAttempt, Reason: "x"}}
		key, value, err := EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		log.append([]coordination.GuardedRecord{{Key: key, Value: value}})
	}
}

// TestCheckpointRecovery runs a leader that writes checkpoints among its
// neighbour's records, then a successor: the successor reads about a
// checkpoint interval and the tail, not the history, and knows what a
// successor that reads the whole log knows.
func TestCheckpointRecovery(t *testing.T) {
	const interval = 100
	log := &leaderLog{}
	dev := &countingDevice{}
	devices := map[string]Device{"dev": dev}
	first := startLeader(t, log, &rangeLog{leaderLog: log}, 0, devices, WithCheckpointInterval(interval))
	for round := range 10 {
		submitMany(t, first.d, fmt.Sprintf("r%d", round), 100, time.Now())
		otherRole(t, log, round, 150)
	}
	first.stop(t)
	verifyClean(t, log)
	total := len(log.entries(t))
	checkpoints := 0
	for _, e := range log.entries(t) {
		if e.Kind == EntryCheckpoint {
			checkpoints++
		}
	}
	if checkpoints == 0 {
		t.Fatal("the leader wrote no checkpoint")
	}

	reader := &rangeLog{leaderLog: log}
	second := startLeader(t, log, reader, 1, devices, WithCheckpointInterval(interval))
	stats := second.d.RecoveryStats()
	t.Logf("log of %d records, %d checkpoint parts; recovery read %d records, %d of the role after the checkpoint at %d",
		total, checkpoints, stats.RecordsRead, stats.TailRecords, stats.CheckpointOffset)
	if stats.CheckpointOffset < 0 {
		t.Fatal("recovery found no checkpoint")
	}
	// The search reads one interval, then two, back from the end; the last
	// checkpoint is at most an interval of the role's records (and of the
	// neighbour's 150) before the end.
	if bound := 3 * (interval + 150); stats.RecordsRead > bound || int(reader.read.Load()) > bound {
		t.Fatalf("recovery read %d records (%d by the reader) of a log of %d; want at most %d", stats.RecordsRead, reader.read.Load(), total, bound)
	}
	if r := second.d.Retained(); r.Whole != 0 || r.Compact != 1000 {
		t.Fatalf("the successor holds %+v, want 1000 compact IDs and nothing whole", r)
	}

	whole := startLeader(t, log, log, 2, devices) // reads the whole log
	for round := range 10 {
		for i := range 100 {
			id := fmt.Sprintf("r%d-%d", round, i)
			a, okA := second.d.Lookup(id)
			b, okB := whole.d.Lookup(id)
			if !okA || !okB || !reflect.DeepEqual(a, b) || a.Status != StatusSucceeded {
				t.Fatalf("%s: from the checkpoint %+v %t, from the whole log %+v %t", id, a, okA, b, okB)
			}
		}
	}
	// A duplicate after the takeover returns the first's outcome, read from
	// the log at its offset, and is not dispatched again.
	sent := time.Now()
	cmd := Command{ID: "r3-7", Device: "dev", Action: "set", Payload: []byte("p"), SubmittedAt: sent, Deadline: sent.Add(2 * time.Hour)}
	before := reader.read.Load()
	o, err := second.d.Submit(context.Background(), cmd)
	if err != nil || o.Status != StatusSucceeded || o.CommandID != "r3-7" {
		t.Fatalf("duplicate submit: %+v, %v", o, err)
	}
	if n := reader.read.Load() - before; n < 1 || n > 2 {
		t.Fatalf("the duplicate read %d records, want its Issued record and its outcome", n)
	}
	if n := dev.count("r3-7"); n != 1 {
		t.Fatalf("r3-7 dispatched %d times", n)
	}
	var conflict *IDConflictError
	cmd.Action = "other"
	if _, err := second.d.Submit(context.Background(), cmd); !errors.As(err, &conflict) {
		t.Fatalf("a different command under a settled ID: %v, want an *IDConflictError", err)
	}
	whole.stop(t)
	second.stop(t)
	verifyClean(t, log)
	// A window of at most checkpointDivisor intervals of IDs is written
	// whole every time, in the layout the release before reads, the
	// successor's first checkpoint included; a larger one may be a delta on
	// the newest whole one before it.
	cps := checkpointsOf(t, log.entries(t))
	if last := cps[len(cps)-1]; last.token != second.leader.Token() {
		t.Fatalf("the successor wrote no checkpoint; the last is by %s", last.token)
	}
	fulls := map[int64]loggedCheckpoint{} // by the offset of the last part
	deltas := 0
	for _, cp := range cps {
		if cp.Base == nil {
			fulls[cp.last] = cp
			continue
		}
		deltas++
		base, ok := fulls[cp.Base.Last]
		if !ok || base.first != cp.Base.First {
			t.Fatalf("the delta at offset %d names a base at offsets %d to %d that no whole checkpoint before it took", cp.last, cp.Base.First, cp.Base.Last)
		}
		if n := len(base.IDs) + len(cp.IDs); n <= checkpointDivisor*interval {
			t.Fatalf("a window of %d IDs, at most %d intervals, was checkpointed as a delta at offset %d", n, checkpointDivisor, cp.last)
		}
	}
	if deltas == 0 {
		t.Fatalf("a window of some 1,100 IDs, more than %d intervals, was never checkpointed as a delta", checkpointDivisor)
	}
}

// TestDedupWindow checks the window's rule on a manual clock: a duplicate
// inside the window returns the first's outcome, a command submitted before
// the window is refused, settled commands are held as compact IDs only, and
// they are let go once the window and its skew margin passed, after which a
// retry of one is outside the window and refused, never dispatched twice.
func TestDedupWindow(t *testing.T) {
	const window = time.Hour
	clock := coordination.NewManualClock(time.Now().UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.NowMillis()) }
	log := &leaderLog{}
	dev := &countingDevice{}
	r := startLeader(t, log, &rangeLog{leaderLog: log}, 0, map[string]Device{"dev": dev}, WithDedupWindow(window), WithClock(clock))
	defer r.stop(t)
	ctx := context.Background()
	submit := func(id string, at time.Time) (Outcome, error) {
		return r.d.Submit(ctx, Command{ID: id, Device: "dev", Action: "set", Payload: []byte("p"), SubmittedAt: at, Deadline: at.Add(2 * time.Hour)})
	}

	const n = 3000
	firstAt := now()
	submitMany(t, r.d, "a", n, firstAt)
	if got := r.d.Retained(); got.Whole != 0 || got.Compact != n {
		t.Fatalf("after %d settled commands the dispatcher holds %+v, want them all as compact IDs", n, got)
	}
	if o, err := submit("a-17", firstAt); err != nil || o.Status != StatusSucceeded {
		t.Fatalf("a duplicate inside the window: %+v, %v", o, err)
	}

	var outside *OutsideWindowError
	if _, err := submit("b", now().Add(-window-time.Second)); !errors.Is(err, ErrOutsideDedupWindow) || !errors.As(err, &outside) {
		t.Fatalf("a command submitted before the window: %v, want ErrOutsideDedupWindow", err)
	}
	if _, ok := r.d.Lookup("b"); ok {
		t.Fatal("the command refused by the window was recorded")
	}

	// Inside the window plus its skew margin nothing is let go.
	clock.Advance(window + DedupClockSkew/2)
	submitMany(t, r.d, "c", 1, now())
	if got := r.d.Retained(); got.Compact != n+1 {
		t.Fatalf("inside the skew margin the dispatcher holds %+v, want %d compact IDs", got, n+1)
	}
	if o, err := submit("a-17", firstAt); err != nil || o.Status != StatusSucceeded {
		t.Fatalf("a duplicate inside the skew margin: %+v, %v", o, err)
	}

	clock.Advance(DedupClockSkew + sweepEvery)
	submitMany(t, r.d, "d", 1, now())
	if got := r.d.Retained(); got.Whole != 0 || got.Compact != 2 {
		t.Fatalf("past the window the dispatcher holds %+v, want the 2 newer compact IDs", got)
	}
	if _, err := submit("a-17", firstAt); !errors.Is(err, ErrOutsideDedupWindow) {
		t.Fatalf("a retry of a command that left the window: %v, want ErrOutsideDedupWindow", err)
	}
	if c := dev.count("a-17"); c != 1 {
		t.Fatalf("a-17 dispatched %d times", c)
	}
	if _, ok := r.d.Lookup("a-17"); ok {
		t.Fatal("Lookup finds a command that left the window")
	}
}

// TestRetainedDoesNotGrowWithHistory checks that what a dispatcher holds
// whole does not grow with the commands it settled: each settled one costs
// a compact ID, and nothing else.
func TestRetainedDoesNotGrowWithHistory(t *testing.T) {
	log := &leaderLog{}
	r := startLeader(t, log, &rangeLog{leaderLog: log}, 0, map[string]Device{"dev": &countingDevice{}})
	defer r.stop(t)
	for round := range 4 {
		submitMany(t, r.d, fmt.Sprintf("m%d", round), 1000, time.Now())
		got := r.d.Retained()
		if got.Whole != 0 || got.Compact != 1000*(round+1) {
			t.Fatalf("after %d settled commands the dispatcher holds %+v", 1000*(round+1), got)
		}
		r.d.mu.Lock()
		n := len(r.d.commands)
		r.d.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d commands held whole after they settled", n)
		}
	}
}

// TestRecoveryFromCheckpointEqualsFullLog is the checkpoint's property:
// for any lawful log and any cut, a fold from a checkpoint of the records
// before the cut and the records after it gives the state of a fold of the
// whole log.
func TestRecoveryFromCheckpointEqualsFullLog(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	requests := coordination.TopicPartition{Topic: DefaultRequestsTopic, Partition: 12}
	for seed := range 400 {
		c := randChoices{rand.New(rand.NewPCG(uint64(seed), 11))}
		entries := placedLawfulLog(c, now)
		cut := c.intn(len(entries) + 1)
		full := foldLog(propRole, requests, entries)

		decoded := roundTrip(t, seed, checkpointOfFold(foldLog(propRole, requests, entries[:cut]), now))
		f := newFolder(propRole, requests)
		f.seed(decoded, blocksOf(toCompacts(decoded.IDs)))
		for i := cut; i < len(entries); i++ {
			f.apply(&entries[i])
		}
		sameState(t, fmt.Sprintf("seed %d cut %d/%d", seed, cut, len(entries)), full, f.finish())
	}
}

// placedLawfulLog returns a lawful log of 10 to 129 records, each at its
// index as its offset and written at now.
func placedLawfulLog(c choices, now time.Time) []Entry {
	entries := lawfulLog(c, 10+c.intn(120), now)
	for i := range entries {
		entries[i].Offset = int64(i)
		entries[i].At = now
	}
	return entries
}

// roundTrip encodes cp as checkpoint seed of the property role and decodes
// it again.
func roundTrip(t *testing.T, seed int, cp Checkpoint) Checkpoint {
	t.Helper()
	parts, err := EncodeCheckpoint(propRole, int64(seed), cp)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	out, err := AssembleCheckpoint(propRole, parts)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return out
}

// checkpointOfFold takes a checkpoint of a folded state as the dispatcher
// does: settled commands as compact IDs, the rest whole.
func checkpointOfFold(st recovered, now time.Time) Checkpoint {
	cp := Checkpoint{Window: DefaultDedupWindow, IntakeTopic: DefaultRequestsTopic, IntakePartition: 12, IntakeNext: st.intake}
	for _, c := range st.order {
		at := c.cmd.SubmittedAt
		if at.IsZero() {
			at = now
		}
		if c.phase == phaseTerminal && c.first >= 0 && c.outcomeAt >= c.first {
			cp.IDs = append(cp.IDs, CheckpointID{Hash: IDHash(c.cmd.ID), First: c.first, Outcome: c.outcomeAt, SubmittedAt: at})
			continue
		}
		cp.Commands = append(cp.Commands, checkpointCommandOf(c, propRole, at))
	}
	sortIDs(cp.IDs)
	return cp
}

// sameState compares a state folded from the whole log with one folded
// from a checkpoint and the records after it.
func sameState(t *testing.T, name string, full, got recovered) {
	t.Helper()
	if full.intake != got.intake {
		t.Fatalf("%s: intake %d, from the checkpoint %d", name, full.intake, got.intake)
	}
	byID := map[string]*command{}
	for _, c := range got.order {
		byID[c.cmd.ID] = c
	}
	ids := map[uint64]compactID{}
	for _, id := range flat(got.ids) {
		ids[id.hash] = id
	}
	for _, c := range full.order {
		g, ok := byID[c.cmd.ID]
		if !ok {
			id, held := ids[IDHash(c.cmd.ID)]
			if c.phase != phaseTerminal || !held || id.first != c.first || id.outcome != c.outcomeAt {
				t.Fatalf("%s: command %q (phase %d, offsets %d %d) is missing from the checkpoint's state (compact %+v %t)",
					name, c.cmd.ID, c.phase, c.first, c.outcomeAt, id, held)
			}
			continue
		}
		delete(byID, c.cmd.ID)
		if c.phase != g.phase || c.attempt != g.attempt || c.issued != g.issued || c.first != g.first || c.token != g.token {
			t.Fatalf("%s: command %q: whole log %+v, checkpoint %+v", name, c.cmd.ID, *c, *g)
		}
		if c.issued && (len(c.cmd.Differences(g.cmd)) > 0 || !c.cmd.SubmittedAt.Equal(g.cmd.SubmittedAt)) {
			t.Fatalf("%s: command %q: whole log %+v, checkpoint %+v", name, c.cmd.ID, c.cmd, g.cmd)
		}
		if !c.phase.pending() && !reflect.DeepEqual(c.outcome, g.outcome) {
			t.Fatalf("%s: command %q: outcome %+v, from the checkpoint %+v", name, c.cmd.ID, c.outcome, g.outcome)
		}
	}
	for id := range byID {
		t.Fatalf("%s: the checkpoint's state holds %q, which the whole log does not", name, id)
	}
}

// sortIDs orders compact IDs by their hash, as a checkpoint holds them.
func sortIDs(ids []CheckpointID) {
	slices.SortFunc(ids, func(a, b CheckpointID) int { return cmp.Compare(a.Hash, b.Hash) })
}

// toCompacts returns ids as the dispatcher holds them.
func toCompacts(ids []CheckpointID) []compactID {
	out := make([]compactID, len(ids))
	for i, id := range ids {
		out[i] = toCompact(id)
	}
	return out
}

// TestDrainEndsWithACheckpoint drains a leader whose last checkpoint lies
// behind its own records and its neighbour's: the drain writes a checkpoint
// of the settled state, so that the successor reads no tail; a drain with
// nothing written since writes none.
func TestDrainEndsWithACheckpoint(t *testing.T) {
	log := &leaderLog{}
	devices := map[string]Device{"dev": &countingDevice{}}
	// The interval is never reached: no checkpoint but the drain's.
	first := startLeader(t, log, &rangeLog{leaderLog: log}, 0, devices, WithCheckpointInterval(100_000))
	submitMany(t, first.d, "a", 300, time.Now())
	otherRole(t, log, 0, 500)
	for _, e := range log.entries(t) {
		if e.Kind == EntryCheckpoint {
			t.Fatalf("a checkpoint at offset %d before the drain", e.Offset)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	entries := log.entries(t)
	cps := checkpointsOf(t, entries)
	if len(cps) != 1 {
		t.Fatalf("the drain wrote %d checkpoints, want 1", len(cps))
	}
	cp := cps[0]
	if cp.token != first.leader.Token() || cp.last != int64(len(entries)-1) || len(cp.Commands) != 0 {
		t.Fatalf("the drain's checkpoint: by %s, ending at %d of %d records, %d commands held whole; want the leader's, last, none",
			cp.token, cp.last, len(entries), len(cp.Commands))
	}
	// Nothing moved since: a second drain writes nothing.
	if err := first.d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(log.entries(t)); n != len(entries) {
		t.Fatalf("a drain with nothing new wrote %d records", n-len(entries))
	}
	first.stop(t)
	verifyClean(t, log)

	second := startLeader(t, log, &rangeLog{leaderLog: log}, 1, devices, WithCheckpointInterval(100_000))
	defer second.stop(t)
	stats := second.d.RecoveryStats()
	// The first read of the search, 1,024 offsets, holds the checkpoint.
	if stats.CheckpointOffset != cp.last || stats.TailRecords != 0 || stats.RecordsRead > 1024 {
		t.Fatalf("the successor's recovery: %+v; want it to start at the checkpoint ending at %d, with no tail, in one read", stats, cp.last)
	}
	if r := second.d.Retained(); r.Compact != 300 {
		t.Fatalf("the successor holds %+v, want 300 compact IDs", r)
	}
	// A tail of 20 records lies within the next leader's first read beside
	// the checkpoint: a drain leaves it, rather than delay the handover by
	// a transaction.
	submitMany(t, second.d, "b", 10, time.Now())
	if err := second.d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(checkpointsOf(t, log.entries(t))); n != 1 {
		t.Fatalf("a drain after a tail of 20 records left %d checkpoints, want the one before it", n)
	}
}
