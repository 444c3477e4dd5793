package ceiling

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchDevice is the device name the dispatcher measurements register.
const BenchDevice = "bench"

// BenchLease is the lease of every measured dispatcher's role, and so the
// transaction timeout of its producer and of the raw ceiling's.
const BenchLease = 10 * time.Second

// Dispatcher is a leader with a running dispatch.Dispatcher, set up for a
// measurement on one fresh role whose log and requests topics have one
// partition each.
type Dispatcher struct {
	// D is the dispatcher.
	D *dispatch.Dispatcher

	// Device is the timing device that wraps the measured one.
	Device *TimingDevice

	// Role is the role it leads.
	Role string

	// Retries counts the CONCURRENT_TRANSACTIONS answers its transport's
	// clients met.
	Retries *ConcurrentTxns

	// Mix counts what the dispatcher's transactions carried.
	Mix *TxnMix

	leadership *coordination.Leadership
	leader     *countingLeader
	transport  *coordination.KafkaTransport
	cancel     context.CancelFunc
	done       chan error
}

// DispatcherSetup describes a Dispatcher to start.
type DispatcherSetup struct {
	Brokers []string

	// Role, LogTopic and RequestsTopic name the role and its two topics;
	// the caller creates the topics with one partition.
	Role, LogTopic, RequestsTopic string

	// Device is the measured device; nil is a device that does nothing.
	Device dispatch.Device

	// Intake, when set, makes the dispatcher read the requests topic.
	Intake bool

	// Options are passed to dispatch.NewDispatcher after the topics.
	Options []dispatch.Option
}

// StartDispatcher takes the role and runs a dispatcher for it. Close stops
// it.
func StartDispatcher(ctx context.Context, s DispatcherSetup) (*Dispatcher, error) {
	lease, err := coordination.NewLeaseConfig(BenchLease, 3*time.Second, time.Second)
	if err != nil {
		return nil, err
	}
	retries := &ConcurrentTxns{}
	transport, err := coordination.NewKafkaTransportWithClientOptions(lease, kgo.SeedBrokers(s.Brokers...), kgo.WithLogger(retries))
	if err != nil {
		return nil, err
	}
	role, err := coordination.NewRole(s.Role)
	if err != nil {
		transport.Close()
		return nil, err
	}
	member, _ := coordination.NewMemberID("bench")
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	l, err := coordination.AcquireLeadership(actx, transport, role, member,
		coordination.WithLeaseConfig(lease), coordination.WithPollInterval(100*time.Millisecond),
		coordination.WithRenewalsInWrites(lease.RenewInterval()/4)) // as the dispatcher binary
	cancel()
	if err != nil {
		transport.Close()
		return nil, err
	}
	timing := &TimingDevice{Inner: s.Device}
	registry := dispatch.NewRegistry()
	if err := registry.Register(BenchDevice, timing); err != nil {
		transport.Close()
		return nil, err
	}
	opts := []dispatch.Option{dispatch.WithLogTopic(s.LogTopic, 1), dispatch.WithRequestsTopic(s.RequestsTopic, 1)}
	var source *dispatch.KafkaRequestSource
	if s.Intake {
		source, err = dispatch.NewKafkaRequestSource(s.Brokers)
		if err != nil {
			transport.Close()
			return nil, err
		}
		opts = append(opts, dispatch.WithRequestSource(source))
	}
	issued := &issuedWrites{}
	mix := &TxnMix{issued: issued}
	opts = append(opts, dispatch.WithOnCommitted(mix.note))
	opts = append(opts, s.Options...)
	counting := &countingLeader{Leadership: l, issued: issued}
	// The reader the binary uses. Beside recovery (of an empty log here,
	// which no figure includes), it lets the dispatcher hold a settled
	// command as a compact ID rather than whole and write its checkpoints,
	// as in production; without it a measurement would time a map and a
	// heap that grow with every command, and no checkpoint transaction.
	logReader, err := dispatch.NewKafkaLogReader(s.Brokers)
	if err != nil {
		transport.Close()
		return nil, err
	}
	d, err := dispatch.NewDispatcher(counting, registry, logReader, opts...)
	if err != nil {
		transport.Close()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- d.Run(runCtx)
		if source != nil {
			source.Close()
		}
	}()
	return &Dispatcher{D: d, Device: timing, Role: s.Role, Retries: retries, Mix: mix, leadership: l, leader: counting, transport: transport, cancel: stop, done: done}, nil
}

// Transactions returns how many guarded transactions the dispatcher has
// written so far (lease renewals not included).
func (d *Dispatcher) Transactions() int64 { return d.leader.writes.Load() }

