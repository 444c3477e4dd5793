// Command txnsteps times the two steps of a transaction on a Kafka cluster,
// its produce and its EndTxn, with the producer options of the dispatcher's
// transport, at several pauses after each commit, on one partition and
// moving across partitions. Every command of the dispatcher waits for two
// commits, so what a commit is made of on a cluster is what its latency is
// made of:
//
//	txnsteps -brokers 127.0.0.1:19092 -pauses 0,2ms,10ms,300ms,read -transactions 40
//
// It creates a topic of its own and deletes it, reads the brokers'
// add.partitions.to.txn.retry.backoff.ms, and writes a markdown table: for
// each pause, placement, and with and without a reader fetching the
// partitions meanwhile, the produce and the EndTxn at p50 and p99, and how
// many produces took that backoff or longer (a transaction that the
// partition leader held at its first produce and checked again after it).
// The pause "read" begins each transaction once the reader has read the
// record of the one before. With -settle the producer asks the coordinator
// after each commit until the commit is complete there, as the dispatcher's
// transport does, and begins the next transaction after that.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
)

// backoffSetting is the broker setting that a held transaction waits out.
const backoffSetting = "add.partitions.to.txn.retry.backoff.ms"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "txnsteps:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "comma-separated bootstrap addresses (default $KRABKA_KAFKA_BROKERS)")
	pauses := flag.String("pauses", "0,2ms,10ms,100ms,300ms,read", "comma-separated pauses after each commit; read: until a reader read the commit")
	transactions := flag.Int("transactions", 40, "timed transactions at each pause and placement")
	partitions := flag.Int("partitions", 3, "partitions of the probe's topic; \"moving\" begins each transaction on the next one")
	replication := flag.Int("replication", 3, "replication factor of the probe's topic (min.insync.replicas one less, at least 1)")
	settle := flag.Bool("settle", false, "ask the coordinator after each commit until it completed the commit, and begin the next transaction after that, as the transport does")
	flag.Parse()
	if *brokers == "" {
		return errors.New("no brokers: set -brokers or KRABKA_KAFKA_BROKERS")
	}
	if *partitions < 1 || *replication < 1 || *transactions < 1 {
		return errors.New("-partitions, -replication and -transactions must be at least 1")
	}
	type pause struct {
		name      string
		d         time.Duration
		afterRead bool
	}
	var ps []pause
	for _, s := range strings.Split(*pauses, ",") {
		switch s {
		case "0":
			ps = append(ps, pause{name: "0s"})
			continue
		case "read":
			ps = append(ps, pause{name: "until the reader read it", afterRead: true})
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("pause %q: want a duration of 0 or more, or read", s)
		}
		ps = append(ps, pause{name: d.String(), d: d})
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	addrs := strings.Split(*brokers, ",")

	backoff, err := ceiling.BrokerConfig(ctx, addrs, backoffSetting)
	if err != nil {
		return err
	}
	ms, err := strconv.Atoi(backoff)
	if err != nil {
		return fmt.Errorf("%s is %q: %w", backoffSetting, backoff, err)
	}
	held := time.Duration(ms) * time.Millisecond

	now := time.Now().UnixNano()
	topic := fmt.Sprintf("txnsteps-%d", now)
	spec := ceiling.TopicSpec{Name: topic, Partitions: int32(*partitions), Replication: int16(*replication), MinInsyncReplicas: max(1, *replication-1)}
	if err := ceiling.CreateTopic(ctx, addrs, spec); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), ceiling.DefaultRequestTimeout)
		defer cancel()
		if err := ceiling.DeleteTopics(dctx, addrs, topic); err != nil {
			fmt.Fprintf(os.Stderr, "txnsteps: delete topic %s: %v\n", topic, err)
		}
	}()
	all := make([]int32, *partitions)
	for i := range all {
		all[i] = int32(i)
	}

	fmt.Printf("The brokers' `%s` is %d ms. Each row: %d transactions of one record, after 3 untimed", backoffSetting, ms, *transactions)
	if *settle {
		fmt.Print("; each begun once the coordinator answered that the one before was complete (-settle), which its pause overlaps")
	}
	fmt.Print(".\n\n")
	fmt.Println("| Pause after each commit | Partitions | A reader fetches them | Produce p50 / p99 ms | EndTxn p50 / p99 ms | Produces of the backoff or longer |")
	fmt.Println("|---:|---|---|---|---|---:|")
	for i, pause := range ps {
		for _, place := range []struct {
			name  string
			parts []int32
		}{{"one", all[:1]}, {"moving", all}} {
			if place.name == "moving" && len(all) == 1 {
				continue
			}
			for _, reader := range []bool{false, true} {
				if pause.afterRead && !reader {
					continue
				}
				steps, err := ceiling.ProbeCommitSteps(ctx, ceiling.StepsProbe{
					Brokers: addrs, Topic: topic, TransactionalID: fmt.Sprintf("%s-%s-%d-%t", topic, place.name, i, reader),
					Partitions: place.parts, Pause: pause.d, AfterRead: pause.afterRead, Transactions: *transactions, Reader: reader, Settle: *settle,
				})
				if err != nil {
					return fmt.Errorf("pause %s, %s partition, reader %t: %w", pause.name, place.name, reader, err)
				}
				fmt.Printf("| %s | %s | %s | %s / %s | %s / %s | %d of %d |\n", pause.name, place.name, yesNo(reader),
					ceiling.Millis(steps.Produce.P50), ceiling.Millis(steps.Produce.P99),
					ceiling.Millis(steps.End.P50), ceiling.Millis(steps.End.P99),
					steps.Produce.AtLeast(held), steps.Produce.Count)
			}
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
