package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of the topics command: the settings the guarantees rest on.
const (
	// DefaultReplicationFactor is the replication factor of the three
	// topics: a command is durable when two of three replicas hold it.
	DefaultReplicationFactor = 3

	// DefaultMinInsyncReplicas is min.insync.replicas of the three topics:
	// with acks=all a write commits only when this many replicas hold it.
	DefaultMinInsyncReplicas = 2

	// DefaultLogRetention is retention.ms of the command log: forever (-1),
	// because the log is the audit record.
	DefaultLogRetention = time.Duration(-1)

	// DefaultRequestsRetention is retention.ms of the requests topic: a week.
	// Intake commits its position in the log, so old requests are not read
	// again.
	DefaultRequestsRetention = 7 * 24 * time.Hour
)

// TopicsOptions are the flags of `dispatcher topics`.
type TopicsOptions struct {
	Cluster           ClusterOptions
	Output            Output
	Check             bool
	ReplicationFactor int
	MinInsync         int
	LogRetention      time.Duration
	RequestsRetention time.Duration

	Streams
}

// TopicReport is what `topics` found or did for one topic.
type TopicReport struct {
	Topic             string   `json:"topic"`
	Purpose           string   `json:"purpose"`
	State             string   `json:"state"` // created, ok, misconfigured, missing
	Partitions        int      `json:"partitions"`
	ReplicationFactor int      `json:"replication_factor"`
	Configs           []string `json:"configs"`
	Problems          []string `json:"problems,omitempty"`
}

// The states of a TopicReport.
const (
	topicCreated       = "created"
	topicOK            = "ok"
	topicMisconfigured = "misconfigured"
	topicMissing       = "missing"
)

