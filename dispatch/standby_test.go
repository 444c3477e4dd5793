package dispatch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// deltaLog runs a leader whose newest checkpoint is a delta on a full one,
// among a neighbour's records, stops it, and returns the log, the newest
// checkpoint and the IDs the leader issued.
func deltaLog(t *testing.T, interval int, devices map[string]Device) (*leaderLog, loggedCheckpoint, coordination.Role, []string) {
	t.Helper()
	// Outcomes that commit after the last check below may bring one more
	// checkpoint due before the leader stops, and it may be a full one:
	// such a log is written again.
	for attempt := 0; ; attempt++ {
		log, newest, role, ids := writeDeltaLog(t, interval, devices)
		if newest.Base != nil {
			return log, newest, role, ids
		}
		if attempt == 5 {
			t.Fatal("in six logs the leader's last checkpoint was a full one every time")
		}
	}
}

// writeDeltaLog is deltaLog's one attempt: its last checkpoint is a delta
// unless one more was written as the leader stopped.
func writeDeltaLog(t *testing.T, interval int, devices map[string]Device) (*leaderLog, loggedCheckpoint, coordination.Role, []string) {
	t.Helper()
	log := &leaderLog{}
	first := startLeader(t, log, &rangeLog{leaderLog: log}, 0, devices, WithCheckpointInterval(interval))
	var ids []string
	submit := func(prefix string, n int) {
		submitMany(t, first.d, prefix, n, time.Now())
		for i := range n {
			ids = append(ids, fmt.Sprintf("%s-%d", prefix, i))
		}
	}
	for round := range 8 {
		submit(fmt.Sprintf("r%d", round), 200)
		otherRole(t, log, round, 30)
	}
	for i := 0; ; i++ {
		if cps := checkpointsOf(t, log.entries(t)); cps[len(cps)-1].Base != nil {
			break
		}
		if i == 20 {
			t.Fatal("the leader wrote no delta last")
		}
		submit(fmt.Sprintf("last%d", i), interval/2+1)
	}
	first.stop(t)
	cps := checkpointsOf(t, log.entries(t))
	return log, cps[len(cps)-1], first.leader.Role(), ids
}

// gatedRange is a rangeLog whose reads inside the offsets of one checkpoint
// wait until the gate opens, and counts them; they fail with fail, when it
// is set before the gate opens.
type gatedRange struct {
	*rangeLog
	first, last int64
	gate        chan struct{}
	inside      atomic.Int64
	fail        error
}

func (g *gatedRange) ReadRange(ctx context.Context, tp coordination.TopicPartition, rng LogRange) ([]Entry, error) {
	if rng.From >= g.first && rng.Until <= g.last+1 {
		g.inside.Add(1)
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if g.fail != nil {
			return nil, g.fail
		}
	}
	return g.rangeLog.ReadRange(ctx, tp, rng)
}

