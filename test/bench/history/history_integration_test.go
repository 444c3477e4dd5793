//go:build integration

package history

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunAtSmallSizes runs the whole measurement on the real cluster at
// sizes 0 and 500, with 200 further commands, from a dispatcher binary
// built from the repository, and checks that every figure was taken: the
// fill wrote the role's and the other role's commands to the shared
// partition, the leader started and accepted a command (twice, the second
// time after a graceful stop), the standby took
// over after SIGKILL and answered /leaderz within two seconds of the
// bound of taking the lease, the lookups found their
// commands, and the section names each figure.
func TestRunAtSmallSizes(t *testing.T) {
	brokers, mqttURL := os.Getenv("KRABKA_KAFKA_BROKERS"), os.Getenv("KRABKA_MQTT_URL")
	if brokers == "" || mqttURL == "" {
		t.Fatal("KRABKA_KAFKA_BROKERS and KRABKA_MQTT_URL must be set: source .run/kafka/env and .run/mosquitto/env")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "dispatcher")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dispatcher")
	build.Dir = filepath.Join("..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	cfg := Config{Brokers: strings.Split(brokers, ","), MQTTURL: mqttURL, Binary: bin, Dir: dir,
		Sizes: []int{0, 500}, Further: 200, Samples: 2, Settle: -1, WarmUp: 100, Progress: &progress}
	rows, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(rows) != 2 || rows[0].Size != 0 || rows[1].Size != 500 {
		t.Fatalf("rows %+v; want those of 0 and 500, the warm-up's dropped", rows)
	}
	if !strings.Contains(progress.String(), "warm-up of the cluster: done") || !strings.Contains(progress.String(), "size 100: fill 100 commands") {
		t.Errorf("no warm-up pass of 100 commands ran:\n%s", progress.String())
	}
	for _, r := range rows {
		if r.LeaderzReady <= 0 || r.ColdStart < r.LeaderzReady || r.FailoverLeaderz <= 0 || r.Failover < r.FailoverLeaderz || r.RSSReady <= 0 || r.Failover <= 0 || r.SubmitWait <= 0 || r.StatusCLI <= 0 || r.RSSAfter <= 0 {
			t.Errorf("size %d: a figure is missing: %+v", r.Size, r)
		}
		if r.FailoverLeaderz > r.FailoverBound+2*time.Second {
			t.Errorf("size %d: failover %s, bound %s", r.Size, r.Failover, r.FailoverBound)
		}
	}
	// The fillers drained, and each cold start stopped gracefully: every
	// recovery at 500 started from a checkpoint near the end, by the
	// member's own log.
	if r := rows[1]; r.CheckpointBelow < 0 || r.CheckpointBelow >= r.LogRecords {
		t.Errorf("the recoveries at 500 commands started %d offsets below the end of %d, want from a checkpoint in the log\n%s", r.CheckpointBelow, r.LogRecords, progress.String())
	}
	// Each command leaves an Issued and an Outcome record, for both roles.
	if got := rows[1].LogRecords; got < 4*500 {
		t.Errorf("the partition holds %d records after filling 500 commands of each of two roles", got)
	}
	var md bytes.Buffer
	if err := Markdown(&md, rows, cfg, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| Figure | 0 commands | 500 commands |", "| Cold start to `/leaderz` 200 |", "| Failover after SIGKILL, to a command carried out |", "| `submit --wait` |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the section lacks %q:\n%s", want, md.String())
		}
	}
}
