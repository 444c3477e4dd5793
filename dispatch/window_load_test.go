package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// failingRange is a rangeLog whose reads of the offsets from first to last
// fail with err.
type failingRange struct {
	*rangeLog
	first, last int64
	err         error
}

func (f *failingRange) ReadRange(ctx context.Context, tp coordination.TopicPartition, rng LogRange) ([]Entry, error) {
	if rng.From <= f.last && rng.Until > f.first {
		return nil, f.err
	}
	return f.rangeLog.ReadRange(ctx, tp, rng)
}

// deferredRun is a dispatcher whose recovery ended while its Standby was
// held reading the checkpoint's IDs.
type deferredRun struct {
	d          *Dispatcher
	leader     *fakeLeader
	device     *countingDevice
	gated      *gatedRange
	prefetched chan error
	runErr     chan error
	ids        []string
}

// startDeferred writes a log whose newest checkpoint is a delta, holds a
// Standby's read of its base at a gate, and starts a dispatcher on reader
// (a plain rangeLog of the log unless wrap makes another) that recovers
// with that Standby: it is ready with its dedup window still to load.
func startDeferred(t *testing.T, wrap func(log *leaderLog, base CheckpointBase) LogReader) *deferredRun {
	t.Helper()
	const interval = 40
	opts := []Option{WithCheckpointInterval(interval)}
	var log *leaderLog
	var base CheckpointBase
	var standby *Standby
	var r *deferredRun
	// A search whose reads reached below the delta read its base too, and
	// the Standby then reads no range of the base alone for the gate to
	// hold: such a log is written again.
	for attempt := 0; ; attempt++ {
		var newest loggedCheckpoint
		var role coordination.Role
		var ids []string
		log, newest, role, ids = deltaLog(t, interval, map[string]Device{"dev": &countingDevice{}})
		base = *newest.Base
		r = &deferredRun{
			gated:      &gatedRange{rangeLog: &rangeLog{leaderLog: log}, first: base.First, last: base.Last, gate: make(chan struct{})},
			prefetched: make(chan error, 1),
			runErr:     make(chan error, 1),
			device:     &countingDevice{},
			ids:        ids,
		}
		var err error
		if standby, err = NewStandby(role, r.gated, opts...); err != nil {
			t.Fatal(err)
		}
		go func() { r.prefetched <- standby.Prefetch(context.Background()) }()
		if r.waitGate() {
			break
		}
		if attempt == 10 {
			t.Fatal("in ten logs the standby never read the base on its own")
		}
	}
	var reader LogReader = &rangeLog{leaderLog: log}
	if wrap != nil {
		reader = wrap(log, base)
	}
	r.startDispatcher(t, log, reader, standby, opts)
	return r
}

// startDispatcher starts r.d, a dispatcher of log with the Standby, reading
// it with reader and driving r.device, and returns once it is ready with
// its dedup window still to load. The test's cleanup ends its leadership
// and waits for Run to return.
func (r *deferredRun) startDispatcher(t *testing.T, log *leaderLog, reader LogReader, standby *Standby, opts []Option) {
	t.Helper()
	registry := NewRegistry()
	if err := registry.Register("dev", r.device); err != nil {
		t.Fatal(err)
	}
	r.leader = newFakeLeader(t, log, fakeToken(t, 7, 9))
	var err error
	if r.d, err = NewDispatcher(r.leader, registry, reader, append(opts, WithStandby(standby), WithCommitLinger(0))...); err != nil {
		t.Fatal(err)
	}
	go func() { r.runErr <- r.d.Run(context.Background()) }()
	t.Cleanup(func() {
		r.leader.end(fmt.Errorf("test over: %w", coordination.ErrNotHeld))
		<-r.runErr
	})
	select {
	case <-r.d.Ready():
	case err := <-r.runErr:
		r.runErr <- err // for the cleanup
		t.Fatalf("Run returned before it recovered: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the recovery waited for the standby's read of the checkpoint's IDs")
	}
	r.d.mu.Lock()
	loading := r.d.loadingWindow()
	r.d.mu.Unlock()
	if !loading {
		t.Fatal("the dispatcher is ready with its window loaded; want it left to load behind intake")
	}
}