// TestStandbyPrefetchesTheBase checks that a recovery builds on what its
// member's Standby read ahead: the checkpoint its search found and the IDs
// of the base, reading only the offsets after the Standby's search, and
// knowing what a recovery that read the whole log knows. When a checkpoint
// of the role came after the Standby's search, the recovery searches
// itself and still takes the base when the delta it finds names it. It
// waits for a Prefetch that is reading that base rather than reading it
// again, and reads the base itself when the Standby holds another one,
// which it then lets go, or has handed its IDs to an earlier recovery.
func TestStandbyPrefetchesTheBase(t *testing.T) {
	const interval = 40
	devices := map[string]Device{"dev": &countingDevice{}}
	log, newest, role, ids := deltaLog(t, interval, devices)
	ctx := context.Background()
	opts := []Option{WithCheckpointInterval(interval)}

	// expect returns what a recovery without a standby reads and finds in
	// the log as it is: each leader below writes a checkpoint of its own,
	// a delta on a base unless anyCheckpoint.
	expectAny := func(anyCheckpoint bool) RecoveryStats {
		t.Helper()
		d, err := NewDispatcher(newFakeLeader(t, log, fakeToken(t, 7, 0)), NewRegistry(), &rangeLog{leaderLog: log}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, st, err := d.recoverFromCheckpoint(ctx)
		if err != nil || st.BasePrefetched || st.CheckpointOffset < 0 || (!anyCheckpoint && st.BaseOffset < 0) {
			t.Fatalf("a recovery without a standby: %+v, %v; want a delta on a base", st, err)
		}
		return st
	}
	expect := func() RecoveryStats { t.Helper(); return expectAny(false) }
	want := expect()
	if want.BaseOffset != newest.Base.Last {
		t.Fatalf("without a standby: %+v, want the base at %d read", want, newest.Base.Last)
	}

	standby, err := NewStandby(role, &rangeLog{leaderLog: log}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := standby.Prefetch(ctx); err != nil {
		t.Fatal(err)
	}
	if standby.base == nil || standby.base.ref != *newest.Base {
		t.Fatalf("the standby holds %+v, want the base %+v", standby.base, *newest.Base)
	}
	reader := &rangeLog{leaderLog: log}
	second := startLeader(t, log, reader, 2, devices, append(opts, WithStandby(standby))...)
	got := second.d.RecoveryStats()
	baseParts := int(newest.Base.Last - newest.Base.First + 1)
	if !got.BasePrefetched || !got.CheckpointPrefetched || got.BaseOffset != want.BaseOffset || got.CheckpointOffset != want.CheckpointOffset ||
		got.TailRecords != want.TailRecords || got.RecordsRead != 0 || reader.read.Load() != 0 {
		t.Fatalf("with a standby: %+v (reader read %d), want what the standby read and nothing more, and the rest of %+v",
			got, reader.read.Load(), want)
	}
	if standby.base != nil {
		t.Fatal("the standby still holds the IDs it handed to a recovery")
	}
	whole := startLeader(t, log, log, 3, devices) // reads the whole log
	for _, id := range ids {
		a, okA := second.d.Lookup(id)
		b, okB := whole.d.Lookup(id)
		if !okA || !okB || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: after a prefetched base %+v %t, from the whole log %+v %t", id, a, okA, b, okB)
		}
	}
	if a, b := second.d.Retained(), whole.d.Retained(); a.Compact != len(ids) || a.Whole != 0 || b.Compact+b.Whole != len(ids) {
		t.Fatalf("after a prefetched base the dispatcher holds %+v, from the whole log %+v; want %d IDs", a, b, len(ids))
	}
	whole.stop(t)
	second.stop(t)

	// The IDs went to that recovery: the next one reads the base itself.
	want = expect()
	third := startLeader(t, log, &rangeLog{leaderLog: log}, 4, devices, append(opts, WithStandby(standby))...)
	if st := third.d.RecoveryStats(); st.BasePrefetched || st.RecordsRead != want.RecordsRead {
		t.Fatalf("after the standby's IDs were taken: %+v, want the base read", st)
	}
	third.stop(t)

	// Records of another role after the standby's search are read, and
	// the rest comes from the standby.
	if err := standby.Prefetch(ctx); err != nil {
		t.Fatal(err)
	}
	otherRole(t, log, 100, 25)
	want = expect()
	reader = &rangeLog{leaderLog: log}
	after := startLeader(t, log, reader, 5, devices, append(opts, WithStandby(standby))...)
	if st := after.d.RecoveryStats(); !st.CheckpointPrefetched || !st.BasePrefetched || st.RecordsRead != 25 ||
		reader.read.Load() != 25 || st.CheckpointOffset != want.CheckpointOffset || st.TailRecords != want.TailRecords {
		t.Fatalf("after 25 records of another role: %+v (reader read %d), want those read and the rest of %+v prefetched",
			st, reader.read.Load(), want)
	}
	after.stop(t)

	// A standby that holds another base hands nothing over, even its
	// search's checkpoint, which builds on the base it read.
	if err := standby.Prefetch(ctx); err != nil {
		t.Fatal(err)
	}
	standby.base.ref.Sequence++
	want = expect()
	fourth := startLeader(t, log, &rangeLog{leaderLog: log}, 8, devices, append(opts, WithStandby(standby))...)
	if st := fourth.d.RecoveryStats(); st.BasePrefetched || !st.CheckpointPrefetched || st.RecordsRead != baseParts {
		t.Fatalf("with a standby of another base: %+v, want the base read, and the checkpoint the standby found", st)
	}
	if standby.base != nil {
		t.Fatal("the standby still holds another base after a recovery")
	}
	fourth.stop(t)

	// A recovery that ends while the Prefetch still reads its base opens
	// intake at once, without the window: a new ID, and a command under an
	// ID that only the base holds, wait for the read, and nothing is
	// checkpointed meanwhile. Then the window loads, and each is answered
	// as with the window there from the start.
	gated := &gatedRange{rangeLog: &rangeLog{leaderLog: log}, first: newest.Base.First, last: newest.Base.Last, gate: make(chan struct{})}
	standby, err = NewStandby(role, gated, opts...)
	if err != nil {
		t.Fatal(err)
	}
	prefetched := make(chan error, 1)
	go func() { prefetched <- standby.Prefetch(ctx) }()
	for gated.inside.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	reader = &rangeLog{leaderLog: log}
	leader := newFakeLeader(t, log, fakeToken(t, 7, 9))
	registry := NewRegistry()
	counting := &countingDevice{}
	if err := registry.Register("dev", counting); err != nil {
		t.Fatal(err)
	}
	d, err := NewDispatcher(leader, registry, reader, append(opts, WithStandby(standby), WithCommitLinger(0))...)
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-runErr:
		t.Fatalf("Run returned before it recovered: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the recovery waited for the standby's read of the base")
	}
	if st := d.RecoveryStats(); !st.BasePrefetched || !st.CheckpointPrefetched || reader.read.Load() != 0 {
		t.Fatalf("recovered while the base was read: %+v, reader read %d; want the base and the checkpoint from the standby", st, reader.read.Load())
	}
	if r := d.Retained(); r.Compact != 0 {
		t.Fatalf("the window holds %d compact IDs before its base was read", r.Compact)
	}
	type answer struct {
		o   Outcome
		err error
	}
	submit := func(cmd Command) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			o, err := d.Submit(ctx, cmd)
			ch <- answer{o, err}
		}()
		return ch
	}
	now := time.Now()
	fresh := submit(Command{ID: "after-load", Device: "dev", Action: "set", Payload: []byte("p"), SubmittedAt: now, Deadline: now.Add(time.Hour)})
	reused := submit(Command{ID: ids[0], Device: "dev", Action: "set", Payload: []byte("other"), SubmittedAt: now, Deadline: now.Add(time.Hour)})
	time.Sleep(20 * time.Millisecond) // a command that did not wait would be answered here
	select {
	case a := <-fresh:
		t.Fatalf("a new command was answered before the window loaded: %+v, %v", a.o, a.err)
	case a := <-reused:
		t.Fatalf("a command under an ID of the base was answered before the window loaded: %+v, %v", a.o, a.err)
	default:
	}
	if n := counting.count("after-load"); n != 0 {
		t.Fatalf("the new command was dispatched %d times before the window loaded", n)
	}
	close(gated.gate)
	if err := <-prefetched; err != nil {
		t.Fatal(err)
	}
	if a := <-fresh; a.err != nil || a.o.Status != StatusSucceeded || counting.count("after-load") != 1 {
		t.Fatalf("the new command after the window loaded: %+v, %v, dispatched %d times; want it carried out once", a.o, a.err, counting.count("after-load"))
	}
	var conflict *IDConflictError
	if a := <-reused; !errors.As(a.err, &conflict) || counting.count(ids[0]) != 0 {
		t.Fatalf("a different command under the ID %s of the base: %+v, %v, dispatched %d times; want an IDConflictError and no dispatch",
			ids[0], a.o, a.err, counting.count(ids[0]))
	}
	if r := d.Retained(); r.Compact < len(ids)/2 {
		t.Fatalf("the window holds %d compact IDs once loaded, want most of the %d commands", r.Compact, len(ids))
	}
	leader.end(fmt.Errorf("test over: %w", coordination.ErrNotHeld))
	<-runErr

	// A checkpoint of the role after the standby's search (here written
	// by a leader without a standby, which settles more than an interval
	// of records) sends the recovery to search itself, from the offsets
	// after the standby's search down. When the checkpoint it finds there
	// is a delta on the base the standby holds, it takes that base.
	if err := standby.Prefetch(ctx); err != nil {
		t.Fatal(err)
	}
	held, searched := standby.base.ref, standby.base.found.end
	writer := startLeader(t, log, &rangeLog{leaderLog: log}, 10, devices, opts...)
	submitMany(t, writer.d, "after-search", interval/2+1, time.Now())
	writer.stop(t)
	cps := checkpointsOf(t, log.entries(t))
	if last := cps[len(cps)-1]; last.first < searched {
		t.Fatalf("the leader wrote no checkpoint after offset %d: the last is at %d", searched, last.first)
	}
	onHeld := cps[len(cps)-1].Base != nil && *cps[len(cps)-1].Base == held
	want = expectAny(true)
	drained := startLeader(t, log, &rangeLog{leaderLog: log}, 11, devices, append(opts, WithStandby(standby))...)
	if st := drained.d.RecoveryStats(); st.CheckpointPrefetched || st.BasePrefetched != onHeld || st.RecordsRead == 0 || st.RecordsRead > int(st.End-searched) ||
		st.CheckpointOffset != want.CheckpointOffset || st.TailRecords != want.TailRecords {
		t.Fatalf("after a checkpoint of the role: %+v, want a search of its own of the offsets from %d, the base prefetched only if that checkpoint is a delta on it (%t), and the rest of %+v",
			st, searched, onHeld, want)
	}
	drained.stop(t)
}

