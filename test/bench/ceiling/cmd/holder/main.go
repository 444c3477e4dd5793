// Command holder competes for one or more roles with package coordination
// and reports, as JSON lines on standard output, when it takes and loses each
// one. The measurements of test/bench/ceiling run several of them to time a
// failover from outside the processes, and one with a dispatcher per role to
// measure what a role costs a process:
//
//	holder -member m1 -role bench-failover -lease 3s -renew 1s -stagger 1s
//	holder -member m1 -role bench-roles -roles 100
//	holder -member m1 -role bench-roles -roles 16 -log-topic log -requests-topic req -partitions 16
//
// SIGTERM and SIGINT make it resign every role it holds and exit; SIGKILL is
// the crash that a failover measurement inflicts. SIGUSR1 makes it write the
// transport operations it counted so far. After a leadership ends without a
// resignation (a fence), it competes for the role again.
//
// The events are ceiling.HolderEvent values.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
	"github.com/twmb/franz-go/pkg/kgo"
)

// resignTimeout bounds the resignation of every role after SIGTERM.
const resignTimeout = 5 * time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(1)
	}
}

// emitter writes events as JSON lines, one writer at a time.
type emitter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (e *emitter) emit(ev ceiling.HolderEvent) {
	ev.At = time.Now().UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(ev)
}

func run() error {
	brokers := flag.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "comma-separated bootstrap addresses (default $KRABKA_KAFKA_BROKERS)")
	member := flag.String("member", "", "member id")
	roleName := flag.String("role", "", "the role, or the name prefix of the roles with -roles > 1")
	roles := flag.Int("roles", 1, "number of roles to hold, named <role>-0000 and up when above 1")
	parallel := flag.Int("parallel", 32, "roles acquired at once")
	lease := flag.Duration("lease", coordination.DefaultLeaseDuration, "lease duration")
	renew := flag.Duration("renew", coordination.DefaultRenewInterval, "renew interval")
	stagger := flag.Duration("stagger", coordination.DefaultChallengeStagger, "challenge stagger")
	poll := flag.Duration("poll", coordination.DefaultPollInterval, "poll interval")
	logTopic := flag.String("log-topic", "", "with -requests-topic, run a dispatcher with a no-op device for every role held, on this command log")
	requestsTopic := flag.String("requests-topic", "", "the requests topic of the dispatchers")
	partitions := flag.Int("partitions", 1, "partitions of the log and the requests topic")
	flag.Parse()
	if *brokers == "" || *member == "" || *roleName == "" || *roles < 1 {
		return errors.New("-brokers, -member, -role and -roles >= 1 are required")
	}
	memberID, err := coordination.NewMemberID(*member)
	if err != nil {
		return err
	}
	config, err := coordination.NewLeaseConfig(*lease, *renew, *stagger)
	if err != nil {
		return err
	}
	names := []string{*roleName}
	if *roles > 1 {
		names = names[:0]
		for i := range *roles {
			names = append(names, fmt.Sprintf("%s-%04d", *roleName, i))
		}
	}
	requests := &requestCounter{counts: map[string]int64{}}
	transport, err := coordination.NewKafkaTransportWithClientOptions(config,
		kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.WithHooks(requests))
	if err != nil {
		return err
	}
	defer transport.Close()
	counted, err := newCountingTransport(transport)
	if err != nil {
		return err
	}

	out := &emitter{enc: json.NewEncoder(os.Stdout)}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)

	options := []coordination.Option{coordination.WithLeaseConfig(config), coordination.WithPollInterval(*poll)}
	h := &holding{out: out, member: memberID, transport: counted, options: options, want: len(names)}
	if *logTopic != "" || *requestsTopic != "" {
		if h.dispatch, err = newDispatching(strings.Split(*brokers, ","), *logTopic, *requestsTopic, *partitions); err != nil {
			return err
		}
	}
	slots := make(chan struct{}, max(1, *parallel))
	var wg sync.WaitGroup
	for _, name := range names {
		role, err := coordination.NewRole(name)
		if err != nil {
			stop()
			wg.Wait()
			return err
		}
		wg.Go(func() { h.hold(ctx, role, slots) })
	}

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for {
		select {
		case <-usr1:
			ops := counted.snapshot()
			ops[ceiling.GoroutinesCounter] = int64(runtime.NumGoroutine())
			for name, n := range requests.snapshot() {
				ops[ceiling.RequestPrefix+name] = n
			}
			out.emit(ceiling.HolderEvent{Ev: ceiling.EventOps, Member: *member, Ops: ops})
		case <-finished:
			return nil
		}
	}
}

// holding is the state shared by the goroutines of one process, one per role.
type holding struct {
	out       *emitter
	member    coordination.MemberID
	transport coordination.Transport
	options   []coordination.Option
	dispatch  *dispatching // nil: hold bare leaderships

	mu    sync.Mutex
	held  int
	want  int
	ready bool
}

// hold competes for one role until ctx ends, then resigns it if held. Each
// acquisition waits for a slot, so a thousand roles do not start a thousand
// transactional producers at the same instant.
func (h *holding) hold(ctx context.Context, role coordination.Role, slots chan struct{}) {
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		l, err := coordination.AcquireLeadership(ctx, h.transport, role, h.member, h.options...)
		<-slots
		if err != nil {
			if ctx.Err() == nil {
				h.out.emit(ceiling.HolderEvent{Ev: ceiling.EventLost, Role: role.String(), Member: h.member.String(), Err: err.Error()})
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
			continue
		}
		lease := l.Lease()
		h.out.emit(ceiling.HolderEvent{Ev: ceiling.EventAcquired, Role: role.String(), Member: h.member.String(), Token: l.Token().String(), Deadline: lease.Deadline})
		stopDispatcher := func() {}
		if h.dispatch != nil {
			if stopDispatcher, err = h.dispatch.start(l); err != nil {
				h.out.emit(ceiling.HolderEvent{Ev: ceiling.EventError, Role: role.String(), Member: h.member.String(), Err: err.Error()})
			}
		}
		h.count(+1)
		select {
		case <-l.Done():
			stopDispatcher()
			h.count(-1)
			h.out.emit(ceiling.HolderEvent{Ev: ceiling.EventLost, Role: role.String(), Member: h.member.String(), Err: fmt.Sprint(l.Err())})
		case <-ctx.Done():
			stopDispatcher()
			rctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
			err := l.Resign(rctx)
			cancel()
			ev := ceiling.HolderEvent{Ev: ceiling.EventResigned, Role: role.String(), Member: h.member.String()}
			if err != nil {
				ev.Err = err.Error()
			}
			h.out.emit(ev)
			return
		}
	}
}

// count tracks how many roles are held and announces the first instant all
// of them are.
func (h *holding) count(delta int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held += delta
	if !h.ready && h.held == h.want {
		h.ready = true
		h.out.emit(ceiling.HolderEvent{Ev: ceiling.EventReady, Member: h.member.String()})
	}
}