// WriteStats are the dispatcher's guarded transactions so far.
type WriteStats struct {
	// Writes is their number, Records the records they carried, and
	// InWrite the time spent inside Leadership.Write (waiting for the
	// write slot, produce, commit).
	Writes, Records int64
	InWrite         time.Duration

	// Bytes are the keys, values and headers of the records, and
	// CheckpointBytes those of the records that carry parts of a
	// checkpoint.
	Bytes, CheckpointBytes int64
}

// Sub returns the difference of two snapshots.
func (s WriteStats) Sub(o WriteStats) WriteStats {
	return WriteStats{Writes: s.Writes - o.Writes, Records: s.Records - o.Records, InWrite: s.InWrite - o.InWrite,
		Bytes: s.Bytes - o.Bytes, CheckpointBytes: s.CheckpointBytes - o.CheckpointBytes}
}

// Add returns the sum of two snapshots' differences.
func (s WriteStats) Add(o WriteStats) WriteStats {
	return WriteStats{Writes: s.Writes + o.Writes, Records: s.Records + o.Records, InWrite: s.InWrite + o.InWrite,
		Bytes: s.Bytes + o.Bytes, CheckpointBytes: s.CheckpointBytes + o.CheckpointBytes}
}

// WriteStats returns a snapshot of the dispatcher's guarded transactions.
func (d *Dispatcher) WriteStats() WriteStats {
	l := d.leader
	return WriteStats{Writes: l.writes.Load(), Records: l.records.Load(), InWrite: time.Duration(l.inWrite.Load()),
		Bytes: l.bytes.Load(), CheckpointBytes: l.checkpointBytes.Load()}
}

// TxnMix counts the dispatcher's committed transactions by what they
// carried: Issued records (with or without outcomes), or outcomes alone. It
// reads them through dispatch.WithOnCommitted, which reports every
// transaction with a command record.
type TxnMix struct {
	issuing, outcomesOnly atomic.Int64
	issued                *issuedWrites // nil logs nothing
}

// MixStats is a snapshot of a TxnMix.
type MixStats struct {
	// Issuing counts the transactions with at least one Issued record;
	// OutcomesOnly those with Outcome records and no Issued or
	// Redispatched record.
	Issuing, OutcomesOnly int64
}

// Sub returns the difference of two snapshots.
func (s MixStats) Sub(o MixStats) MixStats {
	return MixStats{Issuing: s.Issuing - o.Issuing, OutcomesOnly: s.OutcomesOnly - o.OutcomesOnly}
}

// Stats returns a snapshot.
func (m *TxnMix) Stats() MixStats {
	return MixStats{Issuing: m.issuing.Load(), OutcomesOnly: m.outcomesOnly.Load()}
}

// note is the dispatcher's WithOnCommitted callback.
func (m *TxnMix) note(records []dispatch.CommittedRecord) {
	issued, others := false, false
	for _, r := range records {
		switch r.Kind {
		case dispatch.EntryIssued:
			issued = true
		case dispatch.EntryRedispatched:
			others = true
		}
	}
	switch {
	case issued:
		m.issuing.Add(1)
		if m.issued != nil {
			m.issued.reported(time.Now())
		}
	case !others:
		m.outcomesOnly.Add(1)
	}
}

// countingLeader counts the dispatcher's guarded transactions, their
// records and the time they took.
type countingLeader struct {
	*coordination.Leadership
	writes, records, inWrite atomic.Int64
	bytes, checkpointBytes   atomic.Int64
	issued                   *issuedWrites // its transactions with Issued records, for the phases of a round
}

// Write implements dispatch.Leader.
func (c *countingLeader) Write(ctx context.Context, build func(coordination.FencingToken) ([]coordination.GuardedRecord, error)) (coordination.FencingToken, error) {
	c.writes.Add(1)
	start := time.Now()
	issued := false
	token, err := c.Leadership.Write(ctx, func(t coordination.FencingToken) ([]coordination.GuardedRecord, error) {
		recs, err := build(t)
		c.records.Add(int64(len(recs)))
		var all, checkpoints int64
		for _, r := range recs {
			n := RecordBytes(r.Key, r.Value, r.Headers)
			all += n
			switch keyKind(r.Key) {
			case dispatch.EntryCheckpoint:
				checkpoints += n
			case dispatch.EntryIssued:
				issued = true
			}
		}
		c.bytes.Add(all)
		c.checkpointBytes.Add(checkpoints)
		return recs, err
	})
	end := time.Now()
	c.inWrite.Add(int64(end.Sub(start)))
	if err == nil && issued {
		c.issued.wrote(start, end)
	}
	return token, err
}

