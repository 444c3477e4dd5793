package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// kafkaEnv is one cluster the transport tests run on: the real cluster
// under one transaction version, or kfake.
type kafkaEnv struct {
	name    string
	brokers []string
	opts    []kgo.Opt // client options beyond the seed brokers

	// bumps reports whether every commit bumps the epoch (transactions v2).
	bumps bool

	// createTopic creates a topic of its own for one test.
	createTopic func(t *testing.T, name string, partitions int)
}

// transport returns a transport of the environment, closed at the end of
// the test.
func (e kafkaEnv) transport(t *testing.T, lease coordination.LeaseConfig) *coordination.KafkaTransport {
	t.Helper()
	opts := append([]kgo.Opt{kgo.SeedBrokers(e.brokers...)}, e.opts...)
	tr, err := coordination.NewKafkaTransportWithClientOptions(lease, opts...)
	if err != nil {
		t.Fatalf("new transport: %v", err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// client returns a plain franz-go client of the environment, closed at the
// end of the test.
func (e kafkaEnv) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(e.brokers...)}, e.opts...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testLease is the lease policy of the transport tests: short, so a test
// that waits for a deadline waits seconds.
func testLease(t *testing.T) coordination.LeaseConfig {
	t.Helper()
	lease, err := coordination.NewLeaseConfig(3*time.Second, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// uniqueRole returns a role no other test or run uses.
func uniqueRole(t *testing.T) coordination.Role {
	t.Helper()
	role, err := coordination.NewRole(kafkatest.UniqueName(t, "role"))
	if err != nil {
		t.Fatal(err)
	}
	return role
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func member(t *testing.T, name string) coordination.MemberID {
	t.Helper()
	m, err := coordination.NewMemberID(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// eventually polls check until it returns nil, and fails the test with its
// last error when within passes first. Kafka answers a commit before the
// coordinator has written the commit markers, so a read_committed reader
// sees a committed record a moment after the commit returned.
func eventually(t *testing.T, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readState reads the partition of role and folds it.
func readState(ctx context.Context, tr *coordination.KafkaTransport, role coordination.Role) (coordination.RoleState, error) {
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		return coordination.RoleState{}, err
	}
	records, err := tr.ReadPartition(ctx, partition)
	if err != nil {
		return coordination.RoleState{}, err
	}
	return coordination.BuildRoleState(role, records)
}

// tokenValue is the value a test writes in a guarded record: the token the
// build function received, so a reader checks invariant I4.
func tokenValue(prefix string, token coordination.FencingToken) []byte {
	return []byte(prefix + "@" + token.String())
}

// valueToken parses a value that tokenValue wrote.
func valueToken(t *testing.T, value []byte) (string, coordination.FencingToken) {
	t.Helper()
	prefix, text, ok := strings.Cut(string(value), "@")
	if !ok {
		t.Fatalf("value %q carries no token", value)
	}
	token, err := coordination.ParseFencingToken(text)
	if err != nil {
		t.Fatalf("value %q: %v", value, err)
	}
	return prefix, token
}

// readCommitted reads every committed record of one partition of a topic
// with a plain read_committed consumer, which reports each record's
// producer id and epoch from its batch.
func readCommitted(t *testing.T, env kafkaEnv, topic string, partition int32) []*kgo.Record {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	adm := kafkatest.Admin(t, env.brokers, env.opts...)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	end, ok := ends.Lookup(topic, partition)
	if !ok || end.Err != nil {
		t.Fatalf("end offset of %s[%d]: %v", topic, partition, end.Err)
	}
	cl := env.client(t,
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
	)
	var out []*kgo.Record
	var seen int64 = -1
	for seen < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s[%d] to offset %d: got to %d: %v", topic, partition, end.Offset, seen, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("read %s[%d]: %v", topic, partition, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen = r.Offset
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

// runTransportSuite runs the tests of the transport that hold on every
// cluster, kfake included: none of them rests on a fence.
func runTransportSuite(t *testing.T, env kafkaEnv) {
	t.Run("AcquireDescribeWriteRead", func(t *testing.T) { testAcquireDescribeWriteRead(t, env) })
	t.Run("GuardedWriteSeveralTopics", func(t *testing.T) { testGuardedWriteSeveralTopics(t, env) })
	t.Run("GuardedWriteAbortsOnFailure", func(t *testing.T) { testGuardedWriteAborts(t, env) })
	t.Run("AppendPinsPartition", func(t *testing.T) { testAppendPinsPartition(t, env) })
	t.Run("ReadPastOpenTransaction", func(t *testing.T) { testReadPastOpenTransaction(t, env) })
	t.Run("WaitPartition", func(t *testing.T) { testWaitPartition(t, env) })
	t.Run("ReadAfterLogStartMoved", func(t *testing.T) { testReadAfterLogStartMoved(t, env) })
	t.Run("NoProducerNoWrite", func(t *testing.T) { testNoProducerNoWrite(t, env) })
	t.Run("PrepareEpoch", func(t *testing.T) { testPrepareEpoch(t, env) })
}

// testAcquireDescribeWriteRead: a role no member took reports no epoch; an
// acquisition mints a token that DescribeEpoch reports; every commit returns
// the token the coordinator holds afterwards, a newer one under
// transactions v2 and the same under v1; a lease written under it reads back.
func testAcquireDescribeWriteRead(t *testing.T, env kafkaEnv) {
	ctx := testCtx(t, 60*time.Second)
	tr := env.transport(t, testLease(t))
	role := uniqueRole(t)

	got, held, err := tr.DescribeEpoch(ctx, role)
	if err != nil || held || got != coordination.NoEpoch {
		t.Fatalf("DescribeEpoch of a new role = %v, %v, %v; want NoEpoch, false, nil", got, held, err)
	}

	token, err := tr.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	assertDescribed(ctx, t, tr, role, token)

	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	lease := testLease(t)
	key := coordination.EncodeKey(coordination.LeaseKey(role))
	var written []coordination.Lease
	for i := range 3 {
		l := lease.Grant(member(t, "m"), token, int64(1000*i))
		next, err := tr.WriteGuarded(ctx, role, token, []coordination.GuardedRecord{{
			Partition: partition, Key: key, Value: coordination.EncodeLease(l),
		}})
		if err != nil {
			t.Fatalf("write %d under %s: %v", i, token, err)
		}
		switch {
		case env.bumps && !next.Supersedes(token):
			t.Fatalf("transactions v2: commit under %s returned %s, want a newer token", token, next)
		case !env.bumps && next != token:
			t.Fatalf("transactions v1: commit under %s returned %s, want the same token", token, next)
		}
		assertDescribed(ctx, t, tr, role, next)
		written = append(written, l)
		token = next
	}

	eventually(t, 10*time.Second, func() error {
		state, err := readState(ctx, tr, role)
		if err != nil {
			return err
		}
		if state.Lease == nil || *state.Lease != written[len(written)-1] {
			return fmt.Errorf("lease read back = %+v, want %+v", state.Lease, written[len(written)-1])
		}
		return nil
	})

	// The tombstone of WriteLease clears the lease.
	if err := tr.WriteLease(ctx, partition, token, key, nil); err != nil {
		t.Fatalf("WriteLease tombstone: %v", err)
	}
	eventually(t, 10*time.Second, func() error {
		state, err := readState(ctx, tr, role)
		if err != nil {
			return err
		}
		if state.Lease != nil {
			return fmt.Errorf("after the tombstone the lease is %+v; want none", state.Lease)
		}
		return nil
	})
}

// assertDescribed checks invariant I3 at the transport: the coordinator
// holds exactly the token the transport last returned.
func assertDescribed(ctx context.Context, t *testing.T, tr *coordination.KafkaTransport, role coordination.Role, want coordination.FencingToken) {
	t.Helper()
	status, err := coordination.DescribeLeadership(ctx, tr, role)
	if err != nil {
		t.Fatalf("DescribeLeadership: %v", err)
	}
	if !status.Held || status.Token != want || !status.Authoritative(want) {
		t.Fatalf("DescribeLeadership = %v, want epoch %s", status, want)
	}
}

// testGuardedWriteSeveralTopics: one guarded write puts records on two
// topics and the coordination partition, all committed together, each on the
// partition it names, each carrying the token it was built with (I4), which
// is the producer id and epoch of the batch that holds it.
func testGuardedWriteSeveralTopics(t *testing.T, env kafkaEnv) {
	ctx := testCtx(t, 60*time.Second)
	tr := env.transport(t, testLease(t))
	role := uniqueRole(t)
	topicA, topicB := kafkatest.UniqueName(t, "a"), kafkatest.UniqueName(t, "b")
	env.createTopic(t, topicA, 3)
	env.createTopic(t, topicB, 2)

	token, err := tr.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	for round := range 2 {
		records := []coordination.GuardedRecord{
			{Partition: coordination.TopicPartition{Topic: topicA, Partition: 2}, Key: []byte("k"), Value: tokenValue("a2", token),
				Headers: []coordination.Header{{Key: "token", Value: []byte(token.String())}}},
			{Partition: coordination.TopicPartition{Topic: topicA, Partition: 0}, Key: []byte("k"), Value: tokenValue("a0", token)},
			{Partition: coordination.TopicPartition{Topic: topicB, Partition: 1}, Key: []byte("k"), Value: tokenValue("b1", token)},
		}
		next, err := tr.WriteGuarded(ctx, role, token, records)
		if err != nil {
			t.Fatalf("round %d: WriteGuarded: %v", round, err)
		}
		token = next
	}

	for _, at := range []struct {
		topic     string
		partition int32
		prefix    string
	}{{topicA, 2, "a2"}, {topicA, 0, "a0"}, {topicB, 1, "b1"}} {
		got := readCommitted(t, env, at.topic, at.partition)
		if len(got) != 2 {
			t.Fatalf("%s[%d] holds %d records, want 2", at.topic, at.partition, len(got))
		}
		for _, r := range got {
			prefix, written := valueToken(t, r.Value)
			batch, err := coordination.NewFencingToken(r.ProducerID, r.ProducerEpoch)
			if err != nil {
				t.Fatal(err)
			}
			if prefix != at.prefix || written != batch {
				t.Fatalf("%s[%d] offset %d: value %q in a batch of %s; want prefix %s and the batch's token", at.topic, at.partition, r.Offset, r.Value, batch, at.prefix)
			}
		}
	}
	for _, p := range []int32{1} {
		if got := readCommitted(t, env, topicA, p); len(got) != 0 {
			t.Fatalf("%s[%d] holds %d records; the writes named other partitions", topicA, p, len(got))
		}
	}
}

// testGuardedWriteAborts: a guarded write with one record that cannot be
// produced (a partition the topic lacks) fails without a fence, commits none
// of its records, and leaves the producer usable under the token it
// returns.
func testGuardedWriteAborts(t *testing.T, env kafkaEnv) {
	guardedWriteAborts(t, env, nil)
}

// guardedWriteAborts is testGuardedWriteAborts, which calls beforeWrite, when
// set, after the epoch is acquired and before the write that fails.
func guardedWriteAborts(t *testing.T, env kafkaEnv, beforeWrite func()) {
	ctx := testCtx(t, 60*time.Second)
	tr := env.transport(t, testLease(t))
	role := uniqueRole(t)
	topic := kafkatest.UniqueName(t, "t")
	env.createTopic(t, topic, 1)

	token, err := tr.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	if beforeWrite != nil {
		beforeWrite()
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	next, err := tr.WriteGuarded(short, role, token, doomedWrite(topic, token))
	cancel()
	if err == nil {
		t.Fatal("a write to a missing partition succeeded")
	}
	if errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrOutcomeUnknown) {
		t.Fatalf("a failed produce ended the producer: %v", err)
	}
	if next.Compare(token) < 0 {
		t.Fatalf("after the abort the token went back from %s to %s", token, next)
	}
	assertDescribed(ctx, t, tr, role, next)

	after, err := tr.WriteGuarded(ctx, role, next, []coordination.GuardedRecord{
		{Partition: coordination.TopicPartition{Topic: topic, Partition: 0}, Value: tokenValue("kept", next)},
	})
	if err != nil {
		t.Fatalf("write after the abort: %v", err)
	}
	if after.Compare(next) < 0 {
		t.Fatalf("after the write the token went back from %s to %s", next, after)
	}
	assertDescribed(ctx, t, tr, role, after)
	got := readCommitted(t, env, topic, 0)
	if len(got) != 1 {
		t.Fatalf("%s[0] holds %d committed records, want only the one after the abort", topic, len(got))
	}
	if prefix, _ := valueToken(t, got[0].Value); prefix != "kept" {
		t.Fatalf("committed %q; the aborted record leaked", got[0].Value)
	}
}

// doomedWrite is a guarded write to topic of one partition that fails at
// its produce: its second record names partition 7.
func doomedWrite(topic string, token coordination.FencingToken) []coordination.GuardedRecord {
	return []coordination.GuardedRecord{
		{Partition: coordination.TopicPartition{Topic: topic, Partition: 0}, Value: tokenValue("doomed", token)},
		{Partition: coordination.TopicPartition{Topic: topic, Partition: 7}, Value: tokenValue("missing", token)},
	}
}

// testAppendPinsPartition: a registration goes to the partition it names,
// not to the one its key hashes to, and reads back in offset order.
func testAppendPinsPartition(t *testing.T, env kafkaEnv) {
	ctx := testCtx(t, 60*time.Second)
	tr := env.transport(t, testLease(t))
	role := uniqueRole(t)
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	members := []string{"m-1", "m-2", "m-3"}
	for i, name := range members {
		key := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, name)))
		value := coordination.EncodeRegistration(coordination.Registration{Member: member(t, name), RegisteredAt: int64(i)})
		if err := tr.Append(ctx, partition, key, value); err != nil {
			t.Fatalf("Append %s: %v", name, err)
		}
	}
	// Another test's transaction open on the same partition holds back the
	// last stable offset for a moment, so the roster shows eventually.
	for _, reader := range []*coordination.KafkaTransport{tr, env.transport(t, testLease(t))} {
		eventually(t, 10*time.Second, func() error {
			state, err := coordination.DescribeRoleState(ctx, reader, role)
			if err != nil {
				return err
			}
			var got []string
			for _, e := range state.Roster {
				got = append(got, e.Member.String())
			}
			if !slices.Equal(got, members) {
				return fmt.Errorf("roster %v, want %v in order", got, members)
			}
			return nil
		})
	}
}

// testReadPastOpenTransaction: while another producer holds a transaction
// open on the partition, ReadPartition waits for it rather than stop at the
// last stable offset: past its bound it fails with an *OpenTransactionError
// (and the wait was logged and counted); a read under way when the
// transaction ends returns the record committed after the transaction's
// first offset. No record of the transaction ever shows.
func testReadPastOpenTransaction(t *testing.T, env kafkaEnv) {
	ctx := testCtx(t, 60*time.Second)
	// Every call of the transport is bounded by the lease as well: a lease
	// well above the read's wait bound keeps a slow cluster's first fetch
	// from ending the call before the bound does.
	lease, err := coordination.NewLeaseConfig(10*time.Second, 3*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tr := env.transport(t, lease)
	role := uniqueRole(t)
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	key := func(name string) []byte {
		return coordination.EncodeKey(coordination.RegistrationKey(role, member(t, name)))
	}
	reg := func(name string) []byte {
		return coordination.EncodeRegistration(coordination.Registration{Member: member(t, name)})
	}
	if err := tr.Append(ctx, partition, key("before"), reg("before")); err != nil {
		t.Fatal(err)
	}

	open := env.client(t, kgo.TransactionalID(kafkatest.UniqueName(t, "open")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, &kgo.Record{
		Topic: partition.Topic, Partition: int32(partition.Partition), Key: key("uncommitted"), Value: reg("uncommitted"),
	}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Append(ctx, partition, key("after"), reg("after")); err != nil {
		t.Fatal(err)
	}

	// The open transaction holds the last stable offset at its first
	// offset, below the high watermark: with a short bound, the read waits,
	// logs, counts the wait, and fails with the typed error.
	metrics := sdkmetric.NewManualReader()
	var logs syncBuffer
	const bound = 2 * time.Second
	if err := tr.SetReadWait(coordination.ReadWait{
		Bound:         bound,
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics)),
	}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = readState(ctx, tr, role)
	var blocked *coordination.OpenTransactionError
	if !errors.As(err, &blocked) {
		t.Fatalf("ReadPartition with a transaction open: got %v, want an *OpenTransactionError", err)
	}
	if elapsed := time.Since(began); elapsed < bound {
		t.Errorf("ReadPartition gave up after %v, before its bound %v", elapsed, bound)
	}
	if blocked.Err != nil || blocked.Waited < bound || blocked.StableOffset >= blocked.Target || blocked.Partition != partition {
		t.Errorf("OpenTransactionError = %+v; want the bound passed on %v, the stable offset below the target", blocked, partition)
	}
	if waited := counterSum(t, metrics, coordination.OpenTransactionWaitMetric); waited < bound.Seconds() {
		t.Errorf("metric %s = %vs, want at least the bound %v", coordination.OpenTransactionWaitMetric, waited, bound)
	}
	if line := logs.String(); !strings.Contains(line, "last_stable_offset="+strconv.FormatInt(blocked.StableOffset, 10)) ||
		!strings.Contains(line, "target_high_watermark="+strconv.FormatInt(blocked.Target, 10)) {
		t.Errorf("no log line of the wait naming the offsets; logged: %q", line)
	}

	// With the default bound, a read that begins while the transaction is
	// open returns once it ends, with the record committed after the open
	// transaction's first offset.
	if err := tr.SetReadWait(coordination.ReadWait{}); err != nil {
		t.Fatal(err)
	}
	type read struct {
		state coordination.RoleState
		err   error
	}
	done := make(chan read, 1)
	go func() {
		state, err := readState(ctx, tr, role)
		done <- read{state, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("ReadPartition returned while the transaction is open: %+v, %v", r.state.Roster, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := open.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("ReadPartition across the abort: %v", r.err)
	}
	for name, want := range map[string]bool{"before": true, "after": true, "uncommitted": false} {
		if _, ok := r.state.Entry(member(t, name)); ok != want {
			t.Errorf("read across the abort: record %q shows %v, want %v", name, ok, want)
		}
	}
	// The record behind the aborted transaction shows once the abort marker
	// is written; the aborted record never does.
	eventually(t, 10*time.Second, func() error {
		state, err := readState(ctx, tr, role)
		if err != nil {
			return err
		}
		if _, ok := state.Entry(member(t, "uncommitted")); ok {
			t.Fatal("ReadPartition shows a record of an aborted transaction")
		}
		if _, ok := state.Entry(member(t, "after")); !ok {
			return fmt.Errorf("ReadPartition misses the record behind the aborted transaction: %+v", state.Roster)
		}
		return nil
	})
}

// testWaitPartition: WaitPartition returns when a record lands above the
// offset it waits after, and returns the context error when none does.
func testWaitPartition(t *testing.T, env kafkaEnv) {
	ctx := testCtx(t, 60*time.Second)
	tr := env.transport(t, testLease(t))
	role := uniqueRole(t)
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	records, err := tr.ReadPartition(ctx, partition)
	if err != nil {
		t.Fatal(err)
	}
	last := int64(-1)
	if len(records) > 0 {
		last = records[len(records)-1].Offset
	}
	// No record lands above an offset far past the end; the wait ends with
	// its context.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = tr.WaitPartition(short, partition, 1<<40)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitPartition with nothing to see = %v, want the deadline", err)
	}

	done := make(chan error, 1)
	go func() { done <- tr.WaitPartition(ctx, partition, last) }()
	key := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, "m")))
	if err := tr.Append(ctx, partition, key, coordination.EncodeRegistration(coordination.Registration{Member: member(t, "m")})); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitPartition after a record landed: %v", err)
	}
}

// testReadAfterLogStartMoved: when the start of the log moves past what a
// reader read (retention, or DeleteRecords as here), a fresh reader starts at
// the new start, and a reader that had read further carries on.
func testReadAfterLogStartMoved(t *testing.T, env kafkaEnv) {
	ctx := testCtx(t, 60*time.Second)
	topic := kafkatest.UniqueName(t, "t")
	env.createTopic(t, topic, 1)
	partition := coordination.TopicPartition{Topic: topic}
	role := uniqueRole(t)
	early := env.transport(t, testLease(t))
	for _, name := range []string{"m-1", "m-2", "m-3"} {
		key := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, name)))
		if err := early.Append(ctx, partition, key, coordination.EncodeRegistration(coordination.Registration{Member: member(t, name)})); err != nil {
			t.Fatal(err)
		}
	}
	if records, err := early.ReadPartition(ctx, partition); err != nil || len(records) != 3 {
		t.Fatalf("ReadPartition = %d records, %v; want 3", len(records), err)
	}
	var before kadm.Offsets
	before.AddOffset(topic, 0, 2, -1)
	deleted, err := kafkatest.Admin(t, env.brokers, env.opts...).DeleteRecords(ctx, before)
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}

	records, err := env.transport(t, testLease(t)).ReadPartition(ctx, partition)
	if err != nil {
		t.Fatalf("a fresh reader after the start moved: %v", err)
	}
	if len(records) != 1 || records[0].Offset != 2 {
		t.Fatalf("a fresh reader read %+v, want the one record at offset 2", records)
	}
	if records, err := early.ReadPartition(ctx, partition); err != nil || len(records) != 3 {
		t.Fatalf("the earlier reader: %d records, %v; want the 3 it read", len(records), err)
	}
}

