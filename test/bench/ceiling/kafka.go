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

// adminClient returns a client for the package's administrative requests,
// each bounded by DefaultRequestTimeout.
func adminClient(brokers []string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequestTimeoutOverhead(DefaultRequestTimeout))
}

// CreateTopic creates a topic with the durability settings of the command
// log and waits until every partition has a leader.
func CreateTopic(ctx context.Context, brokers []string, spec TopicSpec) error {
	cl, err := adminClient(brokers)
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
	cl, err := adminClient(brokers)
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

// BrokerConfig returns the value of a broker setting as the first broker
// of the cluster's list reports it: its default when nothing set it.
func BrokerConfig(ctx context.Context, brokers []string, name string) (string, error) {
	cl, err := adminClient(brokers)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, DefaultRequestTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	bs, err := adm.ListBrokers(ctx)
	if err != nil {
		return "", fmt.Errorf("list the brokers: %w", err)
	}
	if len(bs) == 0 {
		return "", errors.New("the cluster lists no broker")
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, bs[0].NodeID)
	if err != nil {
		return "", fmt.Errorf("describe the broker's configuration: %w", err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return "", fmt.Errorf("describe the configuration of broker %s: %w", rc.Name, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == name {
				return c.MaybeValue(), nil
			}
		}
	}
	return "", fmt.Errorf("the brokers report no setting %s", name)
}