// RecordBytes returns the bytes of a record's key, value and headers: what
// the dispatcher and the ceiling put in a transaction, before the batch's
// framing.
func RecordBytes(key, value []byte, headers []coordination.Header) int64 {
	n := len(key) + len(value)
	for _, h := range headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// keyKind returns the kind of the entry of a key of the command log, or
// zero for a key too short to hold one. The key begins with its layout
// version and the entry's kind, two big-endian int16s, as
// dispatch.EncodeEntry writes it, which is all this reads: decoding each
// record would put the bench's own work into the measured side.
func keyKind(key []byte) dispatch.EntryKind {
	if len(key) < 4 {
		return 0
	}
	return dispatch.EntryKind(binary.BigEndian.Uint16(key[2:4]))
}

// Close halts the dispatcher, resigns the role and closes the transport.
func (d *Dispatcher) Close() {
	d.cancel()
	<-d.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = d.leadership.Resign(ctx)
	cancel()
	d.transport.Close()
}

// TimingDevice wraps a device and records the instant each command's
// Dispatch returned successfully.
type TimingDevice struct {
	// Inner is the measured device; nil acts at once.
	Inner dispatch.Device

	arrivals Arrivals
}

// Dispatch implements dispatch.Device.
func (t *TimingDevice) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	var res dispatch.Result
	if t.Inner != nil {
		var err error
		if res, err = t.Inner.Dispatch(ctx, cmd, token); err != nil {
			return res, err
		}
	}
	t.arrivals.Note(cmd.ID, time.Now())
	return res, nil
}

// DispatchUnder implements dispatch.AuthorityDevice, so that a fencing
// inner device receives the leadership's term; an inner device without it
// receives the token alone.
func (t *TimingDevice) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	var res dispatch.Result
	if inner, ok := t.Inner.(dispatch.AuthorityDevice); ok {
		var err error
		if res, err = inner.DispatchUnder(ctx, cmd, authority); err != nil {
			return res, err
		}
		t.arrivals.Note(cmd.ID, time.Now())
		return res, nil
	}
	return t.Dispatch(ctx, cmd, authority.Token)
}

// Wait returns the instant the command was dispatched, waiting for it until
// ctx ends.
func (t *TimingDevice) Wait(ctx context.Context, id string) (time.Time, error) {
	at, err := t.arrivals.Wait(ctx, id)
	if err != nil {
		return at, fmt.Errorf("command %s not dispatched: %w", id, err)
	}
	return at, nil
}

// WaitAll returns the instant each of ids was dispatched, in their order,
// waiting for all of them until ctx ends (see Arrivals.WaitAll).
func (t *TimingDevice) WaitAll(ctx context.Context, ids []string) ([]time.Time, error) {
	return t.arrivals.WaitAll(ctx, ids)
}

// Count returns how many commands the device has acted on.
func (t *TimingDevice) Count() int { return t.arrivals.Count() }

// Arrivals notes the instant each id arrived and lets a caller wait for one.
// Each arrival is handed to one Wait, which forgets it. The zero value is
// ready to use.
type Arrivals struct {
	mu      sync.Mutex
	at      map[string]time.Time
	waiters map[string]chan struct{}
	round   *roundWait // the WaitAll under way, or nil
	count   int
	first   time.Time
	last    time.Time
}

// roundWait is a WaitAll under way: the ids not arrived yet, and done,
// closed when the last of them arrives.
type roundWait struct {
	missing map[string]struct{}
	done    chan struct{}
}

// Note records that id arrived at the instant at.
func (a *Arrivals) Note(id string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at == nil {
		a.at = map[string]time.Time{}
	}
	a.at[id] = at
	a.count++
	if a.first.IsZero() {
		a.first = at
	}
	a.last = at
	if w, ok := a.waiters[id]; ok {
		close(w)
		delete(a.waiters, id)
	}
	if r := a.round; r != nil {
		if _, ok := r.missing[id]; ok {
			delete(r.missing, id)
			if len(r.missing) == 0 {
				close(r.done)
				a.round = nil
			}
		}
	}
}

// Count returns how many arrivals were noted.
func (a *Arrivals) Count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// Span returns the first and the last instant noted.
func (a *Arrivals) Span() (first, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.first, a.last
}