// waitGate waits until the Standby's read of the base waits at the gate,
// and reports false when its Prefetch ended without reading there.
func (r *deferredRun) waitGate() bool {
	for r.gated.inside.Load() == 0 {
		select {
		case <-r.prefetched:
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

// TestWindowLoadWaits checks Lookup and Drain while the dedup window loads
// behind intake: each waits for the window, and returns its context's error
// when that ends first; once the window is in, a command held only in it
// is looked up, and Drain ends.
func TestWindowLoadWaits(t *testing.T) {
	r := startDeferred(t, nil)
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 30*time.Millisecond)
	}
	ctx, cancel := short()
	if _, ok, err := r.d.LookupContext(ctx, r.ids[0]); !errors.Is(err, context.DeadlineExceeded) || ok {
		t.Fatalf("a lookup while the window loads: %t, %v; want it to wait until its context ends", ok, err)
	}
	cancel()
	ctx, cancel = short()
	if err := r.d.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a drain while the window loads: %v; want it to wait until its context ends", err)
	}
	cancel()
	close(r.gated.gate)
	if err := <-r.prefetched; err != nil {
		t.Fatal(err)
	}
	o, ok, err := r.d.LookupContext(context.Background(), r.ids[0])
	if err != nil || !ok || o.Status != StatusSucceeded {
		t.Fatalf("a lookup of %s once the window loaded: %+v, %t, %v; want it succeeded", r.ids[0], o, ok, err)
	}
	if err := r.d.Drain(context.Background()); err != nil {
		t.Fatalf("a drain once the window loaded: %v", err)
	}
}

// TestWindowLoadReadsWhenTheStandbyFails checks the loader's own read: when
// the Standby's read of the base fails, the dispatcher reads the base
// itself, and then tells a command under an ID of the base from a new one.
func TestWindowLoadReadsWhenTheStandbyFails(t *testing.T) {
	var reader *rangeLog
	r := startDeferred(t, func(log *leaderLog, _ CheckpointBase) LogReader {
		reader = &rangeLog{leaderLog: log}
		return reader
	})
	before := reader.read.Load()
	r.gated.fail = errors.New("the standby's read failed")
	close(r.gated.gate)
	if err := <-r.prefetched; err == nil {
		t.Fatal("the standby's read did not fail")
	}
	now := time.Now()
	o, err := r.d.Submit(context.Background(), Command{ID: "after-load", Device: "dev", Action: "set", Payload: []byte("p"), SubmittedAt: now, Deadline: now.Add(time.Hour)})
	if err != nil || o.Status != StatusSucceeded || r.device.count("after-load") != 1 {
		t.Fatalf("a new command: %+v, %v, dispatched %d times; want it carried out once", o, err, r.device.count("after-load"))
	}
	var conflict *IDConflictError
	if _, err := r.d.Submit(context.Background(), Command{ID: r.ids[0], Device: "dev", Action: "set", Payload: []byte("other"), SubmittedAt: now, Deadline: now.Add(time.Hour)}); !errors.As(err, &conflict) || r.device.count(r.ids[0]) != 0 {
		t.Fatalf("a different command under the ID %s of the base: %v, dispatched %d times; want an IDConflictError and no dispatch", r.ids[0], err, r.device.count(r.ids[0]))
	}
	if reader.read.Load() == before {
		t.Fatal("the dispatcher read nothing itself after the standby's read failed")
	}
}

// TestWindowLoadFailureHalts checks that a dispatcher whose dedup window
// cannot be loaded halts, with the cause, and carries out no command it
// took meanwhile: its successor's recovery reads the log again.
func TestWindowLoadFailureHalts(t *testing.T) {
	broken := newFormatError("checkpoint", errors.New("a part does not decode"))
	r := startDeferred(t, func(log *leaderLog, base CheckpointBase) LogReader {
		return &failingRange{rangeLog: &rangeLog{leaderLog: log}, first: base.First, last: base.Last, err: broken}
	})
	now := time.Now()
	submitted := make(chan error, 1)
	go func() {
		_, err := r.d.Submit(context.Background(), Command{ID: "meanwhile", Device: "dev", Action: "set", Payload: []byte("p"), SubmittedAt: now, Deadline: now.Add(time.Hour)})
		submitted <- err
	}()
	r.gated.fail = errors.New("the standby's read failed")
	close(r.gated.gate)
	<-r.prefetched
	var format *LogFormatError
	select {
	case err := <-r.runErr:
		if !errors.As(err, &format) || !strings.Contains(err.Error(), "load the dedup window") {
			t.Fatalf("Run returned %v; want the window's load failure, a *LogFormatError", err)
		}
		r.runErr <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher did not halt when its window could not be loaded")
	}
	if err := <-submitted; err == nil || r.device.count("meanwhile") != 0 {
		t.Fatalf("a command taken while the window loaded: %v, dispatched %d times; want an error and no dispatch", err, r.device.count("meanwhile"))
	}
}

