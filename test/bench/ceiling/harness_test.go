package ceiling

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

func TestEncodeCommandsWritesTheIssuedAndTheOutcomeOfEachCommand(t *testing.T) {
	cmds, err := EncodeCommands("bench-role", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 3 {
		t.Fatalf("%d commands, want 3", len(cmds))
	}
	for i, c := range cmds {
		issued, err := dispatch.DecodeEntry(c.Key[0], c.Value[0])
		if err != nil {
			t.Fatal(err)
		}
		outcome, err := dispatch.DecodeEntry(c.Key[1], c.Value[1])
		if err != nil {
			t.Fatal(err)
		}
		if issued.Kind != dispatch.EntryIssued || outcome.Kind != dispatch.EntryOutcome ||
			issued.Issued.Command.ID != outcome.Outcome.CommandID || issued.Role != "bench-role" {
			t.Errorf("command %d: issued %+v, outcome %+v", i, issued, outcome)
		}
		if len(c.Headers) != 3 {
			t.Errorf("command %d: %d headers, want token, member and term", i, len(c.Headers))
		}
	}
	if string(cmds[0].Key[0]) == string(cmds[1].Key[0]) {
		t.Error("two commands share a key")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := slices.Clone(c.in)
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("Median changed its argument to %v", c.in)
		}
	}
}

func TestInterleaveStartsEachRepetitionWithTheNextSide(t *testing.T) {
	var order []string
	side := func(name string, rate float64) Side {
		return Side{Name: name, Run: func(_ context.Context, rep int, window time.Duration) (Summary, error) {
			order = append(order, name)
			return Summary{Rate: rate + float64(rep), Elapsed: window}, nil
		}}
	}
	res, err := Interleave(context.Background(), 3, time.Second, []Side{side("a", 10), side("b", 20), side("c", 40)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}
	if !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if res[1].Rate != 21 || len(res[1].Reps) != 3 {
		t.Errorf("side b: median %v over %d repetitions, want 21 over 3", res[1].Rate, len(res[1].Reps))
	}
	// Per repetition 40/10, 41/11, 42/12: the median is the middle one.
	if r := res[2].RatioTo(res[0]); r != 41.0/11 {
		t.Errorf("c over a: %v, want %v", r, 41.0/11)
	}
}

func TestArrivalsHandsEachArrivalToAWaiter(t *testing.T) {
	var a Arrivals
	at := time.Unix(100, 0)
	a.Note("early", at)
	got, err := a.Wait(context.Background(), "early")
	if err != nil || !got.Equal(at) {
		t.Errorf("early: %v, %v", got, err)
	}
	done := make(chan time.Time)
	go func() {
		got, _ := a.Wait(context.Background(), "late")
		done <- got
	}()
	// The waiter may register before or after the note; either way it
	// receives the instant.
	a.Note("late", at.Add(time.Second))
	if got := <-done; !got.Equal(at.Add(time.Second)) {
		t.Errorf("late: %v", got)
	}
	if a.Count() != 2 {
		t.Errorf("count %d, want 2", a.Count())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Wait(ctx, "never"); err == nil {
		t.Error("a wait for an id that never arrives returned without error")
	}
}

func TestArrivalsWaitAllWakesWhenTheLastArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var a Arrivals
		at := time.Unix(100, 0)
		a.Note("b", at)
		type result struct {
			times []time.Time
			err   error
		}
		done := make(chan result)
		go func() {
			times, err := a.WaitAll(t.Context(), []string{"a", "b", "c"})
			done <- result{times, err}
		}()
		synctest.Wait()
		if _, err := a.WaitAll(t.Context(), []string{"x"}); err == nil {
			t.Error("a second WaitAll under way returned without error")
		}
		a.Note("a", at.Add(time.Second))
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("returned %v, %v before the last arrived", r.times, r.err)
		default:
		}
		a.Note("c", at.Add(2*time.Second))
		r := <-done
		want := []time.Time{at.Add(time.Second), at, at.Add(2 * time.Second)}
		if r.err != nil || !slices.EqualFunc(r.times, want, time.Time.Equal) {
			t.Errorf("WaitAll: %v, %v; want %v", r.times, r.err, want)
		}
		// What it returned is forgotten, as by Wait.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := a.WaitAll(ctx, []string{"a", "d"}); err == nil || !strings.Contains(err.Error(), "2 of 2") {
			t.Errorf("a WaitAll for ids gone or never noted: %v, want 2 of 2 not dispatched", err)
		}
	})
}

func TestBenchCommandIDs(t *testing.T) {
	for _, i := range []int{0, 7, 12345678, 123456789} {
		cmd := BenchCommand("r", "p", i, time.Unix(100, 0))
		if want := fmt.Sprintf("p-%08d", i); cmd.ID != want {
			t.Errorf("ID of command %d: %q, want %q", i, cmd.ID, want)
		}
		if len(cmd.Payload) != 64 {
			t.Errorf("payload of %d bytes, want 64", len(cmd.Payload))
		}
	}
}

func TestCountFDsSeesASocket(t *testing.T) {
	// The first listener also opens the runtime's poller; count after it.
	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	fds0, sockets0, err := CountFDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fds1, sockets1, err := CountFDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if sockets1 != sockets0+1 || fds1 != fds0+1 || fds1 < sockets1 {
		t.Errorf("before %d fds %d sockets, after %d fds %d sockets", fds0, sockets0, fds1, sockets1)
	}
	if n, err := Threads(os.Getpid()); err != nil || n < 1 {
		t.Errorf("threads %d, %v", n, err)
	}
}

func TestCPUPerCommand(t *testing.T) {
	r := E2EResult{DispatchCPU: 30 * time.Millisecond, DispatchCommands: 3000, CeilingCPU: 12 * time.Millisecond, CeilingCommands: 6000}
	if d, c := r.CPUPerCommand(); d != 10*time.Microsecond || c != 2*time.Microsecond {
		t.Errorf("CPUPerCommand = %s, %s; want 10µs, 2µs", d, c)
	}
	if d, c := (E2EResult{DispatchCPU: time.Second}).CPUPerCommand(); d != 0 || c != 0 {
		t.Errorf("CPUPerCommand of no commands = %s, %s; want 0, 0", d, c)
	}
}

// TestOwnCPUCountsThisProcess: the CPU time the harness charges a side grows
// with the work this process does.
func TestOwnCPUCountsThisProcess(t *testing.T) {
	before, err := ownCPU()
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the process used 50 ms more, well above the 10 ms of the
	// kernel's accounting, or give up after 10 s of wall time.
	deadline := time.Now().Add(10 * time.Second)
	var sink uint64
	for time.Now().Before(deadline) {
		for i := range 1_000_000 {
			sink += uint64(i) * 2654435761
		}
		if now, err := ownCPU(); err != nil {
			t.Fatal(err)
		} else if now-before >= 50*time.Millisecond {
			return
		}
	}
	t.Fatalf("ownCPU did not grow by 50ms in 10s of spinning (%d)", sink)
}
