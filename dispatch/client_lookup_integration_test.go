//go:build integration

package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bulk writes entries in one transaction with every record's timestamp set
// to at, producing them all before it waits, so that a long history is
// written in seconds.
func (w *logWriter) bulk(ctx context.Context, at time.Time, entries []Entry) {
	w.t.Helper()
	if err := w.cl.BeginTransaction(); err != nil {
		w.t.Fatal(err)
	}
	id, epoch, err := w.cl.ProducerID(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	token := mustToken(w.t, id, epoch)
	var mu sync.Mutex
	var produceErr error
	for _, e := range entries {
		if e.Role == "" {
			e.Role = w.role
		}
		e.Member, e.Token, e.At = w.member, token, at
		key, value, err := EncodeEntry(e)
		if err != nil {
			w.t.Fatal(err)
		}
		rec := &kgo.Record{Topic: w.tp.Topic, Partition: int32(w.tp.Partition), Key: key, Value: value, Timestamp: at}
		w.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				produceErr = err
				mu.Unlock()
			}
		})
	}
	if err := w.cl.Flush(ctx); err != nil {
		w.t.Fatal(err)
	}
	if err := errors.Join(produceErr, w.cl.EndTransaction(ctx, kgo.TransactionEndTry(produceErr == nil))); err != nil {
		w.t.Fatal(err)
	}
}

// settled returns the Issued and succeeded Outcome records of n commands
// named prefix-i, of role ("" for the writer's).
func settled(role, prefix string, n int) []Entry {
	entries := make([]Entry, 0, 2*n)
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		issued, outcome := issuedEntry(id), outcomeEntry(id, StatusSucceeded, FirstAttempt)
		issued.Role, outcome.Role = role, role
		entries = append(entries, issued, outcome)
	}
	return entries
}

