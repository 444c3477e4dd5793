//go:build integration

package chaos

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestChaosTwoMinutes runs the chaos harness against the real cluster and
// Mosquitto: five `dispatcher run` processes of two roles sharing a log
// partition, each in a network namespace of its own, killed, paused,
// restarted, cut from Kafka or from their devices, with skewed clocks and
// slow devices; brokers killed or cut from the others one at a time; an
// operator resolving commands in doubt; then the checker.
// KRABKA_CHAOS_DURATION overrides the two minutes.
func TestChaosTwoMinutes(t *testing.T) {
	// The run kills and restarts brokers: no other test process may use the
	// cluster meanwhile.
	kafkatest.LockFaults(t)
	brokers := os.Getenv("KRABKA_KAFKA_BROKERS")
	script := os.Getenv("KRABKA_KAFKA_SCRIPT")
	mqttURL := os.Getenv("KRABKA_MQTT_URL")
	if brokers == "" || script == "" || mqttURL == "" {
		t.Fatal("KRABKA_KAFKA_BROKERS, KRABKA_KAFKA_SCRIPT and KRABKA_MQTT_URL must be set: source .run/kafka/env and .run/mosquitto/env")
	}
	duration := 2 * time.Minute
	if s := os.Getenv("KRABKA_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("KRABKA_CHAOS_DURATION: %v", err)
		}
		duration = d
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "dispatcher")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/dispatcher")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the dispatcher: %v\n%s", err, out)
	}
	addrs := strings.Split(brokers, ",")
	reader, err := coordination.NewKafkaTransport(coordination.DefaultLeaseConfig(), addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), duration+10*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{
		Brokers: addrs, KafkaScript: script, DispatcherBin: bin, MQTT: mqttURL, Dir: filepath.Join(dir, "run"),
		Duration: duration, Settle: 2 * time.Minute, Seed: seed, Members: 3, SecondRole: 2, Rate: 6,
		Lease: 4 * time.Second, Reader: reader, Out: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(Summary(res))
	if res.Accepted == 0 || res.FencedCalls == 0 || res.PlainCalls == 0 {
		t.Fatalf("the run exercised nothing: %d accepted, %d + %d device calls", res.Accepted, res.FencedCalls, res.PlainCalls)
	}
	for _, fault := range RequiredMemberFaults() {
		if res.Faults[fault] == 0 {
			t.Errorf("the run injected no %s", fault)
		}
	}
	if res.FreshnessChecked == 0 || res.Leases == 0 {
		t.Errorf("the freshness check judged %d calls against %d lease records", res.FreshnessChecked, res.Leases)
	}
	if !res.OK() {
		t.Fatalf("%d guarantees broke (seed %d)", len(res.Violations), seed)
	}
}

// testWriter sends the harness's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
