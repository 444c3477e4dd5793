package coordination_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// TestNewKafkaTransportChecks: the constructors reject what the transport
// must own or cannot work without, before they reach any broker, and accept
// the rest without a broker to talk to.
func TestNewKafkaTransportChecks(t *testing.T) {
	lease := coordination.DefaultLeaseConfig()
	seed := kgo.SeedBrokers("127.0.0.1:1")
	for _, c := range []struct {
		name string
		new  func() (*coordination.KafkaTransport, error)
	}{
		{"no brokers", func() (*coordination.KafkaTransport, error) { return coordination.NewKafkaTransport(lease) }},
		{"zero lease", func() (*coordination.KafkaTransport, error) {
			return coordination.NewKafkaTransport(coordination.LeaseConfig{}, "127.0.0.1:1")
		}},
		{"transactional id", func() (*coordination.KafkaTransport, error) {
			return coordination.NewKafkaTransportWithClientOptions(lease, seed, kgo.TransactionalID("mine"))
		}},
		{"consumer group", func() (*coordination.KafkaTransport, error) {
			return coordination.NewKafkaTransportWithClientOptions(lease, seed, kgo.ConsumerGroup("mine"))
		}},
		{"consumed topics", func() (*coordination.KafkaTransport, error) {
			return coordination.NewKafkaTransportWithClientOptions(lease, seed, kgo.ConsumeTopics("mine"))
		}},
		{"consumed partitions", func() (*coordination.KafkaTransport, error) {
			return coordination.NewKafkaTransportWithClientOptions(lease, seed,
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"mine": {0: kgo.NewOffset()}}))
		}},
	} {
		tr, err := c.new()
		if err == nil {
			tr.Close()
			t.Errorf("%s: accepted", c.name)
		}
	}

	tr, err := coordination.NewKafkaTransportWithClientOptions(lease, seed, kgo.ClientID("krabka-test"))
	if err != nil {
		t.Fatalf("options a caller may set: %v", err)
	}
	tr.Close()
	tr.Close()
}