// TestStandbyChecksItsArguments checks NewStandby and WithStandby.
func TestStandbyChecksItsArguments(t *testing.T) {
	log := &leaderLog{}
	role := newFakeLeader(t, log, fakeToken(t, 7, 0)).Role()
	if _, err := NewStandby(role, log); err == nil {
		t.Error("a standby over a reader of whole logs: no error")
	}
	if _, err := NewStandby(coordination.Role{}, &rangeLog{leaderLog: log}); err == nil {
		t.Error("a standby of no role: no error")
	}
	if _, err := NewStandby(role, &rangeLog{leaderLog: log}, WithCheckpointInterval(-1)); err == nil {
		t.Error("a standby with a bad option: no error")
	}
	other, err := NewStandby(role, &rangeLog{leaderLog: log}, WithLogTopic("elsewhere", DefaultTopicPartitions))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDispatcher(newFakeLeader(t, log, fakeToken(t, 7, 0)), NewRegistry(), &rangeLog{leaderLog: log}, WithStandby(other)); err == nil {
		t.Error("a dispatcher with the standby of another log topic: no error")
	}
	if _, err := NewDispatcher(newFakeLeader(t, log, fakeToken(t, 7, 0)), NewRegistry(), &rangeLog{leaderLog: log}, WithStandby(nil)); err == nil {
		t.Error("a nil standby: no error")
	}
}

