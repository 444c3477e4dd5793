package ceiling

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultRequestTimeout bounds every single request of the measurement
// clients to the cluster.
const DefaultRequestTimeout = 10 * time.Second

// TopicSpec describes a topic that a measurement creates for itself.
type TopicSpec struct {
	// Name is the topic name; use a fresh one per run.
	Name string

	// Partitions is the partition count.
	Partitions int32

	// Replication is the replication factor; the command log uses 3.
	Replication int16

	// MinInsyncReplicas feeds min.insync.replicas; the command log uses 2.
	MinInsyncReplicas int
}

// CreateTopic creates a topic with the durability settings of the command
// log and waits until every partition has a leader.
func CreateTopic(ctx context.Context, brokers []string, spec TopicSpec) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequestTimeoutOverhead(DefaultRequestTimeout))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	isr := fmt.Sprint(spec.MinInsyncReplicas)
	resp, err := adm.CreateTopic(ctx, spec.Partitions, spec.Replication, map[string]*string{"min.insync.replicas": &isr}, spec.Name)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", spec.Name, err)
	}
	if resp.Err != nil {
		return fmt.Errorf("create topic %s: %w", spec.Name, resp.Err)
	}
	for {
		md, err := adm.Metadata(ctx, spec.Name)
		if err == nil {
			td, ok := md.Topics[spec.Name]
			ready := ok && td.Err == nil && len(td.Partitions) == int(spec.Partitions)
			for _, p := range td.Partitions {
				ready = ready && p.Leader >= 0 && len(p.ISR) == int(spec.Replication)
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not ready: %w", spec.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// DeleteTopics deletes topics that a measurement created.
func DeleteTopics(ctx context.Context, brokers []string, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequestTimeoutOverhead(DefaultRequestTimeout))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err != nil {
		return err
	}
	return resp.Error()
}

// TxnProduce describes a run of raw transactional produce: the ceiling that
// the dispatcher's group commit is judged against.
type TxnProduce struct {
	// Brokers are the bootstrap addresses.
	Brokers []string

	// Topic and Partition receive the records; a role's log is one
	// partition, so the ceiling writes one partition too.
	Topic     string
	Partition int32

	// TransactionalID names the producer; use a fresh one per run.
	TransactionalID string

	// Batch is the number of commands per transaction.
	Batch int

	// RecordsPerCommand is the number of records each command writes; zero
	// means one. A dispatcher writes two for a command: Issued and Outcome.
	RecordsPerCommand int

	// Duration is how long batches are started; the last one completes.
	Duration time.Duration

	// Record builds the key and value of the i-th record; record i belongs
	// to command i / RecordsPerCommand. The run writes the same records the
	// dispatcher writes, so the caller passes the encoder.
	Record func(i int) (key, value []byte)
}

// MeasureTxnProduce runs transactions of Batch commands back to back for
// Duration and returns one latency per command: from the start of its
// transaction to the return of the commit, the instant a dispatcher could
// drive a device.
func MeasureTxnProduce(ctx context.Context, cfg TxnProduce) (Summary, error) {
	if cfg.Batch < 1 || cfg.Record == nil {
		return Summary{}, errors.New("measure: TxnProduce needs Batch >= 1 and Record")
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.TransactionTimeout(30*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(max(10_000, 2*cfg.Batch)),
		kgo.RequestTimeoutOverhead(DefaultRequestTimeout),
	)
	if err != nil {
		return Summary{}, err
	}
	defer cl.Close()
	// Mint the producer id before the clock starts, as a leader does once.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return Summary{}, fmt.Errorf("init producer id: %w", err)
	}

	perCommand := max(1, cfg.RecordsPerCommand)
	records := make([]*kgo.Record, cfg.Batch*perCommand)
	var samples []time.Duration
	n := 0
	start := time.Now()
	for time.Since(start) < cfg.Duration {
		for i := range records {
			key, value := cfg.Record(n)
			records[i] = &kgo.Record{Partition: cfg.Partition, Key: key, Value: value}
			n++
		}
		began := time.Now()
		if err := cl.BeginTransaction(); err != nil {
			return Summary{}, fmt.Errorf("begin transaction: %w", err)
		}
		if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
			_ = cl.EndTransaction(ctx, kgo.TryAbort)
			return Summary{}, fmt.Errorf("produce: %w", err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return Summary{}, fmt.Errorf("commit: %w", err)
		}
		took := time.Since(began)
		for range cfg.Batch {
			samples = append(samples, took)
		}
	}
	return Summarize(samples, time.Since(start)), nil
}