// fullLog writes a log whose newest checkpoint of the role is full, with
// records of another role between the first leader's, and returns it, that
// checkpoint, the role and the IDs of the commands carried out.
func fullLog(t *testing.T, interval int) (*leaderLog, loggedCheckpoint, coordination.Role, []string) {
	t.Helper()
	log := &leaderLog{}
	first := startLeader(t, log, &rangeLog{leaderLog: log}, 0, map[string]Device{"dev": &countingDevice{}}, WithCheckpointInterval(interval))
	var ids []string
	// A window of at most checkpointDivisor x interval IDs is written
	// whole at every checkpoint.
	for round := range 3 {
		prefix := fmt.Sprintf("r%d", round)
		submitMany(t, first.d, prefix, interval, time.Now())
		for i := range interval {
			ids = append(ids, fmt.Sprintf("%s-%d", prefix, i))
		}
		otherRole(t, log, round, 30)
	}
	first.stop(t)
	cps := checkpointsOf(t, log.entries(t))
	newest := cps[len(cps)-1]
	if newest.Base != nil {
		t.Fatal("the newest checkpoint is a delta; want a full one")
	}
	return log, newest, first.leader.Role(), ids
}

// TestWindowLoadWaitsForAFullCheckpoint checks the deferral's other entry:
// the newest checkpoint is full, and the member's Standby found it and
// still decodes its IDs when the recovery builds on its search. The
// recovery ends without them; a different command under an ID of the
// checkpoint waits for them and gets an IDConflictError, with no dispatch,
// and a new command is carried out once. It does so when the Standby hands
// the IDs over, and when its decode fails and the dispatcher reads the
// checkpoint itself.
func TestWindowLoadWaitsForAFullCheckpoint(t *testing.T) {
	const interval = 40
	for _, standbyFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("standby fails %t", standbyFails), func(t *testing.T) {
			log, newest, role, ids := fullLog(t, interval)
			opts := []Option{WithCheckpointInterval(interval)}
			// The gate is open: the reader counts the reads of the
			// checkpoint's offsets.
			open := make(chan struct{})
			close(open)
			reader := &gatedRange{rangeLog: &rangeLog{leaderLog: log}, first: newest.first, last: newest.last, gate: open}
			standby, err := NewStandby(role, reader, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := standby.Prefetch(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Put the Standby back to where its search was over and its
			// decode of the IDs was not.
			standby.mu.Lock()
			done := standby.base
			if done == nil || done.ref.First != newest.first || done.ref.Last != newest.last || done.found == nil {
				standby.mu.Unlock()
				t.Fatalf("the standby holds %+v; want the IDs of the full checkpoint at offsets %d to %d and its search", done, newest.first, newest.last)
			}
			decoding := &prefetched{ref: done.ref, done: make(chan struct{}), found: done.found}
			standby.base = decoding
			standby.mu.Unlock()

			r := &deferredRun{device: &countingDevice{}, runErr: make(chan error, 1)}
			r.startDispatcher(t, log, reader, standby, opts)
			d, device := r.d, r.device

			now := time.Now()
			conflict := make(chan error, 1)
			go func() {
				_, err := d.Submit(context.Background(), Command{ID: ids[0], Device: "dev", Action: "set", Payload: []byte("other"), SubmittedAt: now, Deadline: now.Add(time.Hour)})
				conflict <- err
			}()
			select {
			case err := <-conflict:
				t.Fatalf("a command under the ID %s of the checkpoint ended before the window loaded: %v", ids[0], err)
			case <-time.After(30 * time.Millisecond):
			}
			read := reader.inside.Load()
			if standbyFails {
				standby.mu.Lock()
				standby.base = nil
				decoding.err = errors.New("the standby's decode failed")
				standby.mu.Unlock()
			} else {
				decoding.ids = done.ids
			}
			close(decoding.done)

			var idConflict *IDConflictError
			if err := <-conflict; !errors.As(err, &idConflict) || device.count(ids[0]) != 0 {
				t.Fatalf("a different command under the ID %s of the checkpoint: %v, dispatched %d times; want an IDConflictError and no dispatch", ids[0], err, device.count(ids[0]))
			}
			o, err := d.Submit(context.Background(), Command{ID: "after-load", Device: "dev", Action: "set", Payload: []byte("p"), SubmittedAt: now, Deadline: now.Add(time.Hour)})
			if err != nil || o.Status != StatusSucceeded || device.count("after-load") != 1 {
				t.Fatalf("a new command: %+v, %v, dispatched %d times; want it carried out once", o, err, device.count("after-load"))
			}
			o, ok, err := d.LookupContext(context.Background(), ids[len(ids)/2])
			if err != nil || !ok || o.Status != StatusSucceeded {
				t.Fatalf("a lookup of %s: %+v, %t, %v; want it succeeded", ids[len(ids)/2], o, ok, err)
			}
			if readSelf := reader.inside.Load() > read; readSelf != standbyFails {
				t.Fatalf("the dispatcher read the checkpoint itself: %t; want %t", readSelf, standbyFails)
			}
		})
	}
}