// Wait returns the instant id arrived, waiting for it until ctx ends.
func (a *Arrivals) Wait(ctx context.Context, id string) (time.Time, error) {
	a.mu.Lock()
	if at, ok := a.at[id]; ok {
		delete(a.at, id)
		a.mu.Unlock()
		return at, nil
	}
	if a.waiters == nil {
		a.waiters = map[string]chan struct{}{}
	}
	w, ok := a.waiters[id]
	if !ok {
		w = make(chan struct{})
		a.waiters[id] = w
	}
	a.mu.Unlock()
	select {
	case <-w:
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	at := a.at[id]
	delete(a.at, id)
	return at, nil
}

// WaitAll returns the instant each of ids arrived, in their order, waiting
// for all of them until ctx ends, and forgets them as Wait does. It wakes
// once, when the last one arrives, rather than once for each as a loop of
// Wait calls may: a waiter for a round of commands then takes no CPU from
// the goroutine that drives the device through them. One WaitAll runs at a
// time.
func (a *Arrivals) WaitAll(ctx context.Context, ids []string) ([]time.Time, error) {
	a.mu.Lock()
	if a.round != nil {
		a.mu.Unlock()
		return nil, errors.New("ceiling: a WaitAll is already under way")
	}
	r := &roundWait{missing: make(map[string]struct{}, len(ids)), done: make(chan struct{})}
	for _, id := range ids {
		if _, ok := a.at[id]; !ok {
			r.missing[id] = struct{}{}
		}
	}
	if len(r.missing) > 0 {
		a.round = r
		a.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			a.mu.Lock()
			if a.round == r {
				a.round = nil
			}
			n := len(r.missing)
			a.mu.Unlock()
			if n > 0 {
				return nil, fmt.Errorf("%d of %d commands not dispatched: %w", n, len(ids), ctx.Err())
			}
		}
		a.mu.Lock()
	}
	defer a.mu.Unlock()
	times := make([]time.Time, len(ids))
	for i, id := range ids {
		times[i] = a.at[id]
		delete(a.at, id)
	}
	return times, nil
}

// benchPayload is the payload of every measured command: 64 bytes.
const benchPayload = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

// BenchCommand is the i-th command of a measurement: a 64-byte payload to
// BenchDevice, the shape the raw ceiling writes too. Its ID is prefix, a
// dash and i in eight digits or more. It is built without fmt: a round of
// a thousand of them is built inside the timed loop, where the ceiling's
// records are encoded before it.
func BenchCommand(role, prefix string, i int, now time.Time) dispatch.Command {
	id := make([]byte, 0, len(prefix)+1+20) // an int64 has at most 20 characters
	id = append(append(id, prefix...), '-')
	n := strconv.AppendInt(nil, int64(i), 10)
	for range 8 - len(n) {
		id = append(id, '0')
	}
	return dispatch.Command{
		ID: string(append(id, n...)), Role: role, Device: BenchDevice, Action: "set",
		Payload: []byte(benchPayload), SubmittedAt: now, Deadline: now.Add(time.Minute),
	}
}

// MeasureSubmit submits batches of commands through Submit, all of a batch
// at once, and waits until the device has been driven for every one of
// them before the next batch starts. A latency is from the start of the
// batch to the device's return: durable in the quorum, then driven. The
// outcomes commit in the background, in the same transactions as later
// batches.
//
// It also returns the mean number of transactions the dispatcher wrote per
// round, outcomes included.
func MeasureSubmit(ctx context.Context, d *Dispatcher, batch int, duration time.Duration, prefix string) (Summary, float64, error) {
	run, err := measureSubmit(ctx, d, batch, duration, prefix, 0, SubmitEach)
	if err != nil {
		return Summary{}, 0, err
	}
	return Summarize(run.samples, run.elapsed), run.perRound, nil
}

// SubmitMode is how a round hands its batch of commands to the dispatcher.
type SubmitMode int

const (
	// SubmitBatched hands the whole batch to one Dispatcher.SubmitBatch
	// call, as a client that has the commands together does.
	SubmitBatched SubmitMode = iota
	// SubmitEach gives every command a Submit call of its own, all at once
	// from as many goroutines, as independent clients do.
	SubmitEach
)

// String names the mode as the benchreport flag -submit does.
func (m SubmitMode) String() string {
	if m == SubmitEach {
		return "each"
	}
	return "batch"
}

// submitRun is what measureSubmit measured: every latency, the run's time,
// the mean transactions a round, and the phases of each round.
type submitRun struct {
	samples  []time.Duration
	elapsed  time.Duration
	perRound float64
	phases   []RoundPhases
}