// NewTopicsCommand builds `dispatcher topics`.
func NewTopicsCommand(streams Streams) *cobra.Command {
	o := &TopicsOptions{Output: OutputTable, Streams: streams}
	cmd := &cobra.Command{
		Use:   "topics",
		Short: "Create the coordination, log and requests topics, or report what is wrong with them",
		Long: `topics creates the three topics the dispatcher needs, with the settings its
guarantees rest on, and checks those that exist:

  coordination (__coordination_state)  cleanup.policy=compact, segment.ms=1 hour
  log (dispatch.log)                   cleanup.policy=delete, retention.ms=-1 (the audit record)
  requests (dispatch.requests)         cleanup.policy=delete, retention.ms=7 days

all with replication factor 3 and min.insync.replicas=2, and with the partition
counts of the configuration (the count picks a role's partition, so every
member must agree on it). An existing topic is never altered: its problems are
reported and the command exits 6. --check creates nothing.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.Cluster.addFlags(cmd.Flags(), DefaultTopicsTimeout)
	addOutputFlag(cmd, &o.Output)
	cmd.Flags().BoolVar(&o.Check, "check", false, "report only; create nothing")
	cmd.Flags().IntVar(&o.ReplicationFactor, "replication-factor", DefaultReplicationFactor, "replication factor of new topics, and the least accepted of existing ones")
	cmd.Flags().IntVar(&o.MinInsync, "min-insync-replicas", DefaultMinInsyncReplicas, "min.insync.replicas of new topics, and the least accepted of existing ones")
	cmd.Flags().DurationVar(&o.LogRetention, "log-retention", DefaultLogRetention, "retention of the command log (-1ns: forever)")
	cmd.Flags().DurationVar(&o.RequestsRetention, "requests-retention", DefaultRequestsRetention, "retention of the requests topic")
	return cmd
}

// Complete loads the configuration.
func (o *TopicsOptions) Complete() error { return o.Cluster.Complete() }

// Validate checks the flags.
func (o *TopicsOptions) Validate() error {
	if err := o.Cluster.Validate(false); err != nil {
		return err
	}
	if o.ReplicationFactor < 1 || o.ReplicationFactor > 32767 {
		return usageErrorf("--replication-factor %d: want 1 or more", o.ReplicationFactor)
	}
	if o.MinInsync < 1 || o.MinInsync > o.ReplicationFactor {
		return usageErrorf("--min-insync-replicas %d: want 1 to the replication factor %d", o.MinInsync, o.ReplicationFactor)
	}
	if o.RequestsRetention <= 0 {
		return usageErrorf("--requests-retention %v: want a duration above 0", o.RequestsRetention)
	}
	return nil
}

// topicSpec is what one topic must look like.
type topicSpec struct {
	name       string
	purpose    string
	partitions int
	configs    map[string]string
}

// coordinationSegmentMillis is the segment.ms of the coordination topic:
// an hour. Compaction never cleans the active segment, and a member that
// starts reads its coordination partition from the start, so with Kafka's
// default of seven days it would read up to a week of every lease renewal
// of every role on the partition before it can campaign; with an hour, at
// most an hour of them beside one record of each key.
const coordinationSegmentMillis = "3600000"

func (o *TopicsOptions) specs() []topicSpec {
	t := o.Cluster.Config.Topics
	isr := strconv.Itoa(o.MinInsync)
	return []topicSpec{
		{name: t.Coordination, purpose: "coordination", partitions: t.CoordinationPartitions, configs: map[string]string{
			"cleanup.policy": "compact", "min.insync.replicas": isr, "segment.ms": coordinationSegmentMillis,
		}},
		{name: t.Log, purpose: "log", partitions: t.Partitions, configs: map[string]string{
			"cleanup.policy": "delete", "min.insync.replicas": isr, "retention.ms": retentionMillis(o.LogRetention),
		}},
		{name: t.Requests, purpose: "requests", partitions: t.Partitions, configs: map[string]string{
			"cleanup.policy": "delete", "min.insync.replicas": isr, "retention.ms": retentionMillis(o.RequestsRetention),
		}},
	}
}

func retentionMillis(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// Run checks and creates the topics, and prints the report.
func (o *TopicsOptions) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.Cluster.Timeout)
	defer cancel()
	if err := o.Cluster.reach(ctx); err != nil {
		return err
	}
	opts, err := o.Cluster.clientOptions()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	specs := o.specs()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	fmt.Fprintf(o.Err, "checking topics %s\n", strings.Join(names, ", "))
	grace := time.Duration(0)
	if o.Check {
		// Only a check reports a missing topic; creating one that exists
		// already is harmless.
		grace = missingGrace
	}
	details, err := listTopics(ctx, adm, names, grace)
	if err != nil {
		return unavailable(ctx, err)
	}
	reports := make([]TopicReport, 0, len(specs))
	for _, s := range specs {
		r, err := o.reconcile(ctx, adm, s, details[s.name])
		if err != nil {
			return err
		}
		reports = append(reports, r)
	}
	if err := o.print(reports); err != nil {
		return err
	}
	for _, r := range reports {
		if r.State == topicMisconfigured || r.State == topicMissing {
			return withCode(ExitMisconfigured, errors.New("some topics break the dispatcher's guarantees: see the report"))
		}
	}
	return nil
}

// reconcile creates one topic, or checks the one that exists.
func (o *TopicsOptions) reconcile(ctx context.Context, adm *kadm.Client, s topicSpec, d kadm.TopicDetail) (TopicReport, error) {
	r := TopicReport{Topic: s.name, Purpose: s.purpose, Configs: formatConfigs(s.configs)}
	exists := d.Err == nil && len(d.Partitions) > 0
	if d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return r, unavailable(ctx, fmt.Errorf("describe topic %s: %w", s.name, d.Err))
	}
	if !exists {
		if o.Check {
			r.State = topicMissing
			r.Problems = []string{"does not exist"}
			return r, nil
		}
		fmt.Fprintf(o.Err, "creating %s (%d partitions, replication factor %d)\n", s.name, s.partitions, o.ReplicationFactor)
		configs := make(map[string]*string, len(s.configs))
		for k, v := range s.configs {
			configs[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, int32(s.partitions), int16(o.ReplicationFactor), configs, s.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			if errors.Is(err, kerr.InvalidReplicationFactor) {
				return r, withCode(ExitMisconfigured, fmt.Errorf("create topic %s: %w (the cluster has fewer brokers than --replication-factor %d)", s.name, err, o.ReplicationFactor))
			}
			return r, unavailable(ctx, fmt.Errorf("create topic %s: %w", s.name, err))
		}
		if err := waitTopicReady(ctx, adm, s.name, s.partitions); err != nil {
			return r, unavailable(ctx, err)
		}
		r.State = topicCreated
		r.Partitions = s.partitions
		r.ReplicationFactor = o.ReplicationFactor
		return r, nil
	}
	r.Partitions = len(d.Partitions)
	r.ReplicationFactor = d.Partitions.NumReplicas()
	if r.Partitions != s.partitions {
		r.Problems = append(r.Problems, fmt.Sprintf("%d partitions, the configuration says %d: members would pick different partitions for a role", r.Partitions, s.partitions))
	}
	if r.ReplicationFactor < o.ReplicationFactor {
		r.Problems = append(r.Problems, fmt.Sprintf("replication factor %d, want %d", r.ReplicationFactor, o.ReplicationFactor))
	}
	cfg, err := describeTopicConfigs(ctx, adm, s.name)
	if err != nil {
		return r, unavailable(ctx, err)
	}
	have := make(map[string]string, len(cfg.Configs))
	for _, c := range cfg.Configs {
		have[c.Key] = c.MaybeValue()
	}
	r.Problems = append(r.Problems, checkConfigs(s, have, o.MinInsync, r.ReplicationFactor)...)
	r.State = topicOK
	if len(r.Problems) > 0 {
		r.State = topicMisconfigured
	}
	return r, nil
}

// missingGrace is how long a topic that a broker does not show is asked
// about again before it counts as missing: a broker learns of a topic that
// the controller created a moment after another broker did, so a topic that
// one process just created may not show yet to the next. A broker that has
// just restarted replays the cluster's metadata first, which on a loaded
// machine has taken more than three seconds; only a topic that is really
// missing pays the whole grace.
const missingGrace = 10 * time.Second

// listTopics describes the topics, asking again for up to grace while any of
// them is unknown to the broker that answered.
func listTopics(ctx context.Context, adm *kadm.Client, names []string, grace time.Duration) (kadm.TopicDetails, error) {
	until := time.Now().Add(grace)
	for {
		details, err := adm.ListTopics(ctx, names...)
		if err != nil {
			return nil, err
		}
		missing := false
		for _, name := range names {
			if d := details[name]; d.Err != nil || len(d.Partitions) == 0 {
				missing = true
			}
		}
		if !missing || time.Now().After(until) {
			return details, nil
		}
		select {
		case <-ctx.Done():
			return details, nil
		case <-time.After(topicPoll):
		}
	}
}

// topicPoll is the gap between two looks at a topic that a broker does not
// know yet: the controller has the topic, and each broker learns of it a
// moment later.
const topicPoll = 100 * time.Millisecond

// waitTopicReady waits until the metadata shows every partition of a new
// topic with a leader, so the topic is usable when topics returns.
func waitTopicReady(ctx context.Context, adm *kadm.Client, name string, partitions int) error {
	for {
		details, err := adm.ListTopics(ctx, name)
		if err == nil {
			d := details[name]
			ready := d.Err == nil && len(d.Partitions) == partitions
			for _, p := range d.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s was created, and not every partition had a leader before the timeout: %w", name, ctx.Err())
		case <-time.After(topicPoll):
		}
	}
}

// describeTopicConfigs reads the settings of a topic that the metadata
// shows. The broker that answers may not know the topic yet when it is
// young, so an unknown topic is asked about again until ctx ends.
func describeTopicConfigs(ctx context.Context, adm *kadm.Client, name string) (kadm.ResourceConfig, error) {
	for {
		rc, err := adm.DescribeTopicConfigs(ctx, name)
		var cfg kadm.ResourceConfig
		if err == nil {
			cfg, err = rc.On(name, nil)
		}
		if err == nil {
			err = cfg.Err
		}
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return cfg, fmt.Errorf("describe configs of %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return cfg, fmt.Errorf("describe configs of %s: %w", name, err)
		case <-time.After(topicPoll):
		}
	}
}

// checkConfigs compares an existing topic's settings with what its purpose
// needs, and returns one sentence per problem.
func checkConfigs(s topicSpec, have map[string]string, minInsync, replicas int) []string {
	var problems []string
	policy := have["cleanup.policy"]
	switch s.purpose {
	case "coordination":
		if !strings.Contains(policy, "compact") {
			problems = append(problems, fmt.Sprintf("cleanup.policy=%s, want compact", policy))
		} else if strings.Contains(policy, "delete") {
			problems = append(problems, fmt.Sprintf("cleanup.policy=%s: delete would drop registrations and leases", policy))
		}
	default:
		if policy != "delete" {
			problems = append(problems, fmt.Sprintf("cleanup.policy=%s, want delete", policy))
		}
	}
	if v, ok := have["min.insync.replicas"]; ok {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("min.insync.replicas=%q is not a number", v))
		case n < minInsync:
			problems = append(problems, fmt.Sprintf("min.insync.replicas=%d, want %d: a write would commit on fewer replicas", n, minInsync))
		case n > replicas:
			problems = append(problems, fmt.Sprintf("min.insync.replicas=%d is above the replication factor %d: every write fails", n, replicas))
		}
	} else {
		problems = append(problems, "min.insync.replicas is not reported")
	}
	if want, ok := s.configs["retention.ms"]; ok && s.purpose == "log" {
		got := have["retention.ms"]
		if !retentionAtLeast(got, want) {
			problems = append(problems, fmt.Sprintf("retention.ms=%s, want %s: the audit record would be deleted", got, want))
		}
	}
	return problems
}

// retentionAtLeast reports whether the retention got keeps data at least as
// long as want (-1 is forever).
func retentionAtLeast(got, want string) bool {
	g, err1 := strconv.ParseInt(got, 10, 64)
	w, err2 := strconv.ParseInt(want, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	if g < 0 {
		return true
	}
	return w >= 0 && g >= w
}

func formatConfigs(m map[string]string) []string {
	keys := []string{"cleanup.policy", "min.insync.replicas", "retention.ms"}
	out := make([]string, 0, len(m))
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

func (o *TopicsOptions) print(reports []TopicReport) error {
	if o.Output.Structured() {
		return o.Output.Write(o.Out, reports)
	}
	return topicsTable(reports).write(o.Out)
}

// topicsTable renders the reports for people.
func topicsTable(reports []TopicReport) table {
	t := table{header: []string{"TOPIC", "PURPOSE", "STATE", "PARTITIONS", "REPLICAS", "PROBLEMS"}}
	for _, r := range reports {
		problems := strings.Join(r.Problems, "; ")
		if problems == "" {
			problems = "-"
		}
		t.rows = append(t.rows, []string{r.Topic, r.Purpose, r.State, strconv.Itoa(r.Partitions), strconv.Itoa(r.ReplicationFactor), problems})
	}
	return t
}
