// Command kafkacluster prepares the local three-broker test cluster that
// scripts/services/10-kafka.sh starts, once every broker has logged that it
// started.
//
//	kafkacluster -brokers 127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094
//
// It waits until the cluster metadata lists every expected broker, creates the
// coordination topic with the configuration the fencing claims rest on
// (compacted, replication 3, min.insync.replicas 2), waits until every
// partition of it has a leader and a full in-sync replica set, and then warms
// the transaction and group coordinators. Kafka creates __transaction_state
// and __consumer_offsets on their first use, and that creation takes seconds;
// doing it here keeps that delay out of the first test that needs them.
//
// Every step is idempotent, so the script runs the command again on a cluster
// that is already up. The whole run is bounded by -timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// defaultTopic is the coordination topic of package coordination.
	defaultTopic = "__coordination_state"

	// defaultPartitions is coordination.DefaultPartitions.
	defaultPartitions = 16

	// warmTransactionalID is the transactional id the coordinator warm-up
	// initialises. No test uses it.
	warmTransactionalID = "krabka-cluster-warmup"

	// warmGroup is the group whose coordinator the warm-up looks up.
	warmGroup = "krabka-cluster-warmup"

	// pollInterval is the gap between two checks of the cluster state.
	pollInterval = 200 * time.Millisecond
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kafkacluster:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", "", "comma-separated bootstrap addresses")
	topic := flag.String("topic", defaultTopic, "the coordination topic to create")
	partitions := flag.Int("partitions", defaultPartitions, "partition count of the coordination topic")
	replication := flag.Int("replication", 3, "replication factor of the coordination topic, and the number of brokers to wait for")
	timeout := flag.Duration("timeout", 2*time.Minute, "bound on the whole run")
	flag.Parse()
	if *brokers == "" {
		return errors.New("-brokers is required")
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.RequestTimeoutOverhead(5*time.Second),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	if err := waitBrokers(ctx, adm, *replication); err != nil {
		return err
	}
	if err := createTopic(ctx, adm, *topic, *partitions, *replication); err != nil {
		return err
	}
	if err := waitTopic(ctx, adm, *topic, *partitions, *replication); err != nil {
		return err
	}
	if err := warmCoordinators(ctx, *brokers, adm); err != nil {
		return err
	}
	fmt.Printf("kafkacluster: %d brokers ready, %s has %d partitions with replication %d\n",
		*replication, *topic, *partitions, *replication)
	return nil
}

// waitBrokers polls the metadata until it lists n brokers.
func waitBrokers(ctx context.Context, adm *kadm.Client, n int) error {
	var last error
	for {
		m, err := adm.BrokerMetadata(ctx)
		switch {
		case err != nil:
			last = err
		case len(m.Brokers) >= n:
			return nil
		default:
			last = fmt.Errorf("metadata lists %d of %d brokers", len(m.Brokers), n)
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("wait for %d brokers: %w (last: %v)", n, err, last)
		}
	}
}

// createTopic creates the coordination topic, and accepts a topic that
// already exists.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions, replication int) error {
	configs := map[string]*string{
		"cleanup.policy":      kadm.StringPtr("compact"),
		"min.insync.replicas": kadm.StringPtr("2"),
	}
	var last error
	for {
		_, err := adm.CreateTopic(ctx, int32(partitions), int16(replication), configs, topic)
		switch {
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
			return nil
		case errors.Is(err, kerr.InvalidReplicationFactor), kerr.IsRetriable(err):
			// A broker that started has not yet registered with the
			// controller; try again.
			last = err
		default:
			if ctx.Err() == nil {
				return fmt.Errorf("create %s: %w", topic, err)
			}
			last = err
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("create %s: %w (last: %v)", topic, err, last)
		}
	}
}

// waitTopic polls the metadata until every partition of the topic has a
// leader and replication in-sync replicas.
func waitTopic(ctx context.Context, adm *kadm.Client, topic string, partitions, replication int) error {
	var last error
	for {
		last = topicReady(ctx, adm, topic, partitions, replication)
		if last == nil {
			return nil
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("wait for %s: %w (last: %v)", topic, err, last)
		}
	}
}

func topicReady(ctx context.Context, adm *kadm.Client, topic string, partitions, replication int) error {
	m, err := adm.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	td, ok := m.Topics[topic]
	if !ok {
		return fmt.Errorf("metadata has no topic %s", topic)
	}
	if td.Err != nil {
		return td.Err
	}
	if len(td.Partitions) != partitions {
		return fmt.Errorf("%s has %d partitions, want %d", topic, len(td.Partitions), partitions)
	}
	for _, p := range td.Partitions {
		if p.Err != nil {
			return fmt.Errorf("%s[%d]: %w", topic, p.Partition, p.Err)
		}
		if p.Leader < 0 || len(p.ISR) < replication {
			return fmt.Errorf("%s[%d]: leader %d, %d in sync", topic, p.Partition, p.Leader, len(p.ISR))
		}
	}
	return nil
}

// warmCoordinators makes Kafka create its transaction state topic and its
// group offsets topic, by initialising one transactional producer and by
// looking up one group coordinator.
func warmCoordinators(ctx context.Context, brokers string, adm *kadm.Client) error {
	var last error
	for {
		last = warmOnce(ctx, brokers, adm)
		if last == nil {
			return nil
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("warm the coordinators: %w (last: %v)", err, last)
		}
	}
}

func warmOnce(ctx context.Context, brokers string, adm *kadm.Client) error {
	txn, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.TransactionalID(warmTransactionalID),
	)
	if err != nil {
		return err
	}
	defer txn.Close()
	if _, _, err := txn.ProducerID(ctx); err != nil {
		return fmt.Errorf("init a transactional producer: %w", err)
	}
	for _, r := range adm.FindGroupCoordinators(ctx, warmGroup) {
		if r.Err != nil {
			return fmt.Errorf("find the group coordinator: %w", r.Err)
		}
	}
	return nil
}

// pause waits one poll interval, or returns the error of ctx.
func pause(ctx context.Context) error {
	t := time.NewTimer(pollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
