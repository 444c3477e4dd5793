package coordination_test

import (
	"reflect"
	"testing"
	"time"

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

// TestKafkaProducerOptions: the options a role's producer gets carry the
// transactional id, the lease as transaction timeout, acks=all and the
// caller's options, so a client built from them is that producer's twin.
func TestKafkaProducerOptions(t *testing.T) {
	lease, err := coordination.NewLeaseConfig(7*time.Second, 2*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := coordination.NewKafkaTransportWithClientOptions(lease, kgo.SeedBrokers("127.0.0.1:1"), kgo.ClientID("mine"))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	cl, err := kgo.NewClient(tr.ProducerOptions("role-a")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got, _ := cl.OptValue(kgo.TransactionalID).(string); got != "role-a" {
		t.Errorf("transactional id %q, want role-a", got)
	}
	if got, _ := cl.OptValue(kgo.TransactionTimeout).(time.Duration); got != 7*time.Second {
		t.Errorf("transaction timeout %v, want the lease duration 7s", got)
	}
	if got, _ := cl.OptValue(kgo.ClientID).(string); got != "mine" {
		t.Errorf("client id %q, want the caller's", got)
	}
	if got, _ := cl.OptValue(kgo.MetadataMinAge).(time.Duration); got != coordination.DefaultKafkaMetadataMinAge {
		t.Errorf("metadata min age %v, want %v", got, coordination.DefaultKafkaMetadataMinAge)
	}
	if got, _ := cl.OptValue(kgo.ConcurrentTransactionsBackoff).(time.Duration); got != coordination.DefaultKafkaConcurrentTransactionsBackoff {
		t.Errorf("CONCURRENT_TRANSACTIONS backoff %v, want %v", got, coordination.DefaultKafkaConcurrentTransactionsBackoff)
	}
	if got, _ := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); got != kgo.AllISRAcks() {
		t.Errorf("acks %v, want all", got)
	}
	if got := cl.OptValue(kgo.ProducerBatchCompression); !reflect.DeepEqual(got, []kgo.CompressionCodec{kgo.NoCompression()}) {
		t.Errorf("batch compression %v, want none", got)
	}

	// A caller's compression wins over the transport's default.
	lz4, err := coordination.NewKafkaTransportWithClientOptions(lease, kgo.SeedBrokers("127.0.0.1:1"), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	if err != nil {
		t.Fatal(err)
	}
	defer lz4.Close()
	cl2, err := kgo.NewClient(lz4.ProducerOptions("role-a")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if got := cl2.OptValue(kgo.ProducerBatchCompression); !reflect.DeepEqual(got, []kgo.CompressionCodec{kgo.Lz4Compression()}) {
		t.Errorf("batch compression %v with the caller's lz4, want lz4", got)
	}
}
