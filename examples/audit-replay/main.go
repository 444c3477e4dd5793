// Command audit-replay reads a role's command log and tells, from the log
// alone, who led when and in which term, what each leader issued under which
// term and token, and what became of every command; then it verifies the
// log's invariants. The term orders leaderships; the token is what the broker
// enforced on each record, and may rotate to a lower producer id within one
// term.
//
//	go run ./examples/audit-replay                       # on a log it makes itself (kfake)
//	go run ./examples/audit-replay -brokers host:9092 -role controller
//
// Without -brokers it starts an in-process cluster, lets a leader record
// three commands (one succeeds, one its device refuses, one leaves its
// device in doubt) and replays that log.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

func main() {
	brokers := flag.String("brokers", "", "seed brokers, comma-separated (default: make a log on an in-process cluster)")
	role := flag.String("role", "controller", "role whose log to replay")
	topic := flag.String("topic", dispatch.DefaultLogTopic, "command log topic")
	partitions := flag.Int("partitions", dispatch.DefaultTopicPartitions, "partition count of the log topic")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	var clean bool
	if *brokers == "" {
		clean, err = demo(ctx, os.Stdout)
	} else {
		clean, err = replay(ctx, os.Stdout, strings.Split(*brokers, ","), *role, *topic, *partitions)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "audit-replay:", err)
		os.Exit(1)
	}
	if !clean {
		os.Exit(4)
	}
}

// replay reads the role's partition, replays and verifies it, and reports
// whether the log is clean.
func replay(ctx context.Context, out io.Writer, brokers []string, role, topic string, partitions int) (bool, error) {
	r, err := coordination.NewRole(role)
	if err != nil {
		return false, err
	}
	p, err := coordination.RolePartition(r, partitions)
	if err != nil {
		return false, err
	}
	reader, err := dispatch.NewKafkaLogReader(brokers)
	if err != nil {
		return false, err
	}
	entries, err := reader.ReadLog(ctx, coordination.TopicPartition{Topic: topic, Partition: p})
	if err != nil {
		return false, err
	}
	fmt.Fprintf(out, "%d records in %s-%d\n", len(entries), topic, p)

	// Every record carries the term of the leadership that wrote it.
	termAt := make(map[int64]coordination.Term, len(entries))
	for _, e := range entries {
		termAt[e.Offset] = e.Term
	}
	h := dispatch.Replay(entries)
	fmt.Fprintln(out, "who led:")
	for _, s := range h.Leaderships {
		if s.Role == role {
			fmt.Fprintf(out, "  %s, term %s, tokens %s to %s, offsets %d-%d\n", s.Member, termAt[s.FirstOffset], s.FirstToken, s.LastToken, s.FirstOffset, s.LastOffset)
		}
	}
	fmt.Fprintln(out, "what happened to each command:")
	for _, c := range h.Commands {
		if c.Role != role {
			continue
		}
		cmd := c.Command()
		fmt.Fprintf(out, "  %s (%s %s): %s\n", c.ID, cmd.Device, cmd.Action, c.Status)
		for _, a := range c.Attempts {
			fmt.Fprintf(out, "    attempt %d issued by %s in term %s under token %s at offset %d\n", a.Number, a.Member, termAt[a.Offset], a.Token, a.Offset)
		}
		if o, ok := c.Outcome(); ok && o.Reason != "" {
			fmt.Fprintf(out, "    reason: %s\n", o.Reason)
		}
	}
	violations := dispatch.Verify(entries)
	if len(violations) == 0 {
		fmt.Fprintln(out, "verify: clean")
		return true, nil
	}
	for _, v := range violations {
		fmt.Fprintf(out, "verify: %s\n", v)
	}
	return false, nil
}

// stuck is a device whose write is lost on the way back: it may have acted.
type stuck struct{}

func (stuck) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{}, errors.New("no answer from the unit")
}

// refuser is a device that refuses every command without acting.
type refuser struct{}

func (refuser) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{}, dispatch.Rejected(errors.New("the heater is locked out"))
}

// ok is a device that acts.
type ok struct{}

func (ok) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{Detail: "done"}, nil
}

// demo makes a small log on an in-process cluster and replays it.
func demo(ctx context.Context, out io.Writer) (bool, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(int32(dispatch.DefaultTopicPartitions), coordination.StateTopic, dispatch.DefaultLogTopic))
	if err != nil {
		return false, err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	lease, _ := coordination.NewLeaseConfig(3*time.Second, time.Second, time.Second)
	transport, err := coordination.NewKafkaTransport(lease, brokers...)
	if err != nil {
		return false, err
	}
	defer transport.Close()
	role, _ := coordination.NewRole("controller")
	member, _ := coordination.NewMemberID("node-1")
	l, err := coordination.AcquireLeadership(ctx, transport, role, member, coordination.WithLeaseConfig(lease))
	if err != nil {
		return false, err
	}
	registry := dispatch.NewRegistry()
	_ = registry.Register("valve-1", ok{})
	_ = registry.Register("pump-1", stuck{})
	_ = registry.Register("heater-9", refuser{})
	reader, _ := dispatch.NewKafkaLogReader(brokers)
	d, err := dispatch.NewDispatcher(l, registry, reader, dispatch.WithSafetyMargin(500*time.Millisecond))
	if err != nil {
		return false, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	for _, c := range []dispatch.Command{
		{ID: "cmd-1", Device: "valve-1", Action: "open"},
		{ID: "cmd-2", Device: "heater-9", Action: "on"},
		{ID: "cmd-3", Device: "pump-1", Action: "start"},
	} {
		if _, err := d.Submit(ctx, c); err != nil {
			stop()
			<-done
			return false, err
		}
	}
	stop()
	<-done
	_ = l.Resign(ctx)
	return replay(ctx, out, brokers, "controller", dispatch.DefaultLogTopic, dispatch.DefaultTopicPartitions)
}
