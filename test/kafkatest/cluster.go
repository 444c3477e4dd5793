package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Timeouts of the helpers. Each bounds one helper call on the real cluster.
const (
	// adminTimeout bounds one topic creation, deletion or metadata wait.
	adminTimeout = 60 * time.Second

	// restartTimeout bounds a broker restart, the script's wait for the
	// started line included.
	restartTimeout = 150 * time.Second

	// pollInterval is the gap between two checks of the cluster state.
	pollInterval = 100 * time.Millisecond
)

// Brokers returns the bootstrap addresses of the real cluster from
// KRABKA_KAFKA_BROKERS. It fails the test when the variable is unset: run
// `bash scripts/services/10-kafka.sh start` and source .run/kafka/env.
//
// It also takes the cluster's fault lock shared until the end of the test,
// so no test of another process kills a broker under it; see [LockFaults].
func Brokers(t testing.TB) []string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(EnvBrokers))
	if v == "" {
		t.Fatalf("kafkatest: %s is not set; start the cluster with `bash scripts/services/10-kafka.sh start` and `. .run/kafka/env`", EnvBrokers)
	}
	lockShared(t)
	return strings.Split(v, ",")
}

// UniqueName returns prefix, a sanitised test name and a random suffix, for a
// topic, a role or a transactional id that no other test and no earlier run
// on the same cluster uses. The result is a legal topic name.
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("kafkatest: random suffix: %v", err)
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > 150 {
		name = name[:150]
	}
	return prefix + "." + name + "." + hex.EncodeToString(b[:])
}

// Admin returns an admin client of the brokers, closed at the end of the
// test.
func Admin(t testing.TB, brokers []string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: admin client: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// CreateTopic creates a topic with replication [ReplicationFactor] and
// min.insync.replicas 2 on the real cluster, plus configs (which may override
// min.insync.replicas), and waits until every partition has a leader and a
// full set of in-sync replicas. It deletes the topic at the end of the test.
func CreateTopic(t testing.TB, brokers []string, name string, partitions int, configs map[string]string) {
	t.Helper()
	createTopic(t, brokers, name, partitions, ReplicationFactor, configs)
}

func createTopic(t testing.TB, brokers []string, name string, partitions, replication int, configs map[string]string) {
	t.Helper()
	adm := Admin(t, brokers)
	cfg := map[string]*string{}
	if replication > 1 {
		cfg["min.insync.replicas"] = kadm.StringPtr("2")
	}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, int32(partitions), int16(replication), cfg, name); err != nil {
		t.Fatalf("kafkatest: create topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		// A deletion that fails leaves a topic with a unique name behind,
		// which hurts no other test.
		_, _ = adm.DeleteTopic(ctx, name)
	})
	if err := waitInSync(ctx, adm, replication, name); err != nil {
		t.Fatalf("kafkatest: topic %s: %v", name, err)
	}
}

// WaitInSync waits until every partition of the topics has a leader and all
// [ReplicationFactor] replicas in sync. A test calls it after
// [RestartBroker] when it needs the cluster whole again.
func WaitInSync(t testing.TB, brokers []string, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := waitInSync(ctx, Admin(t, brokers), ReplicationFactor, topics...); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
}

func waitInSync(ctx context.Context, adm *kadm.Client, replication int, topics ...string) error {
	var last error
	for {
		last = inSync(ctx, adm, replication, topics)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %v in sync: %w (last: %v)", topics, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

func inSync(ctx context.Context, adm *kadm.Client, replication int, topics []string) error {
	m, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return err
	}
	for _, topic := range topics {
		td, ok := m.Topics[topic]
		switch {
		case !ok:
			return fmt.Errorf("no metadata for %s", topic)
		case td.Err != nil:
			return fmt.Errorf("%s: %w", topic, td.Err)
		case len(td.Partitions) == 0:
			return fmt.Errorf("%s has no partitions yet", topic)
		}
		for _, p := range td.Partitions {
			if p.Err != nil && !errors.Is(p.Err, kerr.ReplicaNotAvailable) {
				return fmt.Errorf("%s[%d]: %w", topic, p.Partition, p.Err)
			}
			if p.Leader < 0 || len(p.ISR) < replication {
				return fmt.Errorf("%s[%d]: leader %d, in sync %v", topic, p.Partition, p.Leader, p.ISR)
			}
		}
	}
	return nil
}

// KillBroker kills broker n (1 to [NumBrokers]) of the real cluster with
// SIGKILL, as a crash would, and returns when the process is gone. The test
// must hold the fault lock ([LockFaults]) and restart the broker with
// [RestartBroker], typically in a t.Cleanup, so the tests after it find three
// brokers.
func KillBroker(t testing.TB, n int) {
	t.Helper()
	runScript(t, 30*time.Second, "kill-broker", n)
}

// RestartBroker starts broker n of the real cluster again on its data, after
// a SIGKILL if it still runs, and returns when it logged that it started. The
// broker then catches up in the background; call [WaitInSync] to wait for
// it.
func RestartBroker(t testing.TB, n int) {
	t.Helper()
	runScript(t, restartTimeout, "restart-broker", n)
}

func runScript(t testing.TB, timeout time.Duration, command string, n int) {
	t.Helper()
	if n < 1 || n > NumBrokers {
		t.Fatalf("kafkatest: broker %d is not in 1..%d", n, NumBrokers)
	}
	script := os.Getenv(EnvScript)
	if script == "" {
		t.Fatalf("kafkatest: %s is not set; start the cluster with `bash scripts/services/10-kafka.sh start` and `. .run/kafka/env`", EnvScript)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", script, command, strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("kafkatest: %s %d: %v\n%s", command, n, err, out)
	}
}

// BrokerAddr returns the address of broker n of the real cluster.
func BrokerAddr(n int) string {
	return "127.0.0.1:" + strconv.Itoa(19091+n)
}
