package dispatch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logWriter writes command log records the way a leader does: each batch in
// one transaction, each record carrying the token of that transaction.
type logWriter struct {
	t      testing.TB
	cl     *kgo.Client
	tp     coordination.TopicPartition
	role   string
	member string
}

func newLogWriter(t testing.TB, brokers []string, tp coordination.TopicPartition, role, member, txnID string, opts ...kgo.Opt) *logWriter {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &logWriter{t: t, cl: cl, tp: tp, role: role, member: member}
}

// write writes entries in one transaction and commits it, or aborts it when
// commit is false. It returns the token the records carry.
func (w *logWriter) write(ctx context.Context, commit bool, entries ...Entry) coordination.FencingToken {
	w.t.Helper()
	token, err := w.tryWrite(ctx, commit, entries...)
	if err != nil {
		w.t.Fatal(err)
	}
	return token
}

// tryWrite is write that returns the error of a writer that may be fenced.
func (w *logWriter) tryWrite(ctx context.Context, commit bool, entries ...Entry) (coordination.FencingToken, error) {
	if err := w.cl.BeginTransaction(); err != nil {
		return coordination.NoEpoch, err
	}
	id, epoch, err := w.cl.ProducerID(ctx)
	if err != nil {
		return coordination.NoEpoch, err
	}
	token := mustToken(w.t, id, epoch)
	var produceErr error
	for _, e := range entries {
		e.Role, e.Member, e.Token = w.role, w.member, token
		if e.At.IsZero() {
			e.At = time.Now()
		}
		key, value, err := EncodeEntry(e)
		if err != nil {
			w.t.Fatal(err)
		}
		rec := &kgo.Record{Topic: w.tp.Topic, Partition: int32(w.tp.Partition), Key: key, Value: value}
		if err := w.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			produceErr = err
			commit = false
			break
		}
	}
	endErr := w.cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	return token, errors.Join(produceErr, endErr)
}

func issuedEntry(id string) Entry {
	cmd := sampleCommand()
	cmd.ID, cmd.Role = id, ""
	return Entry{Kind: EntryIssued, Issued: &Issued{Command: cmd}}
}

func outcomeEntry(id string, status Status, attempt int) Entry {
	return Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: id, Status: status, Attempt: attempt, Result: Result{Detail: "done"}}}
}

