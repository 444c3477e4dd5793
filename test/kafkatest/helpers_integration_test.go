//go:build integration

package kafkatest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

func client(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// describe returns the producer id and epoch that the coordinator holds for
// a transactional id.
func describe(t *testing.T, brokers []string, id string) kafkatest.ProducerIDEpoch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	described, err := kadm.NewClient(client(t, brokers)).DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d, err := described.On(id, nil)
	if err == nil {
		err = d.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	return kafkatest.ProducerIDEpoch{ProducerID: d.ProducerID, Epoch: d.ProducerEpoch}
}
