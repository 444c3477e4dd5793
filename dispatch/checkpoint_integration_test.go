//go:build integration

package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// seedSettled writes n settled commands of role (an Issued record and a
// succeeded outcome each) into the log partition, with a transactional
// producer in transactions of batch records, as earlier leaders would
// have: it is the fast way to give a partition a history.
func seedSettled(t *testing.T, c cluster, tp topics, role string, prefix string, n int, submitted time.Time) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.TransactionalID(kafkatest.UniqueName(t, "seed")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(512<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	token, err := coordination.NewFencingToken(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	headers := []kgo.RecordHeader{{Key: dispatch.HeaderToken, Value: []byte(token.String())}, {Key: dispatch.HeaderMember, Value: []byte("seeder")}}
	record := func(e dispatch.Entry) *kgo.Record {
		e.Role, e.Token, e.Member, e.At = role, token, "seeder", submitted
		key, value, err := dispatch.EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: tp.log, Partition: 0, Key: key, Value: value, Headers: headers}
	}
	const batch = 5000
	for from := 0; from < n; from += batch {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var records []*kgo.Record
		for i := from; i < min(n, from+batch); i++ {
			cmd := dispatch.Command{ID: fmt.Sprintf("%s-%07d", prefix, i), Role: role, Device: "dev", Action: "set",
				Payload: []byte("p"), SubmittedAt: submitted, Deadline: submitted.Add(time.Hour)}
			records = append(records,
				record(dispatch.Entry{Kind: dispatch.EntryIssued, Issued: &dispatch.Issued{Command: cmd}}),
				record(dispatch.Entry{Kind: dispatch.EntryOutcome, Outcome: &dispatch.Outcome{CommandID: cmd.ID,
					Status: dispatch.StatusSucceeded, Attempt: dispatch.FirstAttempt}}))
		}
		if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
}

// nopDevice acts at once.
type nopDevice struct{}

func (nopDevice) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{Detail: "done"}, nil
}

// waitCheckpoint waits until the log partition holds a checkpoint of role
// among its last records; a delta checkpoint when delta is set.
func waitCheckpoint(t *testing.T, c cluster, tp topics, role string, delta bool) {
	t.Helper()
	reader, err := dispatch.NewKafkaLogReader(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, end, err := reader.Bounds(ctx, tp.logPartition())
		var entries []dispatch.Entry
		if err == nil {
			entries, err = reader.ReadRange(ctx, tp.logPartition(), dispatch.LogRange{From: max(0, end-100), Until: end})
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Kind != dispatch.EntryCheckpoint || e.Role != role {
				continue
			}
			if !delta {
				return
			}
			if p := *e.Checkpoint; p.Parts == 1 {
				if cp, err := dispatch.AssembleCheckpoint(role, []dispatch.CheckpointPart{p}); err == nil && cp.Base != nil {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no checkpoint of the role reached the log")
}

// TestCheckpointBoundsRecovery gives the role's log partition a history of
// 100,000 settled commands, with a neighbour's records after them. The first
// leader reads it all (there is no checkpoint yet) and writes a checkpoint;
// the next leader reads back from the end of the partition to that
// checkpoint and no further: the records it reads are bounded by the
// checkpoint interval and the tail, not by the history, and the base of the
// delta it finds is the one its standby read ahead. Both hold the
// history's IDs, so a duplicate of an old command returns its outcome and is
// not dispatched.
func TestCheckpointBoundsRecovery(t *testing.T) {
	const (
		interval  = 5_000
		neighbour = 3_000
		// The tail's records come to an interval, after which the first
		// leader writes a delta on the full checkpoint it wrote when it
		// recovered: a full one is due only every 100,000/4 records.
		tail = interval / 2
	)
	// KRABKA_CHECKPOINT_HISTORY sets a longer history for a measurement by
	// hand, such as 1000000.
	history := 100_000
	if v := os.Getenv("KRABKA_CHECKPOINT_HISTORY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KRABKA_CHECKPOINT_HISTORY=%q is not a positive count", v)
		}
		history = n
	}
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	submitted := time.Now()
	start := time.Now()
	seedSettled(t, c, tp, role.String(), "old", history, submitted)
	t.Logf("wrote %d settled commands in %v", history, time.Since(start))

	registry := dispatch.NewRegistry()
	if err := registry.Register("dev", nopDevice{}); err != nil {
		t.Fatal(err)
	}
	ready := func(ld *leader) time.Duration {
		t.Helper()
		begin := time.Now()
		for !ld.d.Recovered() {
			select {
			case <-ld.done:
				t.Fatalf("the dispatcher ended before it recovered: %v", <-ld.runErr)
			case <-time.After(5 * time.Millisecond):
			}
		}
		return time.Since(begin)
	}

	phase := time.Now()
	first := lead(t, c, tp, role, "m1", registry, dispatch.WithCheckpointInterval(interval))
	t.Logf("acquired in %v", time.Since(phase))
	firstReady := ready(first)
	full := first.d.RecoveryStats()
	t.Logf("first leader: ready in %v after acquiring, read %d records, checkpoint %d, retains %+v",
		firstReady, full.RecordsRead, full.CheckpointOffset, first.d.Retained())
	if full.RecordsRead < 2*history {
		t.Fatalf("the first leader read %d records of a history of %d", full.RecordsRead, 2*history)
	}
	if r := first.d.Retained(); r.Compact != history || r.Whole != 0 {
		t.Fatalf("the first leader holds %+v, want %d compact IDs", r, history)
	}
	phase = time.Now()
	waitCheckpoint(t, c, tp, role.String(), false)
	t.Logf("checkpoint seen in %v", time.Since(phase))
	phase = time.Now()
	cmds := make([]dispatch.Command, tail)
	for i := range cmds {
		cmds[i] = dispatch.Command{ID: fmt.Sprintf("new-%d", i), Device: "dev", Action: "set"}
	}
	for i, r := range first.d.SubmitBatch(t.Context(), cmds) {
		if r.Err != nil || r.Outcome.Status != dispatch.StatusSucceeded {
			t.Fatalf("SubmitBatch, command %d: %+v %v", i, r.Outcome, r.Err)
		}
	}
	t.Logf("tail submitted in %v", time.Since(phase))
	waitCheckpoint(t, c, tp, role.String(), true)
	phase = time.Now()
	first.stop()
	<-first.done
	t.Logf("first halted in %v", time.Since(phase))
	rctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_ = first.l.Resign(rctx)
	cancel()
	// A neighbour sharing the partition writes after the checkpoint.
	phase = time.Now()
	seedSettled(t, c, tp, "neighbour", "n", neighbour/2, submitted)
	t.Logf("neighbour wrote in %v", time.Since(phase))

	// The second leader's member read the base ahead, as a standby does.
	phase = time.Now()
	reader, err := dispatch.NewKafkaLogReader(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	standby, err := dispatch.NewStandby(role, reader, append(tp.options(), dispatch.WithCheckpointInterval(interval))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := standby.Prefetch(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("standby read the base ahead in %v", time.Since(phase))
	_, searched, err := reader.Bounds(t.Context(), coordination.TopicPartition{Topic: tp.log})
	if err != nil {
		t.Fatal(err)
	}
	// The neighbour writes again after the standby read: the recovery
	// reads those records alone, and builds on the standby's search below
	// them.
	seedSettled(t, c, tp, "neighbour", "m", 50, submitted)

	phase = time.Now()
	second := lead(t, c, tp, role, "m2", registry, dispatch.WithCheckpointInterval(interval), dispatch.WithStandby(standby))
	t.Logf("second acquired in %v", time.Since(phase))
	secondReady := ready(second)
	stats := second.d.RecoveryStats()
	t.Logf("second leader: ready in %v after acquiring, read %d records of %d (checkpoint at %d on a base at %d, base prefetched %t, checkpoint prefetched %t, %d of the role after it)",
		secondReady, stats.RecordsRead, stats.End-stats.Start, stats.CheckpointOffset, stats.BaseOffset, stats.BasePrefetched, stats.CheckpointPrefetched, stats.TailRecords)
	if stats.CheckpointOffset < 0 || stats.BaseOffset < 0 || !stats.BasePrefetched || !stats.CheckpointPrefetched {
		t.Fatalf("the second leader: %+v, want a delta on the base its standby read, found by the standby", stats)
	}
	if after := int(stats.End - searched); stats.RecordsRead == 0 || stats.RecordsRead > after {
		t.Fatalf("the second leader read %d records, want those written after the standby's read (%d offsets) alone", stats.RecordsRead, after)
	}
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	t.Logf("heap in use with both leaders' state: %d MiB", mem.HeapInuse>>20)
	// The search reads back one interval, then two: the delta lies within
	// the neighbour's records of the end; its base was read ahead.
	if bound := 3 * interval; stats.RecordsRead > bound {
		t.Fatalf("recovery read %d records; want at most %d, whatever the history of %d", stats.RecordsRead, bound, 2*history)
	}
	if r := second.d.Retained(); r.Compact != history+tail || r.Whole != 0 {
		t.Fatalf("the second leader holds %+v, want %d compact IDs", r, history+tail)
	}
	phase = time.Now()
	defer func() { t.Logf("lookups in %v", time.Since(phase)) }()
	id := fmt.Sprintf("old-%07d", 4242)
	out, ok, err := second.d.LookupContext(t.Context(), id)
	if err != nil || !ok || out.Status != dispatch.StatusSucceeded {
		t.Fatalf("Lookup %s: %+v %t %v", id, out, ok, err)
	}
	dup, err := second.d.Submit(t.Context(), dispatch.Command{ID: id, Role: role.String(), Device: "dev", Action: "set",
		Payload: []byte("p"), SubmittedAt: submitted, Deadline: submitted.Add(time.Hour)})
	if err != nil || dup.Status != dispatch.StatusSucceeded || dup.CommandID != id {
		t.Fatalf("a duplicate of a command of the history: %+v %v", dup, err)
	}
}

// TestDrainCheckpointOnCluster drains a leader on the real cluster after it
// took commands and a neighbour wrote past its checkpoint: the drain's
// checkpoint is the role's last record, a second drain writes nothing (the
// commit markers after the checkpoint do not count as records written
// since), and the successor's recovery finds it in its first read, with no
// tail.
func TestDrainCheckpointOnCluster(t *testing.T) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	seedSettled(t, c, tp, role.String(), "old", 2000, time.Now())
	registry := dispatch.NewRegistry()
	if err := registry.Register("dev", nopDevice{}); err != nil {
		t.Fatal(err)
	}
	recovered := func(ld *leader) {
		t.Helper()
		select {
		case <-ld.d.Ready():
		case <-ld.done:
			t.Fatalf("the dispatcher ended before it recovered: %v", <-ld.runErr)
		case <-time.After(30 * time.Second):
			t.Fatal("the dispatcher did not recover")
		}
	}
	reader, err := dispatch.NewKafkaLogReader(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	// end is the partition's end once no transaction is open on it: EndTxn
	// returns before the broker writes the commit markers, so the high
	// watermark moves by one after a commit returned, and the last stable
	// offset trails it until then.
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	end := func() int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		for {
			_, hw, err := reader.Bounds(ctx, tp.logPartition())
			if err != nil {
				t.Fatal(err)
			}
			listed, err := kadm.NewClient(adm).ListCommittedOffsets(ctx, tp.log)
			if err == nil {
				err = listed.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
			if o, ok := listed.Lookup(tp.log, 0); ok && o.Offset == hw {
				return hw
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the log partition's markers did not land: %v", ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	first := lead(t, c, tp, role, "m1", registry, dispatch.WithCheckpointInterval(100_000))
	recovered(first)
	cmds := make([]dispatch.Command, 300)
	for i := range cmds {
		cmds[i] = dispatch.Command{ID: fmt.Sprintf("new-%d", i), Device: "dev", Action: "set"}
	}
	for i, r := range first.d.SubmitBatch(t.Context(), cmds) {
		if r.Err != nil || r.Outcome.Status != dispatch.StatusSucceeded {
			t.Fatalf("SubmitBatch, command %d: %+v %v", i, r.Outcome, r.Err)
		}
	}
	seedSettled(t, c, tp, "neighbour", "n", 250, time.Now())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := first.d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	drained := end()
	entries, err := reader.ReadRange(t.Context(), tp.logPartition(), dispatch.LogRange{From: drained - 20, Until: drained})
	if err != nil {
		t.Fatal(err)
	}
	var last dispatch.Entry
	for _, e := range entries {
		if e.Role == role.String() {
			last = e
		}
	}
	// The token moves on with each commit under transactions v2: the
	// member names the writer.
	if last.Kind != dispatch.EntryCheckpoint || last.Member != "m1" {
		t.Fatalf("the role's last record after the drain: %s by %s; want a checkpoint by m1", last.Kind, last.Member)
	}
	if err := first.d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if again := end(); again != drained {
		t.Fatalf("a second drain, with nothing written since the first, moved the partition from %d to %d", drained, again)
	}
	first.stop()
	<-first.done
	rctx, rcancel := context.WithTimeout(t.Context(), 5*time.Second)
	_ = first.l.Resign(rctx)
	rcancel()

	second := lead(t, c, tp, role, "m2", registry, dispatch.WithCheckpointInterval(100_000))
	recovered(second)
	defer func() {
		second.stop()
		<-second.done
	}()
	stats := second.d.RecoveryStats()
	t.Logf("the successor read %d records: checkpoint at %d, %d of the role after it", stats.RecordsRead, stats.CheckpointOffset, stats.TailRecords)
	if stats.CheckpointOffset != last.Offset || stats.TailRecords != 0 || stats.RecordsRead > 1024 {
		t.Fatalf("the successor's recovery %+v; want the drain's checkpoint at %d, no tail, one read", stats, last.Offset)
	}
	if r := second.d.Retained(); r.Compact != 2300 || r.Whole != 0 {
		t.Fatalf("the successor holds %+v, want 2,300 compact IDs", r)
	}
}