// fakeClient starts a kfake cluster with both topics and a Client of it.
func fakeClient(t *testing.T) (*Client, []string) {
	t.Helper()
	c := kafkatest.NewFake(t)
	kafkatest.CreateFakeTopic(t, c, DefaultLogTopic, DefaultTopicPartitions, nil)
	kafkatest.CreateFakeTopic(t, c, DefaultRequestsTopic, DefaultTopicPartitions, nil)
	brokers := c.ListenAddrs()
	client, err := NewClient(brokers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client, brokers
}

// fakeRoleLog is fakeClient with a writer of the log partition of the
// sample command's role, as its member node-1.
func fakeRoleLog(t *testing.T) (*Client, *logWriter) {
	t.Helper()
	client, brokers := fakeClient(t)
	role := sampleCommand().Role
	tp, err := client.LogPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	return client, newLogWriter(t, brokers, tp, role, "node-1", role+"-node-1")
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestClientSubmitPinsTheRolePartition(t *testing.T) {
	ctx := testContext(t)
	client, brokers := fakeClient(t)
	cmd := sampleCommand()
	cmd.SubmittedAt = time.Time{}
	cmd.Deadline = time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	before := time.Now().Truncate(time.Millisecond)
	if err := client.Submit(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	tp, err := client.RequestsPartition(cmd.Role)
	if err != nil {
		t.Fatal(err)
	}
	role, _ := coordination.NewRole(cmd.Role)
	if want, _ := coordination.RolePartition(role, DefaultTopicPartitions); tp.Partition != want || tp.Topic != DefaultRequestsTopic {
		t.Fatalf("requests partition %+v, want %s-%d", tp, DefaultRequestsTopic, want)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(DefaultRequestsTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fetches := cl.PollRecords(ctx, 1)
	if err := fetchError(fetches, false); err != nil {
		t.Fatal(err)
	}
	recs := fetches.Records()
	if len(recs) != 1 {
		t.Fatalf("%d request records", len(recs))
	}
	rec := recs[0]
	if int(rec.Partition) != tp.Partition || string(rec.Key) != cmd.ID {
		t.Errorf("request at partition %d key %q, want %d key %q", rec.Partition, rec.Key, tp.Partition, cmd.ID)
	}
	got, err := DecodeRequest(rec.Value)
	if err != nil {
		t.Fatal(err)
	}
	if got.SubmittedAt.Before(before) || got.SubmittedAt.After(time.Now()) {
		t.Errorf("SubmittedAt %v was not set to the time of the submit", got.SubmittedAt)
	}
	got.SubmittedAt = cmd.SubmittedAt
	if !reflect.DeepEqual(got, cmd) {
		t.Errorf("request\n%+v\nwant\n%+v", got, cmd)
	}
}

func TestClientSubmitRefusesInvalid(t *testing.T) {
	client, _ := fakeClient(t)
	ctx := testContext(t)
	var ice *InvalidCommandError
	cmd := sampleCommand()
	cmd.Role = ""
	if err := client.Submit(ctx, cmd); !errors.As(err, &ice) || ice.Field != "Role" {
		t.Errorf("submit without a role: %v", err)
	}
	cmd = sampleCommand()
	cmd.Device = ""
	if err := client.Submit(ctx, cmd); !errors.As(err, &ice) || ice.Field != "Device" {
		t.Errorf("submit without a device: %v", err)
	}
}

// TestReadLogCommittedOnly reads a log with a committed, an aborted and a
// committed transaction, and a record that does not decode.
func TestReadLogCommittedOnly(t *testing.T) {
	ctx := testContext(t)
	client, brokers := fakeClient(t)
	role := sampleCommand().Role
	tp, err := client.LogPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	if entries, err := client.ReadLog(ctx, role); err != nil || len(entries) != 0 {
		t.Fatalf("empty log: %v, %v", entries, err)
	}

	w := newLogWriter(t, brokers, tp, role, "node-1", role+"-node-1")
	t1 := w.write(ctx, true, issuedEntry("a"), issuedEntry("b"))
	w.write(ctx, false, outcomeEntry("a", StatusFailed, 1))
	t3 := w.write(ctx, true, outcomeEntry("a", StatusSucceeded, 1))

	entries, err := client.ReadLog(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Kind.String()+" "+e.CommandID()+" "+e.Token.String())
		if e.Batch == nil || !e.Batch.Transactional {
			t.Errorf("offset %d: batch %+v", e.Offset, e.Batch)
		}
	}
	want := []string{"issued a " + t1.String(), "issued b " + t1.String(), "outcome a " + t3.String()}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	if entries[0].Offset >= entries[1].Offset || entries[1].Offset >= entries[2].Offset {
		t.Errorf("offsets out of order: %d %d %d", entries[0].Offset, entries[1].Offset, entries[2].Offset)
	}
	if v := Verify(entries); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}

	// A foreign record that does not decode: ReadLog still returns the rest,
	// and names the record.
	plain, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	bad := &kgo.Record{Topic: tp.Topic, Partition: int32(tp.Partition), Key: []byte("junk"), Value: []byte{1}}
	if err := plain.ProduceSync(ctx, bad).FirstErr(); err != nil {
		t.Fatal(err)
	}
	entries, err = client.ReadLog(ctx, role)
	var mre *MalformedRecordError
	if !errors.As(err, &mre) || mre.Offset != bad.Offset || mre.Partition != tp {
		t.Fatalf("got %v, want a *MalformedRecordError at offset %d", err, bad.Offset)
	}
	var fe *LogFormatError
	if !errors.As(err, &fe) {
		t.Errorf("%v does not wrap a *LogFormatError", err)
	}
	if len(entries) != 3 {
		t.Errorf("%d entries beside the malformed record, want 3", len(entries))
	}
}

func TestClientWaitAndStatus(t *testing.T) {
	ctx := testContext(t)
	client, w := fakeRoleLog(t)
	role := w.role
	w.write(ctx, true, issuedEntry("a"), issuedEntry("b"))

	if _, err := client.Status(ctx, role, "zzz"); !errors.As(err, new(*UnknownCommandError)) {
		t.Errorf("status of an unknown command: %v", err)
	}
	st, err := client.Status(ctx, role, "a")
	if err != nil || st.Status != StatusPending || st.Issued == nil {
		t.Fatalf("status of a: %+v, %v", st, err)
	}

	type result struct {
		o   Outcome
		err error
	}
	waited := make(chan result, 1)
	go func() {
		o, err := client.Wait(ctx, role, "a")
		waited <- result{o, err}
	}()
	// The in-doubt outcome of another command, and then a's.
	w.write(ctx, true, outcomeEntry("b", StatusInDoubt, 1))
	w.write(ctx, true, outcomeEntry("a", StatusSucceeded, 1))
	r := <-waited
	if r.err != nil || r.o.Status != StatusSucceeded || r.o.CommandID != "a" || r.o.Result.Detail != "done" {
		t.Fatalf("wait: %+v, %v", r.o, r.err)
	}
	// An outcome recorded before the call, and an in-doubt one.
	if o, err := client.Wait(ctx, role, "b"); err != nil || o.Status != StatusInDoubt {
		t.Errorf("wait for b: %+v, %v", o, err)
	}
	st, err = client.Status(ctx, role, "a")
	if err != nil || st.Status != StatusSucceeded {
		t.Errorf("status of a after its outcome: %+v, %v", st, err)
	}

	// Wait ends with its context.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := client.Wait(short, role, "never"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait for a command that never comes: %v", err)
	}
}

func TestFollowLogStreamsAndCloses(t *testing.T) {
	ctx := testContext(t)
	client, w := fakeRoleLog(t)
	role := w.role
	w.write(ctx, true, issuedEntry("a"))

	stream, err := client.FollowLog(ctx, role, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := <-stream.Entries()
	if first.CommandID() != "a" || first.Kind != EntryIssued {
		t.Fatalf("first entry %+v", first)
	}
	if stream.Err() != nil {
		t.Errorf("Err while running: %v", stream.Err())
	}
	w.write(ctx, true, outcomeEntry("a", StatusSucceeded, 1))
	second := <-stream.Entries()
	if second.Kind != EntryOutcome || second.Offset <= first.Offset {
		t.Fatalf("second entry %+v", second)
	}
	stream.Close()
	stream.Close()
	if _, open := <-stream.Entries(); open {
		t.Error("the channel is open after Close")
	}
	if !errors.Is(stream.Err(), context.Canceled) {
		t.Errorf("Err after Close: %v", stream.Err())
	}
}

func TestNewClientChecksOptions(t *testing.T) {
	if _, err := NewClient(nil); err == nil {
		t.Error("a client without brokers")
	}
	for name, opt := range map[string]ClientOption{
		"log topic":      WithClientLogTopic("", 1),
		"log partitions": WithClientLogTopic("t", 0),
		"requests":       WithClientRequestsTopic("t", -1),
		"timeout":        WithClientRequestTimeout(0),
	} {
		if _, err := NewClient([]string{"127.0.0.1:1"}, opt); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestReadLogMissingTopic(t *testing.T) {
	ctx := testContext(t)
	c := kafkatest.NewFake(t)
	reader, err := NewKafkaLogReader(c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	_, err = reader.ReadLog(ctx, coordination.TopicPartition{Topic: "no.such.topic", Partition: 0})
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("got %v, want an error that is kerr.UnknownTopicOrPartition", err)
	}
}

// TestWaitWithoutHintProbesTheEnd checks that Wait without a hint, like
// Status, settles a command whose Issued record lies in the last offsets
// of the lookup window from them alone, and follows the log from their end
// for one that is still open; that an outcome in the probe before the
// Issued record (an older command under the same ID) is not taken; and
// that a command whose Issued record lies before the probe is found by the
// search as before.
func TestWaitWithoutHintProbesTheEnd(t *testing.T) {
	ctx := testContext(t)
	client, w := fakeRoleLog(t)
	role := w.role
	entries := make([]Entry, 2*recentProbe)
	for i := range entries {
		entries[i] = issuedEntry(fmt.Sprintf("f-%d", i))
	}
	w.write(ctx, true, issuedEntry("old"), outcomeEntry("old", StatusSucceeded, 1))
	w.write(ctx, true, entries...)
	w.write(ctx, true, issuedEntry("recent"), outcomeEntry("recent", StatusSucceeded, 1),
		issuedEntry("reused"), outcomeEntry("reused", StatusFailed, 1), issuedEntry("reused"), issuedEntry("open"))

	before := client.RecordsRead()
	if o, err := client.Wait(ctx, role, "recent"); err != nil || o.Status != StatusSucceeded {
		t.Fatalf("wait for recent: %+v, %v", o, err)
	}
	if read := client.RecordsRead() - before; read > recentProbe {
		t.Errorf("wait for a recent settled command read %d records, want the probe alone", read)
	}
	before = client.RecordsRead()
	if o, err := client.Wait(ctx, role, "old"); err != nil || o.Status != StatusSucceeded {
		t.Fatalf("wait for old: %+v, %v", o, err)
	}
	if read := client.RecordsRead() - before; read <= recentProbe {
		t.Errorf("wait for a command before the probe read %d records, want the probe and the search", read)
	}

	type result struct {
		o   Outcome
		err error
	}
	waits := map[string]chan result{}
	before = client.RecordsRead()
	for _, id := range []string{"open", "reused"} {
		waits[id] = make(chan result, 1)
		go func() {
			o, err := client.Wait(ctx, role, id)
			waits[id] <- result{o, err}
		}()
	}
	w.write(ctx, true, outcomeEntry("open", StatusSucceeded, 1), outcomeEntry("reused", StatusSucceeded, 2))
	for id, ch := range waits {
		r := <-ch
		if r.err != nil || r.o.Status != StatusSucceeded || r.o.CommandID != id {
			t.Errorf("wait for %s: %+v, %v; want the outcome written after its last Issued record", id, r.o, r.err)
		}
	}
	// Each wait read its probe and then, at most, the transaction of the
	// two outcomes (three records with its marker) twice: a fetch of the
	// probe brings the records past its end when they were written before
	// it, and the reader counts every record it fetched. A wait that
	// searched the log would read it whole, some 140 records.
	if read := client.RecordsRead() - before; read > 2*(recentProbe+2*3) {
		t.Errorf("two waits for open commands read %d records, want their probes and what followed", read)
	}
}

func TestStatusWithoutHintProbesTheEnd(t *testing.T) {
	ctx := testContext(t)
	client, w := fakeRoleLog(t)
	role := w.role
	fill := func(prefix string) {
		entries := make([]Entry, 2*recentProbe)
		for i := range entries {
			entries[i] = issuedEntry(fmt.Sprintf("%s-%d", prefix, i))
		}
		w.write(ctx, true, entries...)
	}
	// old lies before the probe; split's Issued record before it and its
	// outcome inside; recent inside, whole.
	w.write(ctx, true, issuedEntry("old"), outcomeEntry("old", StatusSucceeded, 1), issuedEntry("split"))
	fill("f")
	w.write(ctx, true, outcomeEntry("split", StatusSucceeded, 1), issuedEntry("recent"), outcomeEntry("recent", StatusSucceeded, 1))

	for _, tc := range []struct {
		id       string
		maxRead  int64 // records the lookup may read; 0 for more than the probe
		wantRead string
	}{
		{"recent", recentProbe, "the probe alone"},
		{"split", 0, "the probe and the window: the outcome alone proves nothing"},
		{"old", 0, "the probe and the window"},
	} {
		before := client.RecordsRead()
		h, err := client.Status(ctx, role, tc.id)
		if err != nil || h.Issued == nil || h.Status != StatusSucceeded || len(h.Outcomes) != 1 {
			t.Fatalf("status of %s: %+v, %v; want its Issued record and one outcome", tc.id, h, err)
		}
		read := client.RecordsRead() - before
		if tc.maxRead > 0 && read > tc.maxRead || tc.maxRead == 0 && read <= recentProbe {
			t.Errorf("status of %s read %d records, want %s", tc.id, read, tc.wantRead)
		}
	}
}
