package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestTopicsCreatesThenChecks(t *testing.T) {
	_, brokers := newFakeCluster(t)
	ctx := context.Background()

	code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers, "-o", "json")
	if code != int(ExitOK) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var reports []TopicReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(reports) != 3 {
		t.Fatalf("%d reports", len(reports))
	}
	for _, r := range reports {
		if r.State != topicCreated {
			t.Errorf("%s: state %s, want created", r.Topic, r.State)
		}
	}
	if !strings.Contains(errOut, "creating dispatch.log") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
	// The coordination topic rolls its segments hourly, so that compaction
	// keeps what a starting member reads small.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	configs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, "__coordination_state")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On("__coordination_state", nil)
	if err != nil {
		t.Fatal(err)
	}
	segment := ""
	for _, c := range rc.Configs {
		if c.Key == "segment.ms" && c.Value != nil {
			segment = *c.Value
		}
	}
	if segment != "3600000" {
		t.Errorf("the coordination topic has segment.ms=%q, want 3600000", segment)
	}

	// The topics exist now with the right settings: a second run finds them ok.
	code, out, errOut = runCLI(t, ctx, "topics", "--brokers", brokers, "--check")
	if code != int(ExitOK) {
		t.Fatalf("second run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, topic := range []string{"__coordination_state", "dispatch.log", "dispatch.requests"} {
		if !strings.Contains(out, topic) {
			t.Errorf("table lacks %s:\n%s", topic, out)
		}
	}
	if strings.Contains(out, topicMisconfigured) {
		t.Errorf("a created topic is misconfigured:\n%s", out)
	}
}

func TestTopicsReportsMisconfiguredAndMissing(t *testing.T) {
	_, brokers := newFakeCluster(t)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	del := "delete"
	isr := "1"
	// A coordination topic with the delete policy, 4 partitions, min ISR 1.
	if _, err := adm.CreateTopic(ctx, 4, 3, map[string]*string{"cleanup.policy": &del, "min.insync.replicas": &isr}, "__coordination_state"); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers, "--check", "-o", "json")
	if code != int(ExitMisconfigured) {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, ExitMisconfigured, out, errOut)
	}
	var reports []TopicReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatal(err)
	}
	byTopic := map[string]TopicReport{}
	for _, r := range reports {
		byTopic[r.Topic] = r
	}
	coord := byTopic["__coordination_state"]
	if coord.State != topicMisconfigured {
		t.Fatalf("coordination state %s", coord.State)
	}
	problems := strings.Join(coord.Problems, "\n")
	for _, want := range []string{"cleanup.policy=delete, want compact", "4 partitions", "min.insync.replicas=1"} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems lack %q:\n%s", want, problems)
		}
	}
	if byTopic["dispatch.log"].State != topicMissing {
		t.Errorf("log state %s, want missing", byTopic["dispatch.log"].State)
	}
}

func TestCheckConfigs(t *testing.T) {
	log := topicSpec{name: "dispatch.log", purpose: "log", configs: map[string]string{"retention.ms": "-1"}}
	got := checkConfigs(log, map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "3", "retention.ms": "604800000"}, 2, 2)
	want := []string{"cleanup.policy=compact, want delete", "above the replication factor", "the audit record would be deleted"}
	if len(got) != len(want) {
		t.Fatalf("problems = %q", got)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("problem %d = %q, want it to say %q", i, got[i], want[i])
		}
	}
	if p := checkConfigs(log, map[string]string{"cleanup.policy": "delete", "min.insync.replicas": "2", "retention.ms": "-1"}, 2, 3); len(p) != 0 {
		t.Errorf("a good log topic has problems %q", p)
	}
}