// testNoProducerNoWrite: a transport that never acquired the role cannot
// write under it, and after Close nothing works.
func testNoProducerNoWrite(t *testing.T, env kafkaEnv) {
	ctx := testCtx(t, 30*time.Second)
	tr := env.transport(t, testLease(t))
	role := uniqueRole(t)
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	token, err := coordination.NewFencingToken(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	key := coordination.EncodeKey(coordination.LeaseKey(role))
	if err := tr.WriteLease(ctx, partition, token, key, []byte("x")); !errors.Is(err, coordination.ErrNotHeld) {
		t.Fatalf("WriteLease without AcquireEpoch = %v, want ErrNotHeld", err)
	}
	tr.Close()
	tr.Close()
	if _, err := tr.AcquireEpoch(ctx, role); err == nil {
		t.Fatal("AcquireEpoch after Close succeeded")
	}
	if _, err := tr.ReadPartition(ctx, partition); err == nil {
		t.Fatal("ReadPartition after Close succeeded")
	}
}

// syncBuffer is a buffer a logger writes to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// counterSum collects the float counter name from reader and sums its
// points.
func counterSum(t *testing.T, reader *sdkmetric.ManualReader, name string) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if data, ok := m.Data.(metricdata.Sum[float64]); ok && m.Name == name {
				for _, p := range data.DataPoints {
					sum += p.Value
				}
			}
		}
	}
	return sum
}

