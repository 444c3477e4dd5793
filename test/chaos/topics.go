package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// createTopic creates a one-partition topic of a run with the durability
// settings of the command log (three replicas, min.insync.replicas 2), and
// waits until its partition has a leader and every replica is in sync, so
// that the first broker the run kills cannot lose it.
func createTopic(ctx context.Context, brokers []string, name string) error {
	const replication = 3
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequestTimeoutOverhead(DefaultRequestTimeout))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	isr := "2"
	resp, err := adm.CreateTopic(ctx, 1, replication, map[string]*string{"min.insync.replicas": &isr}, name)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	if resp.Err != nil {
		return fmt.Errorf("create topic %s: %w", name, resp.Err)
	}
	for {
		md, err := adm.Metadata(ctx, name)
		if err == nil {
			td, ok := md.Topics[name]
			ready := ok && td.Err == nil && len(td.Partitions) == 1
			for _, p := range td.Partitions {
				ready = ready && p.Leader >= 0 && len(p.ISR) == replication
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not ready: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
