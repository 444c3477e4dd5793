// Command failover runs three members of one role in one program, against
// an in-process Kafka cluster (franz-go's kfake), and crashes the leader:
// a standby takes over once the lease runs out, in a term that follows the
// old one, and the commands sent meanwhile are dispatched by it. The term
// orders leaderships; the fencing token is what the broker enforces, and may
// rotate to a lower producer id within a term. It uses the public packages only, as a program of yours would.
//
//	go run ./examples/failover
//
// kfake does not fence like a real Kafka cluster; run the same code against
// a real one to rely on the fencing.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

// printer is a device that prints what it is told, with the term and the
// token: it implements dispatch.AuthorityDevice to receive the term.
type printer struct {
	mu  sync.Mutex
	out io.Writer
	who string
}

func (p *printer) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	return p.DispatchUnder(ctx, cmd, coordination.Authority{Term: coordination.NoTerm, Token: token})
}

func (p *printer) DispatchUnder(_ context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "  %s drives %s: %s %s (%s)\n", p.who, cmd.Device, cmd.ID, cmd.Action, authority)
	return dispatch.Result{Detail: "printed"}, nil
}

// member is one process of the role.
type member struct {
	name      string
	transport *coordination.KafkaTransport
	mu        sync.Mutex
	leader    *dispatch.Dispatcher
	authority coordination.Authority
}

// lead competes for the role until ctx ends; while it leads, it runs a
// dispatcher. This loop is what every member of your own runs.
func (m *member) lead(ctx context.Context, brokers []string, out io.Writer, elected chan<- *member) {
	role, _ := coordination.NewRole("controller")
	id, _ := coordination.NewMemberID(m.name)
	for ctx.Err() == nil {
		l, err := coordination.AcquireLeadership(ctx, m.transport, role, id,
			coordination.WithLeaseDuration(2*time.Second),
			coordination.WithRenewInterval(500*time.Millisecond),
			coordination.WithChallengeStagger(500*time.Millisecond),
			coordination.WithPollInterval(100*time.Millisecond))
		if err != nil {
			return // ctx ended, or the transport was closed
		}
		registry := dispatch.NewRegistry()
		_ = registry.Register("valve-1", &printer{out: out, who: m.name})
		logReader, _ := dispatch.NewKafkaLogReader(brokers)
		requests, _ := dispatch.NewKafkaRequestSource(brokers)
		d, err := dispatch.NewDispatcher(l, registry, logReader, dispatch.WithRequestSource(requests), dispatch.WithSafetyMargin(500*time.Millisecond))
		if err != nil {
			requests.Close()
			return
		}
		m.mu.Lock()
		m.leader, m.authority = d, l.Authority()
		m.mu.Unlock()
		elected <- m
		_ = d.Run(ctx) // returns when the leadership or ctx ends
		requests.Close()
		m.mu.Lock()
		m.leader = nil
		m.mu.Unlock()
		if ctx.Err() != nil {
			_ = l.Resign(context.Background())
		}
	}
}

func run(ctx context.Context, out io.Writer) error {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(16, coordination.StateTopic, dispatch.DefaultLogTopic, dispatch.DefaultRequestsTopic))
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	lease, _ := coordination.NewLeaseConfig(2*time.Second, 500*time.Millisecond, 500*time.Millisecond)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	elected := make(chan *member, 4)
	var wg sync.WaitGroup
	var members []*member
	start := func(name string) error {
		t, err := coordination.NewKafkaTransport(lease, brokers...)
		if err != nil {
			return err
		}
		m := &member{name: name, transport: t}
		members = append(members, m)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.lead(ctx, brokers, out, elected)
		}()
		return nil
	}
	defer func() {
		cancel()
		wg.Wait()
		for _, m := range members {
			m.transport.Close()
		}
	}()

	// node-1 registers first and leads; the others queue behind it in
	// registration order.
	if err := start("node-1"); err != nil {
		return err
	}
	first, err := waitFor(elected)
	if err != nil {
		return err
	}
	for _, name := range []string{"node-2", "node-3"} {
		if err := start(name); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s leads in %s\n", first.name, first.authority)
	for i := 1; i <= 2; i++ {
		if err := submit(ctx, first, fmt.Sprintf("cmd-%d", i), out); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "%s crashes: its connections to Kafka are cut\n", first.name)
	crashed := time.Now()
	first.transport.Close()

	// Meanwhile a client writes to the requests topic; the next leader
	// takes the command in.
	client, err := dispatch.NewClient(brokers)
	if err != nil {
		return err
	}
	defer client.Close()
	now := time.Now()
	if err := client.Submit(ctx, dispatch.Command{ID: "cmd-3", Role: "controller", Device: "valve-1", Action: "close", SubmittedAt: now, Deadline: now.Add(time.Minute)}); err != nil {
		return err
	}
	next, err := waitFor(elected)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s took over after %.1fs in %s (follows term %s: %t)\n",
		next.name, time.Since(crashed).Seconds(), next.authority, first.authority.Term, next.authority.Compare(first.authority) > 0)
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	outcome, err := client.Wait(wctx, "controller", "cmd-3")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "cmd-3 (sent during the failover): %s\n", outcome.Status)
	return nil
}

// submit hands a command to the leader's dispatcher and waits for it.
func submit(ctx context.Context, m *member, id string, out io.Writer) error {
	m.mu.Lock()
	d := m.leader
	m.mu.Unlock()
	if d == nil {
		return errors.New(m.name + " does not lead")
	}
	outcome, err := d.Submit(ctx, dispatch.Command{ID: id, Device: "valve-1", Action: "open"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %s\n", id, outcome.Status)
	return nil
}

func waitFor(elected <-chan *member) (*member, error) {
	select {
	case m := <-elected:
		return m, nil
	case <-time.After(30 * time.Second):
		return nil, errors.New("no member was elected")
	}
}