// slowBounds is a rangeLog whose Bounds waits until gate closes.
type slowBounds struct {
	*rangeLog
	asked chan struct{}
	gate  chan struct{}
}

func (s *slowBounds) Bounds(ctx context.Context, tp coordination.TopicPartition) (int64, int64, error) {
	close(s.asked)
	<-s.gate
	return s.rangeLog.Bounds(ctx, tp)
}

// TestStandbyKeepsNothingAfterARecovery checks that a Prefetch that began
// before a recovery ended keeps nothing: its member leads, and a leader
// holds no second copy of its window.
func TestStandbyKeepsNothingAfterARecovery(t *testing.T) {
	log, _, role, _ := deltaLog(t, 40, map[string]Device{"dev": &countingDevice{}})
	slow := &slowBounds{rangeLog: &rangeLog{leaderLog: log}, asked: make(chan struct{}), gate: make(chan struct{})}
	standby, err := NewStandby(role, slow, WithCheckpointInterval(40))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- standby.Prefetch(context.Background()) }()
	<-slow.asked
	standby.release() // as a recovery does as it ends
	close(slow.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if standby.base != nil {
		t.Fatalf("the standby kept %+v, read ahead for a recovery that had ended", standby.base.ref)
	}
	// The next Prefetch reads ahead again.
	slow.asked, slow.gate = make(chan struct{}), make(chan struct{})
	close(slow.gate)
	if err := standby.Prefetch(context.Background()); err != nil || standby.base == nil {
		t.Fatalf("a later Prefetch: %v, holds %t", err, standby.base != nil)
	}
}

