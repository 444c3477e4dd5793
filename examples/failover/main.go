// Command failover runs three members of one role in one program, against
// an in-process Kafka cluster (franz-go's kfake), and crashes the leader:
// a standby takes over once the lease runs out, in a term that follows the
// old one, and the commands sent meanwhile are dispatched by it. The term
// orders leaderships; the fencing token is what the broker enforces, and may
// rotate to a lower producer id within a term. It uses the public packages
// only, as a program of yours would: each node runs package member.
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
	"github.com/krabka-io/krabka-dispatch/member"
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

// node is one process of the role: a member of package member, which
// campaigns for the role and runs a dispatcher while it leads. That loop is
// what every member of your own runs.
type node struct {
	name      string
	transport *coordination.KafkaTransport
	member    *member.Member
	cancel    context.CancelFunc
	authority chan coordination.Authority // the authority of each leadership, once ready
}

// start builds the node's member and runs it until ctx ends or the node
// crashes.
func (n *node) start(ctx context.Context, wg *sync.WaitGroup, brokers []string, out io.Writer, lease coordination.LeaseConfig, elected chan<- *node) error {
	role, _ := coordination.NewRole("controller")
	id, _ := coordination.NewMemberID(n.name)
	registry := dispatch.NewRegistry()
	if err := registry.Register("valve-1", &printer{out: out, who: n.name}); err != nil {
		return err
	}
	logReader, err := dispatch.NewKafkaLogReader(brokers)
	if err != nil {
		return err
	}
	requests, err := dispatch.NewKafkaRequestSource(brokers)
	if err != nil {
		return err
	}
	n.member, err = member.New(n.transport, role, id,
		member.WithCoordination(coordination.WithLeaseConfig(lease), coordination.WithPollInterval(100*time.Millisecond)),
		member.WithDispatcher(registry, logReader, dispatch.WithRequestSource(requests), dispatch.WithSafetyMargin(500*time.Millisecond)),
		member.WithDrainTimeout(time.Second),
		member.WithResignTimeout(time.Second),
		member.WithEventHandler(func(e member.Event) {
			if e.Kind == member.EventReady {
				n.authority <- coordination.Authority{Term: e.Term, Token: e.Token}
				elected <- n
			}
		}))
	if err != nil {
		requests.Close()
		return err
	}
	ctx, n.cancel = context.WithCancel(ctx)
	wg.Go(func() {
		defer requests.Close()
		_ = n.member.Run(ctx) // returns when ctx ends: drained and resigned
	})
	return nil
}

// crash cuts the node's connections to Kafka and stops it: it can neither
// renew its lease nor resign, so the standbys wait for the lease to run out.
func (n *node) crash() {
	n.transport.Close()
	n.cancel()
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
	elected := make(chan *node, 4)
	var wg sync.WaitGroup
	var nodes []*node
	start := func(name string) error {
		t, err := coordination.NewKafkaTransport(lease, brokers...)
		if err != nil {
			return err
		}
		n := &node{name: name, transport: t, authority: make(chan coordination.Authority, 4)}
		nodes = append(nodes, n)
		return n.start(ctx, &wg, brokers, out, lease, elected)
	}
	defer func() {
		cancel()
		wg.Wait()
		for _, n := range nodes {
			n.transport.Close()
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
	firstAuthority := <-first.authority
	for _, name := range []string{"node-2", "node-3"} {
		if err := start(name); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s leads in %s\n", first.name, firstAuthority)
	for i := 1; i <= 2; i++ {
		if err := submit(ctx, first, fmt.Sprintf("cmd-%d", i), out); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "%s crashes: its connections to Kafka are cut\n", first.name)
	crashed := time.Now()
	first.crash()

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
	nextAuthority := <-next.authority
	fmt.Fprintf(out, "%s took over after %.1fs in %s (follows term %s: %t)\n",
		next.name, time.Since(crashed).Seconds(), nextAuthority, firstAuthority.Term, nextAuthority.Compare(firstAuthority) > 0)
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
func submit(ctx context.Context, n *node, id string, out io.Writer) error {
	d := n.member.Dispatcher()
	if d == nil {
		return errors.New(n.name + " does not lead")
	}
	outcome, err := d.Submit(ctx, dispatch.Command{ID: id, Device: "valve-1", Action: "open"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %s\n", id, outcome.Status)
	return nil
}

func waitFor(elected <-chan *node) (*node, error) {
	select {
	case m := <-elected:
		return m, nil
	case <-time.After(30 * time.Second):
		return nil, errors.New("no member was elected")
	}
}