// measureSubmit is MeasureSubmit that returns the samples and the phases of
// each round, numbers its commands from first, and submits them as mode
// says.
func measureSubmit(ctx context.Context, d *Dispatcher, batch int, duration time.Duration, prefix string, first int, mode SubmitMode) (submitRun, error) {
	if batch < 1 {
		return submitRun{}, errors.New("ceiling: batch below 1")
	}
	txns0, rounds := d.Transactions(), 0
	written := d.leader.issued.mark()
	var marks []roundMarks
	var samples []time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	n := first
	start := time.Now()
	for time.Since(start) < duration {
		rounds++
		began := time.Now()
		ids := make([]string, batch)
		cmds := make([]dispatch.Command, batch)
		for i := range ids {
			cmds[i] = BenchCommand(d.Role, prefix, n, began)
			n++
			ids[i] = cmds[i].ID
		}
		called := time.Now()
		report := func(err error) {
			select {
			case errs <- err:
			default:
			}
		}
		switch mode {
		case SubmitEach:
			for _, cmd := range cmds {
				wg.Go(func() {
					sctx, cancel := context.WithTimeout(ctx, time.Minute)
					defer cancel()
					if _, err := d.D.Submit(sctx, cmd); err != nil {
						report(err)
					}
				})
			}
		default:
			wg.Go(func() {
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				for _, r := range d.D.SubmitBatch(sctx, cmds) {
					if r.Err != nil {
						report(r.Err)
						return
					}
				}
			})
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		times, err := d.Device.WaitAll(wctx, ids)
		cancel()
		if err != nil {
			wg.Wait()
			select {
			case serr := <-errs:
				return submitRun{}, fmt.Errorf("%w (submit: %w)", err, serr)
			default:
				return submitRun{}, err
			}
		}
		back := time.Now()
		for _, at := range times {
			samples = append(samples, at.Sub(began))
		}
		marks = append(marks, roundMarks{began: began, called: called, lastAct: slices.MaxFunc(times, time.Time.Compare), back: back})
	}
	elapsed := time.Since(start)
	perRound := float64(d.Transactions()-txns0) / float64(max(1, rounds))
	wg.Wait()
	select {
	case err := <-errs:
		return submitRun{}, fmt.Errorf("submit: %w", err)
	default:
	}
	phases := phasesOf(marks, d.leader.issued.from(written, 5*time.Second))
	return submitRun{samples: samples, elapsed: elapsed, perRound: perRound, phases: phases}, nil
}

// PendingMemory measures the heap that the dispatcher holds per pending
// command: it makes the device block, feeds n commands through the
// requests topic, waits until the dispatcher knows all of them (one in the
// device, the rest issued and waiting in the device's lane), and compares
// the live heap before and after. The caller's dispatcher must read intake
// and wrap a BlockingDevice.
func PendingMemory(ctx context.Context, d *Dispatcher, block *BlockingDevice, brokers []string, requestsTopic string, n int) (perCommand float64, err error) {
	before := liveHeap()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(requestsTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestTimeoutOverhead(DefaultRequestTimeout))
	if err != nil {
		return 0, err
	}
	now := time.Now()
	var last string
	for i := range n {
		cmd := BenchCommand(d.Role, "mem", i, now)
		cmd.Deadline = now.Add(10 * time.Minute)
		value, err := dispatch.EncodeRequest(cmd)
		if err != nil {
			cl.Close()
			return 0, err
		}
		cl.Produce(ctx, &kgo.Record{Key: []byte(cmd.ID), Value: value, Partition: 0}, nil)
		last = cmd.ID
	}
	if err := cl.Flush(ctx); err != nil {
		cl.Close()
		return 0, err
	}
	cl.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, ok := d.D.Lookup(last); ok && block.Blocked() {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the dispatcher did not take in %d commands in 2 minutes", n)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	after := liveHeap()
	block.Release()
	return float64(after-before) / float64(n), nil
}

// liveHeap returns the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BlockingDevice blocks every Dispatch until Release, so that commands
// pile up pending.
type BlockingDevice struct {
	once    sync.Once
	release chan struct{}
	mu      sync.Mutex
	blocked bool
}

// NewBlockingDevice returns a device that blocks until Release.
func NewBlockingDevice() *BlockingDevice { return &BlockingDevice{release: make(chan struct{})} }

// Dispatch implements dispatch.Device.
func (b *BlockingDevice) Dispatch(ctx context.Context, _ dispatch.Command, _ coordination.FencingToken) (dispatch.Result, error) {
	b.mu.Lock()
	b.blocked = true
	b.mu.Unlock()
	select {
	case <-b.release:
		return dispatch.Result{}, nil
	case <-ctx.Done():
		return dispatch.Result{}, ctx.Err()
	}
}

// Blocked reports whether a Dispatch has started.
func (b *BlockingDevice) Blocked() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.blocked
}

// Release lets every Dispatch return.
func (b *BlockingDevice) Release() { b.once.Do(func() { close(b.release) }) }