// boundedLog is a rangeLog whose Bounds reports the end of its log as end,
// as a high watermark taken before the records after it were written.
type boundedLog struct {
	*rangeLog
	end int64
}

func (b *boundedLog) Bounds(ctx context.Context, tp coordination.TopicPartition) (int64, int64, error) {
	start, end, err := b.rangeLog.Bounds(ctx, tp)
	return start, min(end, b.end), err
}

// TestStandbySearchEndsInsideACheckpoint checks a Standby's search that
// ended between the parts of a checkpoint, as one that read while the
// transaction writing them was open: it found the older checkpoint, and the
// recovery, which finds the newer one's last part after that search, does
// not build on it but searches itself and finds the newer one whole.
func TestStandbySearchEndsInsideACheckpoint(t *testing.T) {
	const role = "plant-a"
	log := &leaderLog{}
	tok := mustToken(t, 1, 1)
	appendEntry := func(e Entry) {
		t.Helper()
		key, value, err := EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		log.append([]coordination.GuardedRecord{{Key: key, Value: value}})
	}
	at := time.Now().Add(-time.Minute)
	checkpoint := func(seq int64, hashes ...uint64) []CheckpointPart {
		t.Helper()
		ids := make([]compactID, len(hashes))
		for i, h := range hashes {
			ids[i] = compactID{hash: h, first: int64(i), outcome: int64(i), submitted: at.UnixMilli()}
		}
		parts, err := encodeWindowCheckpoint(role, seq, Checkpoint{Window: DefaultDedupWindow}, blocksOf(ids))
		if err != nil || len(parts) != 1 {
			t.Fatalf("encode: %d parts, %v", len(parts), err)
		}
		return parts
	}
	older := checkpoint(1, 10)
	appendEntry(Entry{Kind: EntryCheckpoint, Role: role, Token: tok, Member: "node-1", At: at, Checkpoint: &older[0]})
	otherRole(t, log, 0, 3)
	// The newer checkpoint, in two parts, with a record of another role
	// between them.
	newer := checkpoint(2, 10, 20, 30)[0]
	data := newer.Data
	half := len(data) / 2
	for i, chunk := range [][]byte{data[:half], data[half:]} {
		p := CheckpointPart{Sequence: 2, Part: i, Parts: 2, Data: chunk}
		appendEntry(Entry{Kind: EntryCheckpoint, Role: role, Token: tok, Member: "node-1", At: at, Checkpoint: &p})
		if i == 0 {
			otherRole(t, log, 1, 1)
		}
	}
	split := int64(6) // the offset of the newer checkpoint's second part

	ctx := context.Background()
	reader := &rangeLog{leaderLog: log}
	start, end, err := reader.Bounds(ctx, coordination.TopicPartition{})
	if err != nil || end != split+1 {
		t.Fatalf("bounds %d to %d, %v; want the log to end after offset %d", start, end, err, split)
	}
	r, err := coordination.NewRole(role)
	if err != nil {
		t.Fatal(err)
	}
	standby, err := NewStandby(r, &boundedLog{rangeLog: reader, end: split}, WithCheckpointInterval(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := standby.Prefetch(ctx); err != nil {
		t.Fatal(err)
	}
	if f := standby.base.found; f == nil || f.end != split || f.search.at != 0 {
		t.Fatalf("the standby's search found %+v, want the older checkpoint at offset 0, read up to %d", f, split)
	}
	requests := coordination.TopicPartition{Topic: DefaultRequestsTopic}
	s, stats, err := recoverState(ctx, role, requests, start, end, 4, roleRange(reader, coordination.TopicPartition{}, role), standby, false)
	if err != nil {
		t.Fatal(err)
	}
	if stats.CheckpointPrefetched || stats.CheckpointOffset != split {
		t.Fatalf("recovery: %+v, want the newer checkpoint at offset %d found by its own search", stats, split)
	}
	var got []uint64
	for _, id := range s.ids.all() {
		got = append(got, id.hash)
	}
	if !reflect.DeepEqual(got, []uint64{10, 20, 30}) {
		t.Fatalf("recovered the IDs %v, want those of the newer checkpoint", got)
	}

	// Read up to the end, the standby's search finds the newer one, and
	// the recovery builds on it without a read.
	standby.release()
	standby, err = NewStandby(r, reader, WithCheckpointInterval(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := standby.Prefetch(ctx); err != nil {
		t.Fatal(err)
	}
	s, stats, err = recoverState(ctx, role, requests, start, end, 4, roleRange(reader, coordination.TopicPartition{}, role), standby, false)
	if err != nil || !stats.CheckpointPrefetched || stats.CheckpointOffset != split || stats.RecordsRead != 0 || s.ids.count() != 3 {
		t.Fatalf("recovery after a search up to the end: %+v, %d IDs, %v; want the newer checkpoint prefetched", stats, s.ids.count(), err)
	}
}

// TestRecoveryWaitsForTheStandbysSearch checks that a recovery that begins
// while its Standby's search is under way, as at a cold start when the
// campaign wins first, waits for that search and builds on it rather than
// searching beside it.
func TestRecoveryWaitsForTheStandbysSearch(t *testing.T) {
	const interval = 40
	log, _, role, _ := deltaLog(t, interval, map[string]Device{"dev": &countingDevice{}})
	slow := &slowBounds{rangeLog: &rangeLog{leaderLog: log}, asked: make(chan struct{}), gate: make(chan struct{})}
	opts := []Option{WithCheckpointInterval(interval)}
	standby, err := NewStandby(role, slow, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prefetched := make(chan error, 1)
	go func() { prefetched <- standby.Prefetch(ctx) }()
	<-slow.asked

	reader := &rangeLog{leaderLog: log}
	leader := newFakeLeader(t, log, fakeToken(t, 7, 3))
	registry := NewRegistry()
	if err := registry.Register("dev", &countingDevice{}); err != nil {
		t.Fatal(err)
	}
	d, err := NewDispatcher(leader, registry, reader, append(opts, WithStandby(standby), WithCommitLinger(0))...)
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(ctx) }()
	time.Sleep(20 * time.Millisecond) // a recovery that did not wait would finish here
	if d.Recovered() {
		t.Fatalf("the recovery did not wait for the standby's search: %+v", d.RecoveryStats())
	}
	close(slow.gate)
	if err := <-prefetched; err != nil {
		t.Fatal(err)
	}
	for !d.Recovered() {
		select {
		case err := <-runErr:
			t.Fatalf("Run returned before it recovered: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	if st := d.RecoveryStats(); !st.CheckpointPrefetched || !st.BasePrefetched || st.RecordsRead != 0 || reader.read.Load() != 0 {
		t.Fatalf("after waiting for the standby's search: %+v, reader read %d; want all of it from the standby", st, reader.read.Load())
	}
	leader.end(fmt.Errorf("test over: %w", coordination.ErrNotHeld))
	<-runErr
}
