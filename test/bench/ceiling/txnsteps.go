package ceiling

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// StepsProbe describes a run of ProbeCommitSteps.
type StepsProbe struct {
	// Brokers are the bootstrap addresses; Topic is an existing topic with
	// at least as many partitions as Partitions names.
	Brokers []string
	Topic   string

	// TransactionalID names the producer; use a fresh one per probe.
	TransactionalID string

	// Partitions are the partitions of the transactions, one a
	// transaction in turn: one partition, or several to begin each
	// transaction on a partition that the one before did not touch.
	Partitions []int32

	// Pause is the wait after each commit, and Transactions how many are
	// timed, after three that warm the producer up.
	Pause        time.Duration
	Transactions int

	// Reader, when set, has a TailReader fetch the partitions throughout;
	// AfterRead, which needs it, begins each transaction after the reader
	// read the record of the one before, instead of after Pause.
	Reader, AfterRead bool

	// Settle has the producer settle each commit before its next
	// transaction, as the transport does (settle.go).
	Settle bool
}

// ProbeCommitSteps commits transactions of one small record each with the
// producer options of the transport, and times their two steps: the
// produce, from the begin to the record's acknowledgement, and the EndTxn.
// A produce that waits about the brokers' add.partitions.to.txn.retry.backoff.ms
// is one whose transaction the partition leader held at its first produce.
func ProbeCommitSteps(ctx context.Context, p StepsProbe) (CommitSteps, error) {
	if len(p.Partitions) == 0 || p.Transactions < 1 {
		return CommitSteps{}, errors.New("ceiling: a probe needs a partition and a transaction at least")
	}
	if p.AfterRead && !p.Reader {
		return CommitSteps{}, errors.New("ceiling: a probe that waits for its reader needs one")
	}
	opts, err := ProducerOptions(p.Brokers, p.TransactionalID, BenchLease)
	if err != nil {
		return CommitSteps{}, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return CommitSteps{}, err
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return CommitSteps{}, fmt.Errorf("init producer id: %w", err)
	}
	var reader *TailReader
	if p.Reader {
		if reader, err = StartTailReader(p.Brokers, p.Topic, p.Partitions...); err != nil {
			return CommitSteps{}, err
		}
		defer reader.Close()
	}
	// The producer's own transact times the steps, as it does for the
	// ceiling, from the first transaction after the warm-up.
	raw := &RawProducer{client: cl, topic: p.Topic}
	if p.Settle {
		raw.settle = &settler{client: cl, id: p.TransactionalID}
	}
	defer raw.settle.wait()
	const warm = 3
	for i := range warm + p.Transactions {
		r := &kgo.Record{Topic: p.Topic, Partition: p.Partitions[i%len(p.Partitions)], Value: []byte("probe")}
		if _, err := raw.transact(ctx, []*kgo.Record{r}); err != nil {
			return CommitSteps{}, err
		}
		if i == warm-1 {
			raw.KeepSteps()
		}
		if p.AfterRead {
			if err := reader.WaitRead(ctx, r.Partition, r.Offset); err != nil {
				return CommitSteps{}, fmt.Errorf("wait for the reader: %w", err)
			}
			continue
		}
		select {
		case <-time.After(p.Pause):
		case <-ctx.Done():
			return CommitSteps{}, ctx.Err()
		}
	}
	return raw.TakeSteps(), nil
}
