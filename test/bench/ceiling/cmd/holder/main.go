// Command holder competes for one or more roles, one package member runtime
// per role, and reports, as JSON lines on standard output, when it takes and
// loses each one. The measurements of test/bench/ceiling run several of them
// to time a failover from outside the processes, and one with a dispatcher
// per role to measure what a role costs a process:
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
	"github.com/krabka-io/krabka-dispatch/member"
	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
	"github.com/twmb/franz-go/pkg/kgo"
)

// resignTimeout bounds the resignation of every role after SIGTERM.
const resignTimeout = 5 * time.Second

// campaignPause is the longest pause before a role is competed for again
// after a failed campaign.
const campaignPause = time.Second

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
	if ev.At == 0 {
		ev.At = time.Now().UnixNano()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(ev)
}

func run() error {
	brokers := flag.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "comma-separated bootstrap addresses (default $KRABKA_KAFKA_BROKERS)")
	memberName := flag.String("member", "", "member id")
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
	if *brokers == "" || *memberName == "" || *roleName == "" || *roles < 1 {
		return errors.New("-brokers, -member, -role and -roles >= 1 are required")
	}
	memberID, err := coordination.NewMemberID(*memberName)
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
	h := &holding{out: out, member: memberID, want: len(names)}
	var dispatching *dispatching
	if *logTopic != "" || *requestsTopic != "" {
		if dispatching, err = newDispatching(strings.Split(*brokers, ","), *logTopic, *requestsTopic, *partitions); err != nil {
			return err
		}
		defer dispatching.close()
	}
	slots := make(chan struct{}, max(1, *parallel))
	var members []*member.Member
	for _, name := range names {
		role, err := coordination.NewRole(name)
		if err != nil {
			return err
		}
		memberOptions := []member.Option{
			member.WithCoordination(options...),
			member.WithCampaignSlots(slots),
			member.WithCampaignBackoff(campaignPause/10, campaignPause),
			member.WithResignTimeout(resignTimeout),
			member.WithEventHandler(h.onEvent),
		}
		if dispatching != nil {
			withDispatcher, err := dispatching.option()
			if err != nil {
				return err
			}
			memberOptions = append(memberOptions, withDispatcher)
		}
		m, err := member.New(counted, role, memberID, memberOptions...)
		if err != nil {
			return err
		}
		members = append(members, m)
	}
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { _ = m.Run(ctx) }) // a member without a dispatcher returns nil
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
			out.emit(ceiling.HolderEvent{Ev: ceiling.EventOps, Member: *memberName, Ops: ops})
		case <-finished:
			return nil
		}
	}
}

// holding is the state shared by the members of one process, one per role.
type holding struct {
	out    *emitter
	member coordination.MemberID

	mu    sync.Mutex
	held  int
	want  int
	ready bool
}

// onEvent reports one member's event as a ceiling.HolderEvent.
func (h *holding) onEvent(e member.Event) {
	ev := ceiling.HolderEvent{Role: e.Role, Member: e.Member, At: e.At.UnixNano()}
	if e.Err != nil {
		ev.Err = e.Err.Error()
	}
	switch e.Kind {
	case member.EventElected:
		ev.Ev, ev.Token, ev.Deadline = ceiling.EventAcquired, e.Token.String(), e.Lease.Deadline
		h.out.emit(ev)
		h.count(+1)
	case member.EventDeposed:
		h.count(-1)
		ev.Ev = ceiling.EventLost
		h.out.emit(ev)
	case member.EventCampaignFailed:
		ev.Ev = ceiling.EventLost
		h.out.emit(ev)
	case member.EventResigned, member.EventAbandoned:
		ev.Ev = ceiling.EventResigned
		h.out.emit(ev)
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
