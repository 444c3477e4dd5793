//go:build integration

package ceiling

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// TestFailoverTrialsOnTheCluster runs two crash and two graceful trials of
// cmd/holder processes against the real cluster and checks that each one
// is timed against a successor and, for a crash, a bound from the log.
func TestFailoverTrialsOnTheCluster(t *testing.T) {
	brokers := os.Getenv("KRABKA_KAFKA_BROKERS")
	if brokers == "" {
		t.Fatal("KRABKA_KAFKA_BROKERS must be set: source .run/kafka/env after scripts/services/10-kafka.sh start")
	}
	bin := filepath.Join(t.TempDir(), "holder")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/holder").CombinedOutput(); err != nil {
		t.Fatalf("build the holder: %v\n%s", err, out)
	}
	addrs := strings.Split(brokers, ",")
	reader, err := coordination.NewKafkaTransport(coordination.DefaultLeaseConfig(), addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	for _, graceful := range []bool{false, true} {
		t.Run(fmt.Sprintf("graceful=%t", graceful), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			trials, err := RunFailover(ctx, Failover{
				HolderBin: bin, Brokers: addrs, Role: fmt.Sprintf("measure-test-%d-%t", time.Now().UnixNano(), graceful),
				Members: 3, Trials: 2, Graceful: graceful,
				Lease: 2 * time.Second, Renew: 500 * time.Millisecond, Stagger: 500 * time.Millisecond, Poll: 100 * time.Millisecond,
				Reader: reader, Seed: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(trials) != 2 {
				t.Fatalf("%d trials, want 2", len(trials))
			}
			for i, tr := range trials {
				t.Logf("trial %d: %+v", i+1, tr)
				if tr.From == tr.To || tr.Measured <= 0 {
					t.Errorf("trial %d: %s -> %s in %v", i+1, tr.From, tr.To, tr.Measured)
				}
				if !graceful && (tr.Bound <= 0 || tr.Bound > 2*time.Second+time.Second) {
					t.Errorf("trial %d: bound %v outside (0, lease + stagger + poll]", i+1, tr.Bound)
				}
			}
		})
	}
}
