//go:build integration

package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	"github.com/krabka-io/krabka-dispatch/test/recorder"
)

// openTransaction begins a transaction of a producer of its own (another
// transactional id than any role's) on partition, produces one record in it,
// and leaves it open. The returned function aborts it; the test's cleanup
// aborts it too.
func openTransaction(t *testing.T, c cluster, partition coordination.TopicPartition) (abort func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...),
		kgo.TransactionalID(kafkatest.UniqueName(t, "other-producer")),
		kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: partition.Topic, Partition: int32(partition.Partition), Key: []byte("other"), Value: []byte("never committed")}
	if err = cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Logf("another producer holds a transaction open on %s-%d from offset %d", partition.Topic, partition.Partition, rec.Offset)
	var once sync.Once
	end := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
				t.Errorf("abort the other producer's transaction: %v", err)
			}
			cl.Close()
		})
	}
	t.Cleanup(end)
	return end
}

// waitDispatched waits until the recording server saw every command of ids.
func waitDispatched(t *testing.T, server *recorder.Server, ids []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		seen := map[string]bool{}
		for _, d := range server.Dispatches() {
			seen[d.CommandID] = true
		}
		var missing []string
		for _, id := range ids {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d commands never reached the device, such as %v", timeout, len(missing), missing[:min(5, len(missing))])
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// TestFailoverPastOpenTransaction fails a role over while another producer
// holds a transaction open on the role's log partition: the leader issues
// and settles commands (through Submit and through the requests topic) after
// the open transaction's first offset, so read_committed hides them, and
// dies; more requests arrive while no one leads. The successor's recovery
// must read past the open transaction: it issues no command twice, no device
// sees a command twice, and intake resumes where the predecessor committed.
func TestFailoverPastOpenTransaction(t *testing.T) {
	for _, how := range []string{"crash", "resign"} {
		t.Run(how, func(t *testing.T) { testFailoverPastOpenTransaction(t, how) })
	}
}

func testFailoverPastOpenTransaction(t *testing.T, how string) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	server := newRecorder(t)
	registry := func(member string) *dispatch.Registry {
		r := dispatch.NewRegistry()
		for _, name := range []string{"valve", "pump"} {
			if err := r.Register(name, recorder.NewDevice(name, server.URL(), member)); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	client := newClient(t, c, tp)
	submit := func(id, device string) {
		t.Helper()
		cmd := dispatch.Command{ID: id, Role: role.String(), Device: device, Action: "set", Deadline: time.Now().Add(2 * time.Minute)}
		if err := client.Submit(t.Context(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	devices := []string{"valve", "pump"}

	a := lead(t, c, tp, role, "m1", registry("m1"))
	// Some commands before the open transaction.
	early := ids("early", 5)
	for i, id := range early {
		if out, err := a.d.Submit(t.Context(), dispatch.Command{ID: id, Device: devices[i%2], Action: "set"}); err != nil || out.Status != dispatch.StatusSucceeded {
			t.Fatalf("Submit %s: %+v %v", id, out, err)
		}
	}
	abort := openTransaction(t, c, tp.logPartition())

	// Behind the open transaction: commands through Submit and through the
	// requests topic, all settled by the leader.
	viaSubmit, viaTopic := ids("submit", 15), ids("topic", 16)
	for i, id := range viaTopic {
		submit(id, devices[i%2])
	}
	var wg sync.WaitGroup
	for i, id := range viaSubmit {
		wg.Go(func() {
			out, err := a.d.Submit(t.Context(), dispatch.Command{ID: id, Device: devices[i%2], Action: "set"})
			if err != nil || out.Status != dispatch.StatusSucceeded {
				t.Errorf("Submit %s: %+v %v", id, out, err)
			}
		})
	}
	wg.Wait()
	waitDispatched(t, server, append(append(append([]string{}, early...), viaSubmit...), viaTopic...), time.Minute)

	// The leader goes away, with everything settled.
	a.stop()
	<-a.done
	switch how {
	case "crash":
		// No resignation: the standby waits out the lease.
		a.transport.Close()
	case "resign":
		rctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if err := a.l.Resign(rctx); err != nil {
			t.Fatalf("resign: %v", err)
		}
		cancel()
	}
	// Requests that arrive while no one leads.
	during := ids("during", 8)
	for i, id := range during {
		submit(id, devices[i%2])
	}

	b := lead(t, c, tp, role, "m2", registry("m2"))
	// The successor must not settle anything while the open transaction
	// hides its predecessor's last records: its recovery waits.
	select {
	case err := <-b.runErr:
		t.Fatalf("the successor's dispatcher ended while the transaction was open: %v", err)
	case <-time.After(2 * time.Second):
	}
	for _, d := range server.Dispatches() {
		if d.Member == "m2" {
			t.Errorf("the successor dispatched %s before the open transaction ended", d.CommandID)
			break
		}
	}
	abort()

	// Duplicates of commands the predecessor settled, through both paths.
	for i, id := range viaSubmit[:5] {
		out, err := b.d.Submit(t.Context(), dispatch.Command{ID: id, Device: devices[i%2], Action: "set"})
		if err != nil || out.Status != dispatch.StatusSucceeded || out.CommandID != id {
			t.Errorf("duplicate Submit %s: %+v %v", id, out, err)
		}
	}
	for _, id := range viaTopic[:5] {
		submit(id, "valve")
	}
	after := ids("after", 6)
	for i, id := range after {
		submit(id, devices[i%2])
	}

	all := append(append(append(append(append([]string{}, early...), viaSubmit...), viaTopic...), during...), after...)
	outcomes, entries := waitSettled(t, c, tp, role.String(), all, time.Minute)
	for _, id := range all {
		if outcomes[id].Status != dispatch.StatusSucceeded {
			t.Errorf("%s: %+v", id, outcomes[id])
		}
	}
	issued := map[string]int{}
	for _, e := range entries {
		if e.Kind == dispatch.EntryIssued && e.Role == role.String() {
			issued[e.CommandID()]++
		}
	}
	for _, id := range all {
		if issued[id] != 1 {
			t.Errorf("%s has %d Issued records, want 1", id, issued[id])
		}
	}
	calls := map[string]int{}
	for _, d := range server.Dispatches() {
		calls[d.CommandID]++
	}
	for _, id := range all {
		if calls[id] != 1 {
			t.Errorf("%s reached a device %d times, want 1", id, calls[id])
		}
	}
	verifyLog(t, entries)
	checkDurableBeforeDispatch(t, entries, server.Dispatches())
}

// TestReadLogWaitIsBounded: with another producer's transaction left open
// on the log partition, ReadLog with a short bound fails with an
// *coordination.OpenTransactionError once the bound passed, and the wait
// shows in the log and in the metric; a read under way when the transaction
// ends returns the records committed after its first offset.
func TestReadLogWaitIsBounded(t *testing.T) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	registry := dispatch.NewRegistry()
	if err := registry.Register("refuser", refuser{}); err != nil {
		t.Fatal(err)
	}
	a := lead(t, c, tp, role, "m1", registry)
	// Commands for a device that refuses each: each is rejected, which
	// writes its outcome to the log.
	reject := func(id string) {
		t.Helper()
		out, err := a.d.Submit(t.Context(), dispatch.Command{ID: id, Device: "refuser", Action: "set"})
		if err != nil || out.Status != dispatch.StatusRejected {
			t.Fatalf("Submit %s: %+v %v", id, out, err)
		}
	}
	reject("before")
	abort := openTransaction(t, c, tp.logPartition())
	reject("behind")

	reader, err := dispatch.NewKafkaLogReader(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	metrics := sdkmetric.NewManualReader()
	var logs lockedBuffer
	const bound = 3 * time.Second
	if err := reader.SetReadWait(dispatch.LogReadWait{
		Bound:         bound,
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics)),
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	began := time.Now()
	_, err = reader.ReadLog(ctx, tp.logPartition())
	var blocked *coordination.OpenTransactionError
	if !errors.As(err, &blocked) {
		t.Fatalf("ReadLog with a transaction open: got %v, want an *OpenTransactionError", err)
	}
	t.Logf("ReadLog: %v", err)
	if elapsed := time.Since(began); elapsed < bound {
		t.Errorf("ReadLog gave up after %v, before its bound %v", elapsed, bound)
	}
	if blocked.Err != nil || blocked.Waited < bound || blocked.StableOffset >= blocked.Target || blocked.Partition != tp.logPartition() {
		t.Errorf("OpenTransactionError = %+v; want the bound passed, the stable offset below the target", blocked)
	}
	waited := 0.0
	var rm metricdata.ResourceMetrics
	if err := metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if data, ok := m.Data.(metricdata.Sum[float64]); ok && m.Name == dispatch.OpenTransactionWaitMetric {
				for _, p := range data.DataPoints {
					waited += p.Value
				}
			}
		}
	}
	if waited < bound.Seconds() {
		t.Errorf("metric %s = %vs, want at least the bound %v", dispatch.OpenTransactionWaitMetric, waited, bound)
	}
	line := logs.String()
	for _, want := range []string{
		"topic=" + tp.log, "partition=0",
		"last_stable_offset=" + strconv.FormatInt(blocked.StableOffset, 10),
		"target_high_watermark=" + strconv.FormatInt(blocked.Target, 10),
		"waited=",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("the log of the wait lacks %q; logged: %q", want, line)
		}
	}

	// A read with the default bound, under way when the transaction ends.
	if err := reader.SetReadWait(dispatch.LogReadWait{}); err != nil {
		t.Fatal(err)
	}
	type read struct {
		entries []dispatch.Entry
		err     error
	}
	done := make(chan read, 1)
	go func() {
		entries, err := reader.ReadLog(ctx, tp.logPartition())
		done <- read{entries, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("ReadLog returned while the transaction was open: %d entries, %v", len(r.entries), r.err)
	case <-time.After(1500 * time.Millisecond):
	}
	abort()
	r := <-done
	if r.err != nil {
		t.Fatalf("ReadLog across the abort: %v", r.err)
	}
	seen := map[string]bool{}
	for _, e := range r.entries {
		seen[e.CommandID()] = true
	}
	if !seen["before"] || !seen["behind"] {
		t.Errorf("ReadLog across the abort shows %v, want the records before and behind the open transaction", seen)
	}
}

// lockedBuffer is a buffer a logger writes to while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// refuser is a device that refuses every command without acting.
type refuser struct{}

func (refuser) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{}, dispatch.Rejected(errors.New("refused"))
}