// connectCounter counts the connections that a transport's clients open.
type connectCounter struct{ n atomic.Int64 }

func (c *connectCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.n.Add(1)
	}
}

// testPrepareEpoch: PrepareEpoch takes nothing from the holder, whose writes
// go on under its token while the coordinator keeps it; an AcquireEpoch
// after it opens no connection, because the prepared client has them all;
// and the acquisition then fences the holder as a cold one does.
func testPrepareEpoch(t *testing.T, env kafkaEnv) {
	ctx := testCtx(t, 60*time.Second)
	role := uniqueRole(t)
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	holder := env.transport(t, testLease(t))
	token, err := holder.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	key := coordination.EncodeKey(coordination.LeaseKey(role))
	write := func(token coordination.FencingToken, at int64) (coordination.FencingToken, error) {
		l := testLease(t).Grant(member(t, "holder"), token, at)
		return holder.WriteGuarded(ctx, role, token, []coordination.GuardedRecord{{Partition: partition, Key: key, Value: coordination.EncodeLease(l)}})
	}
	if token, err = write(token, 1000); err != nil {
		t.Fatal(err)
	}

	var connects connectCounter
	env.opts = append(slices.Clone(env.opts), kgo.WithHooks(&connects))
	standby := env.transport(t, testLease(t))
	if err := standby.PrepareEpoch(ctx, coordination.Role{}); err == nil {
		t.Fatal("PrepareEpoch of the empty role succeeded")
	}
	for range 2 { // the second call finds the client prepared
		if err := standby.PrepareEpoch(ctx, role); err != nil {
			t.Fatalf("PrepareEpoch: %v", err)
		}
	}
	if token, err = write(token, 2000); err != nil {
		t.Fatalf("the holder's write after a standby prepared: %v", err)
	}
	assertDescribed(ctx, t, holder, role, token)

	before := connects.n.Load()
	taken, err := standby.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch after PrepareEpoch: %v", err)
	}
	if opened := connects.n.Load() - before; opened != 0 {
		t.Errorf("AcquireEpoch after PrepareEpoch opened %d connections, want none", opened)
	}
	if !taken.Supersedes(token) {
		t.Fatalf("acquired %s after the holder's %s", taken, token)
	}
	if _, err := write(token, 3000); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("the holder's write after the acquisition = %v, want ErrFenced", err)
	}
	if err := standby.PrepareEpoch(ctx, role); err != nil {
		t.Fatalf("PrepareEpoch of a role the transport holds: %v", err)
	}
	standby.Close()
	if err := standby.PrepareEpoch(ctx, role); err == nil {
		t.Fatal("PrepareEpoch after Close succeeded")
	}
}