// TestLookupsDoNotScan writes a history of many settled commands, of the
// role and of another role sharing its partition, two hours before now, on
// the real cluster, and shows that a lookup reads a bounded number of
// records: Wait after a Send reads from where the request was written, a
// second submission of a settled command finds its outcome in the lookup
// window, and Status without a hint reads the window alone and answers a
// command older than it with an *OutsideLookupWindowError. LookupSince reaches the
// old command.
func TestLookupsDoNotScan(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const partitions = 3
	logTopic := kafkatest.UniqueName(t, "dispatch.log")
	requestsTopic := kafkatest.UniqueName(t, "dispatch.requests")
	kafkatest.CreateTopic(t, brokers, logTopic, partitions, nil)
	kafkatest.CreateTopic(t, brokers, requestsTopic, partitions, nil)
	client, err := NewClient(brokers, WithClientLogTopic(logTopic, partitions), WithClientRequestsTopic(requestsTopic, partitions),
		WithClientLookupWindow(time.Hour), WithClientLookupSkew(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	role := kafkatest.UniqueName(t, "role")
	tp, _ := client.LogPartition(role)
	w := newLogWriter(t, brokers, tp, role, "node-1", kafkatest.UniqueName(t, "txn"))
	const history = 5000
	past := time.Now().Add(-2 * time.Hour)
	// One transaction: its commit marker carries the time of the commit,
	// now, and the history's records the time they claim.
	var old []Entry
	for i := range 5 {
		old = append(old, settled("", fmt.Sprintf("old%d", i), history/5)...)
		old = append(old, settled("other-role", fmt.Sprintf("old%d", i), history/5)...)
	}
	w.bulk(ctx, past, old)
	base := client.RecordsRead()
	if entries, err := client.ReadLog(ctx, role); err != nil || len(entries) != 4*history {
		t.Fatalf("the history holds %d entries, %v; want %d", len(entries), err, 4*history)
	}
	if full := client.RecordsRead() - base; full < 4*history {
		t.Fatalf("reading the whole log read %d records, want at least %d", full, 4*history)
	}

	cmd := sampleCommand()
	cmd.ID, cmd.Role = "fresh", role
	cmd.SubmittedAt = time.Now().Truncate(time.Millisecond)
	cmd.Deadline = cmd.SubmittedAt.Add(time.Hour)
	receipt, err := client.Send(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if receipt.Role != role || receipt.ID != "fresh" || receipt.Offset < 0 || !receipt.SubmittedAt.Equal(cmd.SubmittedAt) {
		t.Fatalf("receipt %+v", receipt)
	}
	intake := func(r Receipt) Entry {
		return Entry{Kind: EntryIntake, Intake: &IntakePosition{Topic: r.Requests.Topic, Partition: r.Requests.Partition, FromOffset: r.Offset, NextOffset: r.Offset + 1}}
	}
	w.write(ctx, true, issuedEntry("fresh"), intake(receipt))
	w.write(ctx, true, outcomeEntry("fresh", StatusSucceeded, FirstAttempt))

	const bound = 50 // the fresh records and their transaction markers
	measure := func(name string, f func()) {
		t.Helper()
		before := client.RecordsRead()
		f()
		if n := client.RecordsRead() - before; n > bound {
			t.Errorf("%s read %d records of a log of %d, want at most %d", name, n, 4*history+5, bound)
		}
	}
	measure("Wait after Send", func() {
		if o, err := client.Wait(ctx, role, "fresh", LookupAfter(receipt)); err != nil || o.Status != StatusSucceeded {
			t.Errorf("wait: %+v, %v", o, err)
		}
	})
	measure("Wait without a hint", func() {
		if o, err := client.Wait(ctx, role, "fresh"); err != nil || o.Status != StatusSucceeded {
			t.Errorf("wait: %+v, %v", o, err)
		}
	})

	// The same command again: the leader takes the request in with no
	// record of it, and Wait finds the first outcome before that intake.
	again, err := client.Send(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	w.write(ctx, true, intake(again))
	measure("Wait after a second Send", func() {
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		if o, err := client.Wait(wctx, role, "fresh", LookupAfter(again)); err != nil || o.Status != StatusSucceeded {
			t.Errorf("wait after the second submission: %+v, %v", o, err)
		}
	})

	measure("Status without a hint", func() {
		if h, err := client.Status(ctx, role, "fresh"); err != nil || h.Status != StatusSucceeded {
			t.Errorf("status of fresh: %+v, %v", h, err)
		}
	})
	measure("Status of a command older than the window", func() {
		_, err := client.Status(ctx, role, "old0-7")
		var outside *OutsideLookupWindowError
		var unknown *UnknownCommandError
		if !errors.As(err, &outside) || outside.ID != "old0-7" || outside.Window != time.Hour || !errors.As(err, &unknown) {
			t.Errorf("status of an old command: %v, want an *OutsideLookupWindowError", err)
		}
	})
	before := client.RecordsRead()
	if h, err := client.Status(ctx, role, "old0-7", LookupSince(past.Add(-time.Minute))); err != nil || h.Status != StatusSucceeded {
		t.Errorf("status since the history began: %+v, %v", h, err)
	}
	if n := client.RecordsRead() - before; n < 4*history {
		t.Errorf("LookupSince before the history read %d records, want the whole history", n)
	}
	// A bounded range reads what it names and no more.
	reader, err := NewKafkaLogReader(brokers)
	if err != nil {
		t.Fatal(err)
	}
	part, err := reader.ReadRange(ctx, tp, LogRange{From: 100, Until: 200, Limit: 30})
	if err != nil || len(part) != 30 || part[0].Offset != 100 || part[29].Offset != 129 {
		t.Errorf("range [100, 200) limit 30: %d entries, %v", len(part), err)
	}
	if v := VerifyFrom(part); len(v) != 0 {
		t.Errorf("a part of a sound log: %v", v)
	}
	if _, err := client.Status(ctx, role, "nowhere", LookupFromOffset(4*history)); !errors.As(err, new(*UnknownCommandError)) || errors.As(err, new(*OutsideLookupWindowError)) {
		t.Errorf("status of an unknown command from an offset: %v, want an *UnknownCommandError", err)
	}
}

// TestLookupsWithoutHintReadTheCheckpoint gives a role's partition, on the
// real cluster, a history of 50,000 settled commands and a neighbour's
// records, then a checkpoint of the role that holds the settled commands as
// compact IDs and one pending command whole, and records after it. Status
// and Wait without a hint then read a bounded number of records, not the
// history: for a settled command deep in the history, for the pending one
// before and after its outcome, for a command only after the checkpoint,
// for an unknown ID, whose hash the checkpoint holds for another command's
// record, as a collision would: it is answered unknown, not with that
// command. Wait after the receipt of a second submission of a settled
// command, which the leader takes in with no record of its own, finds the
// outcome where the checkpoint points, not in the whole window.
func TestLookupsWithoutHintReadTheCheckpoint(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	client := newTopicClient(t, brokers)
	role := kafkatest.UniqueName(t, "role")
	tp, _ := client.LogPartition(role)
	// Record batches of some hundred records, as a leader's transactions
	// write, not of many thousands: Kafka returns a batch whole.
	w := newLogWriter(t, brokers, tp, role, "node-1", kafkatest.UniqueName(t, "txn"), kgo.ProducerBatchMaxBytes(32<<10))

	const history, batches = 50_000, 5
	// The history is two hours old, so that a lookup by time after it does
	// not start inside it.
	now := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	// One transaction: a commit marker carries the time of the commit, now,
	// and a lookup by time after the history would start at the first one.
	var old []Entry
	for i := range batches {
		old = append(old, settled("", fmt.Sprintf("old%d", i), history/batches)...)
		old = append(old, settled("other-role", fmt.Sprintf("n%d", i), 1000)...)
	}
	w.bulk(ctx, now, old)
	w.write(ctx, true, issuedEntry("pending"))

	// The checkpoint a leader would write: the offsets are read back with
	// a reader of the test's own, so that the client's count is its own.
	reader, err := NewKafkaLogReader(brokers)
	if err != nil {
		t.Fatal(err)
	}
	all, err := reader.ReadLog(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]int64{}
	var ids []CheckpointID
	var pending CheckpointCommand
	for _, e := range all {
		if e.Role != role {
			continue
		}
		switch e.Kind {
		case EntryIssued:
			first[e.Issued.Command.ID] = e.Offset
			if e.Issued.Command.ID == "pending" {
				pending = CheckpointCommand{Command: e.Issued.Command, Issued: true, Status: StatusPending,
					Attempt: FirstAttempt, Token: e.Token, First: e.Offset}
			}
		case EntryOutcome:
			id := e.Outcome.CommandID
			ids = append(ids, CheckpointID{Hash: IDHash(id), First: first[id], Outcome: e.Offset, SubmittedAt: now})
			if id == "old2-7" {
				// The ID "ghost" as if it shared the hash of a settled
				// command whose records are here.
				ids = append(ids, CheckpointID{Hash: IDHash("ghost"), First: e.Offset, Outcome: e.Offset, SubmittedAt: now})
			}
		}
	}
	if len(ids) != history+1 || pending.First == 0 {
		t.Fatalf("the history holds %d settled commands and pending at %d; want %d", len(ids)-1, pending.First, history)
	}
	parts, err := EncodeCheckpoint(role, 1, Checkpoint{Window: DefaultDedupWindow, Commands: []CheckpointCommand{pending}, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	var cpEntries []Entry
	for i := range parts {
		cpEntries = append(cpEntries, Entry{Kind: EntryCheckpoint, Checkpoint: &parts[i]})
	}
	// A checkpoint part is larger than the history's batches.
	newLogWriter(t, brokers, tp, role, "node-1", kafkatest.UniqueName(t, "txn")).write(ctx, true, cpEntries...)
	w.bulk(ctx, time.Now(), settled("other-role", "after", 200))
	w.write(ctx, true, issuedEntry("fresh"), outcomeEntry("fresh", StatusSucceeded, FirstAttempt))

	size := len(all)
	const bound = 3000 // one step of the backward search, and a command's records
	measure := func(name string, f func()) {
		t.Helper()
		before := client.RecordsRead()
		f()
		n := client.RecordsRead() - before
		t.Logf("%s read %d records of a log of more than %d", name, n, size)
		if n > bound {
			t.Errorf("%s read %d records of a log of more than %d, want at most %d", name, n, size, bound)
		}
	}
	status := func(id string, want Status) {
		t.Helper()
		measure("Status of "+id, func() {
			h, err := client.Status(ctx, role, id)
			if err != nil || h.ID != id || h.Status != want {
				t.Errorf("status of %s: %+v, %v; want %s", id, h, err, want)
			}
		})
	}
	wait := func(id string) {
		t.Helper()
		measure("Wait for "+id, func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if o, err := client.Wait(wctx, role, id); err != nil || o.CommandID != id || o.Status != StatusSucceeded {
				t.Errorf("wait for %s: %+v, %v", id, o, err)
			}
		})
	}
	status("old0-123", StatusSucceeded)
	wait("old0-123")
	status("old2-7", StatusSucceeded)
	status("pending", StatusPending)
	status("fresh", StatusSucceeded)
	wait("fresh")
	measure("Status of ghost", func() {
		h, err := client.Status(ctx, role, "ghost")
		var outside *OutsideLookupWindowError
		if !errors.As(err, &outside) || outside.ID != "ghost" {
			t.Errorf("status of an unknown ID whose hash the checkpoint holds: %+v, %v", h, err)
		}
	})
	measure("Wait for ghost", func() {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if o, err := client.Wait(wctx, role, "ghost"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("wait for an unknown ID: %+v, %v; want it to wait", o, err)
		}
	})
	// A second submission of a settled command, which the leader takes in
	// with no record of its own: Wait after its receipt finds the outcome
	// where the checkpoint points.
	dup := sampleCommand()
	dup.ID, dup.Role, dup.SubmittedAt = "old1-99", role, time.Now().Truncate(time.Millisecond)
	dup.Deadline = dup.SubmittedAt.Add(time.Hour)
	receipt, err := client.Send(ctx, dup)
	if err != nil {
		t.Fatal(err)
	}
	w.write(ctx, true, Entry{Kind: EntryIntake, Intake: &IntakePosition{Topic: receipt.Requests.Topic, Partition: receipt.Requests.Partition,
		FromOffset: receipt.Offset, NextOffset: receipt.Offset + 1}})
	measure("Wait after the Send of a settled command", func() {
		if o, err := client.Wait(ctx, role, "old1-99", LookupAfter(receipt)); err != nil || o.CommandID != "old1-99" || o.Status != StatusSucceeded {
			t.Errorf("wait for a second submission: %+v, %v", o, err)
		}
	})

	w.write(ctx, true, outcomeEntry("pending", StatusSucceeded, FirstAttempt))
	status("pending", StatusSucceeded)
	wait("pending")
}
