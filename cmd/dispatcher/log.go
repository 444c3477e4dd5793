package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// LogOptions are the flags of `dispatcher log`.
type LogOptions struct {
	Cluster ClusterOptions
	Output  Output
	Verify  bool
	Follow  bool
	From    int64
	// Since and Until bound the records read by their time, as RFC 3339
	// or as a duration before now (1h); Limit bounds their number.
	Since string
	Until string
	Limit int

	Streams

	since, until time.Time

	// openReader reaches the log; the Kafka reader unless a test sets it.
	// It reaches the cluster first, within ctx.
	openReader func(ctx context.Context, o *LogOptions) (logReader, error)
	// connect reaches the coordination topic, to tell an empty log from a
	// role that does not exist; connectCluster unless a test sets it.
	connect func(ctx context.Context, o *ClusterOptions) (cluster, error)
}

// logReader is what `log` needs of the command log.
type logReader interface {
	ReadLog(ctx context.Context, partition coordination.TopicPartition) ([]dispatch.Entry, error)
	ReadRange(ctx context.Context, partition coordination.TopicPartition, rng dispatch.LogRange) ([]dispatch.Entry, error)
	FollowLog(ctx context.Context, partition coordination.TopicPartition, from int64) (*dispatch.LogStream, error)
	OffsetAt(ctx context.Context, partition coordination.TopicPartition, t time.Time) (int64, error)
	Bounds(ctx context.Context, partition coordination.TopicPartition) (start, end int64, err error)
}

// LogRecord is one entry of the command log as `log -o json` prints it.
type LogRecord struct {
	Offset int64     `json:"offset"`
	At     time.Time `json:"at"`
	Role   string    `json:"role"`
	Member string    `json:"member"`
	// Term is the term of the leadership that wrote the record, which
	// orders leaderships; 0 for a record written before terms.
	Term      coordination.Term `json:"term"`
	Token     string            `json:"token"`
	Kind      string            `json:"kind"`
	CommandID string            `json:"command_id,omitempty"`
	Device    string            `json:"device,omitempty"`
	Action    string            `json:"action,omitempty"`
	Status    string            `json:"status,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Detail    string            `json:"detail,omitempty"`
	Attempt   int               `json:"attempt,omitempty"`
	// Intake covers the request offsets [IntakeFrom, IntakeNext).
	IntakeFrom *int64 `json:"intake_from,omitempty"`
	IntakeNext *int64 `json:"intake_next,omitempty"`
	// Checkpoint is set on a checkpoint record.
	Checkpoint *LogCheckpoint `json:"checkpoint,omitempty"`
}

// LogCheckpoint is one part of a checkpoint; the last part also tells what
// the whole checkpoint holds, when every part of it was read.
type LogCheckpoint struct {
	Sequence int64 `json:"sequence"`
	// Part counts from 1 to Parts.
	Part  int `json:"part"`
	Parts int `json:"parts"`
	// Bytes is the size of this part's slice of the state.
	Bytes int `json:"bytes"`
	// State is set on the last part.
	State *LogCheckpointState `json:"state,omitempty"`
}

// LogCheckpointState sums up what a checkpoint holds.
type LogCheckpointState struct {
	// Pending and InDoubt count the commands held whole that are not
	// settled; Whole counts every command held whole.
	Pending int `json:"pending"`
	InDoubt int `json:"in_doubt"`
	Whole   int `json:"whole"`
	// CompactIDs counts the settled commands held as compact IDs; in a
	// delta, those added since its base.
	CompactIDs int `json:"compact_ids"`
	// Base is set on a delta: the full checkpoint it builds on.
	Base *LogCheckpointBase `json:"base,omitempty"`
	// IntakeTopic, IntakePartition and IntakeNext are where intake
	// resumes; the topic is empty when the log held no intake record.
	IntakeTopic     string `json:"intake_topic,omitempty"`
	IntakePartition int    `json:"intake_partition"`
	IntakeNext      int64  `json:"intake_next"`
	// Error is set when the parts do not decode.
	Error string `json:"error,omitempty"`
}

// LogCheckpointBase names the full checkpoint that a delta builds on: its
// sequence under its token, and the offsets of its first and last part.
type LogCheckpointBase struct {
	Sequence int64  `json:"sequence"`
	Token    string `json:"token"`
	First    int64  `json:"first"`
	Last     int64  `json:"last"`
}

// LogAudit is the verdict on a role's log: who led, what became of each
// command, and the violations Verify found.
type LogAudit struct {
	Role      string `json:"role"`
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Records   int    `json:"records"`
	// Range is the part of the partition read, absent when it was read
	// from its start: a range that starts later is verified without the
	// records before it (dispatch.VerifyFrom).
	Range       *LogRange       `json:"range,omitempty"`
	Leaderships []LogLeadership `json:"leaderships"`
	Commands    map[string]int  `json:"commands"`
	InDoubt     []string        `json:"in_doubt"`
	Pending     []string        `json:"pending"`
	Violations  []LogViolation  `json:"violations"`
	Clean       bool            `json:"clean"`
	Log         []LogRecord     `json:"log,omitempty"`
}

// LogRange is the part of the partition that `log --since/--until/--limit`
// read: the offsets from From up to, not including, Until.
type LogRange struct {
	From  int64 `json:"from"`
	Until int64 `json:"until"`
	// Limited reports that --limit ended the read before Until.
	Limited bool `json:"limited,omitempty"`
	// MidLog reports that the part starts after the log's start, so it was
	// verified without the records before it.
	MidLog bool `json:"mid_log"`
}

// LogLeadership is one run of records by one member.
type LogLeadership struct {
	Member string `json:"member"`
	// FirstTerm and LastTerm are the terms of the span's first and last
	// records: one term unless the member was elected again with no other
	// writer between.
	FirstTerm   coordination.Term `json:"first_term"`
	LastTerm    coordination.Term `json:"last_term"`
	FirstToken  string            `json:"first_token"`
	LastToken   string            `json:"last_token"`
	FirstOffset int64             `json:"first_offset"`
	LastOffset  int64             `json:"last_offset"`
	From        time.Time         `json:"from"`
	To          time.Time         `json:"to"`
	Records     int               `json:"records"`
}

// LogViolation is one broken invariant.
type LogViolation struct {
	Offset    int64  `json:"offset"`
	Kind      string `json:"kind"`
	CommandID string `json:"command_id,omitempty"`
	Message   string `json:"message"`
}

// NewLogCommand builds `dispatcher log`.
func NewLogCommand(streams Streams) *cobra.Command {
	o := &LogOptions{Output: OutputTable, Streams: streams}
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Replay and verify a role's command log: who led, what was issued under which term and token, and its outcome",
		Long: `log reads the role's partition of the command log (read_committed), prints
every record with the term and token it was written under, replays it (who
led when, each command's attempts and outcome) and verifies it: terms never go
backwards and each belongs to one member, tokens never go backwards within a
term, every outcome follows its Issued record, no command has two terminal
outcomes, intake positions are contiguous. It exits 4 when the log does not
verify, and 8 when it holds no record of the role and no member has ever
registered for it (a typo in --role or the config's role, most likely: roles
are case-sensitive).

--verify prints the verdict alone. --follow prints records as they commit,
until interrupted, and then the verdict; -o json then prints one object per
line, -o yaml one document per record. --from, the first offset to print,
goes with --follow only.

--since and --until read a part of the partition by the time its records
were written: an RFC 3339 time (2026-11-30T06:00:00Z) or a duration before
now (1h, 90m), mapped to offsets by Kafka (ListOffsets by timestamp), so a
long log is not read from its start. --limit N reads at most N records: the
first N from --since, or without --since the last N before --until (or the
end). A part that starts after the log's start is verified without what
came before it: outcomes of commands issued earlier are not violations.
--since also picks where --follow starts.`,
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
	o.Cluster.AddFlags(cmd.Flags())
	addOutputFlag(cmd, &o.Output)
	cmd.Flags().BoolVar(&o.Verify, "verify", false, "print the verdict only")
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "keep printing records as they commit, until interrupted")
	cmd.Flags().Int64Var(&o.From, "from", 0, "with --follow, the first offset to print")
	cmd.Flags().StringVar(&o.Since, "since", "", "read the records written at or after this time: RFC 3339, or a duration before now such as 1h")
	cmd.Flags().StringVar(&o.Until, "until", "", "read the records written before this time: RFC 3339, or a duration before now")
	cmd.Flags().IntVar(&o.Limit, "limit", 0, "read at most this many records (0: no limit)")
	return cmd
}

// Complete loads the configuration.
func (o *LogOptions) Complete() error {
	if o.openReader == nil {
		o.openReader = openKafkaLogReader
	}
	if o.connect == nil {
		o.connect = connectCluster
	}
	return o.Cluster.Complete()
}

// Validate checks the flags.
func (o *LogOptions) Validate() error {
	if err := o.Cluster.Validate(true); err != nil {
		return err
	}
	if o.Follow && o.Verify {
		return usageErrorf("--follow and --verify do not go together")
	}
	if o.From < 0 {
		return usageErrorf("--from %d: want an offset of 0 or more", o.From)
	}
	if o.From != 0 && !o.Follow {
		return usageErrorf("--from %d needs --follow: without it, log reads the whole partition or --since/--until", o.From)
	}
	if o.Limit < 0 {
		return usageErrorf("--limit %d: want 0 (no limit) or more", o.Limit)
	}
	if o.Follow && (o.Until != "" || o.Limit != 0) {
		return usageErrorf("--until and --limit do not go with --follow")
	}
	if o.Follow && o.Since != "" && o.From != 0 {
		return usageErrorf("give --since or --from, not both")
	}
	now := time.Now()
	var err error
	if o.since, err = parseWhen(o.Since, now); err != nil {
		return usageErrorf("--since %q: %v", o.Since, err)
	}
	if o.until, err = parseWhen(o.Until, now); err != nil {
		return usageErrorf("--until %q: %v", o.Until, err)
	}
	if !o.since.IsZero() && !o.until.IsZero() && !o.since.Before(o.until) {
		return usageErrorf("--since %s is not before --until %s", o.Since, o.Until)
	}
	return nil
}

// parseWhen reads a time given as RFC 3339 or as a duration before now; ""
// is the zero time.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("want a duration above 0, the time before now")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time such as 2026-11-30T06:00:00Z, or a duration such as 1h")
	}
	return t, nil
}

// ranged reports whether the flags ask for a part of the partition.
func (o *LogOptions) ranged() bool { return o.Since != "" || o.Until != "" || o.Limit != 0 }

// readRange reads the part of the partition the flags name.
func (o *LogOptions) readRange(ctx context.Context, reader logReader, tp coordination.TopicPartition) ([]dispatch.Entry, *LogRange, error) {
	start, end, err := reader.Bounds(ctx, tp)
	if err != nil {
		return nil, nil, err
	}
	rng := dispatch.LogRange{From: start, Until: end, Limit: o.Limit}
	if !o.since.IsZero() {
		if rng.From, err = reader.OffsetAt(ctx, tp, o.since); err != nil {
			return nil, nil, err
		}
	}
	if !o.until.IsZero() {
		if rng.Until, err = reader.OffsetAt(ctx, tp, o.until); err != nil {
			return nil, nil, err
		}
	}
	if o.since.IsZero() && o.Limit > 0 {
		// The last records before --until: offsets, so control records
		// make it at most Limit.
		rng.From = max(rng.Until-int64(o.Limit), start)
	}
	entries, err := reader.ReadRange(ctx, tp, rng)
	if err != nil {
		return nil, nil, err
	}
	info := &LogRange{From: rng.From, Until: rng.Until}
	if o.Limit > 0 && len(entries) == o.Limit {
		info.Limited = true
		info.Until = entries[len(entries)-1].Offset + 1
	}
	// A part from the log's start is audited as the whole log is.
	info.MidLog = rng.From > start
	return entries, info, nil
}

func openKafkaLogReader(ctx context.Context, o *LogOptions) (logReader, error) {
	if err := o.Cluster.reach(ctx); err != nil {
		return nil, err
	}
	opts, err := o.Cluster.clientOptions()
	if err != nil {
		return nil, err
	}
	r, err := dispatch.NewKafkaLogReader(o.Cluster.Config.Kafka.Brokers, opts...)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return r, nil
}

// partition is the role's partition of the log.
func (o *LogOptions) partition() (coordination.TopicPartition, error) {
	c := o.Cluster.Config
	p, err := coordination.RolePartition(o.Cluster.role(), c.Topics.Partitions)
	if err != nil {
		return coordination.TopicPartition{}, withCode(ExitUsage, err)
	}
	return coordination.TopicPartition{Topic: c.Topics.Log, Partition: p}, nil
}

// Run reads (or follows) the log and prints it.
func (o *LogOptions) Run(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, o.Cluster.Timeout)
	defer cancel()
	reader, err := o.openReader(octx, o)
	if err != nil {
		return err
	}
	tp, err := o.partition()
	if err != nil {
		return err
	}
	if o.Follow {
		return o.follow(ctx, reader, tp)
	}
	rctx, cancel := context.WithTimeout(ctx, o.Cluster.Timeout)
	defer cancel()
	var entries []dispatch.Entry
	var rng *LogRange
	if o.ranged() {
		entries, rng, err = o.readRange(rctx, reader, tp)
		if rng != nil {
			fmt.Fprintf(o.Err, "read %s-%d from offset %d to %d\n", tp.Topic, tp.Partition, rng.From, rng.Until)
		}
	} else {
		fmt.Fprintf(o.Err, "reading %s-%d\n", tp.Topic, tp.Partition)
		entries, err = reader.ReadLog(rctx, tp)
	}
	if err != nil {
		return unavailable(rctx, err)
	}
	if !slices.ContainsFunc(entries, func(e dispatch.Entry) bool { return e.Role == o.Cluster.Config.Role }) {
		if err := o.checkRole(rctx); err != nil {
			return err
		}
	}
	audit := buildAudit(o.Cluster.Config.Role, tp, entries)
	if rng != nil {
		audit = buildRangeAudit(o.Cluster.Config.Role, tp, entries, rng.MidLog)
		audit.Range = rng
	}
	if o.Output.Structured() {
		if !o.Verify {
			audit.Log = records(entries)
		}
		if err := o.Output.Write(o.Out, audit); err != nil {
			return err
		}
	} else {
		if !o.Verify {
			if err := recordsTable(entries).write(o.Out); err != nil {
				return err
			}
			fmt.Fprintln(o.Out)
		}
		writeAuditText(o, audit)
	}
	return auditResult(audit)
}

// checkRole returns an *UnknownRoleError when no member has ever registered
// for the role: a log without a record of the role is then a typo in the
// role, not a clean audit.
func (o *LogOptions) checkRole(ctx context.Context) error {
	cl, err := o.connect(ctx, &o.Cluster)
	if err != nil {
		return err
	}
	defer cl.Close()
	role := o.Cluster.role()
	ctp, err := rolePartition(o.Cluster.Config, role)
	if err != nil {
		return err
	}
	records, err := cl.ReadPartition(ctx, ctp)
	if err != nil {
		return unavailable(ctx, fmt.Errorf("read %s-%d: %w", ctp.Topic, ctp.Partition, err))
	}
	if holdsRole(records, role) {
		return nil
	}
	return unknownRole(ctx, cl, o.Cluster.Config, role, ctp, records)
}

// follow prints records as they commit, until ctx ends, then the verdict.
func (o *LogOptions) follow(ctx context.Context, reader logReader, tp coordination.TopicPartition) error {
	if !o.since.IsZero() {
		octx, cancel := context.WithTimeout(ctx, o.Cluster.Timeout)
		from, err := reader.OffsetAt(octx, tp, o.since)
		cancel()
		if err != nil {
			return unavailable(octx, err)
		}
		o.From = from
	}
	fmt.Fprintf(o.Err, "following %s-%d from offset %d; interrupt to stop\n", tp.Topic, tp.Partition, o.From)
	stream, err := reader.FollowLog(ctx, tp, o.From)
	if err != nil {
		return unavailable(ctx, err)
	}
	defer stream.Close()
	var entries []dispatch.Entry
	emit := o.Output.Stream(o.Out)
	if o.Output == OutputTable {
		fmt.Fprintln(o.Out, strings.Join(recordsHeader, "  "))
	}
	var cps checkpointParts
	for e := range stream.Entries() {
		entries = append(entries, e)
		r := cps.record(e)
		if o.Output.Structured() {
			if err := emit(r); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(o.Out, strings.Join(recordRow(r), "  "))
	}
	if err := stream.Err(); err != nil && ctx.Err() == nil {
		return withCode(ExitUnavailable, fmt.Errorf("the stream of %s-%d was lost: %w", tp.Topic, tp.Partition, err))
	}
	// Records before --from are not read: a start mid-log is verified so.
	audit := buildRangeAudit(o.Cluster.Config.Role, tp, entries, o.From > 0)
	if o.Output.Structured() {
		if err := emit(audit); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(o.Out)
		writeAuditText(o, audit)
	}
	return auditResult(audit)
}

func auditResult(a LogAudit) error {
	if !a.Clean {
		return withCode(ExitAuditFailed, fmt.Errorf("the log of role %s does not verify: %d violations", a.Role, len(a.Violations)))
	}
	return nil
}

// buildAudit replays and verifies the entries of one role's partition. It is
// a pure function of its arguments.
func buildAudit(role string, tp coordination.TopicPartition, entries []dispatch.Entry) LogAudit {
	return buildRangeAudit(role, tp, entries, false)
}

// buildRangeAudit is buildAudit of entries that start mid-log when midLog
// is set: they are verified with dispatch.VerifyFrom.
func buildRangeAudit(role string, tp coordination.TopicPartition, entries []dispatch.Entry, midLog bool) LogAudit {
	a := LogAudit{Role: role, Topic: tp.Topic, Partition: tp.Partition, Records: len(entries),
		Leaderships: []LogLeadership{}, Commands: map[string]int{}, InDoubt: []string{}, Pending: []string{}, Violations: []LogViolation{}}
	h := dispatch.Replay(entries)
	termAt := make(map[int64]coordination.Term, len(entries))
	for _, e := range entries {
		termAt[e.Offset] = e.Term
	}
	for _, s := range h.Leaderships {
		if s.Role != role {
			continue
		}
		a.Leaderships = append(a.Leaderships, LogLeadership{
			Member: s.Member, FirstTerm: termAt[s.FirstOffset], LastTerm: termAt[s.LastOffset],
			FirstToken: s.FirstToken.String(), LastToken: s.LastToken.String(),
			FirstOffset: s.FirstOffset, LastOffset: s.LastOffset, From: s.From, To: s.To, Records: s.Records,
		})
	}
	for _, c := range h.Commands {
		if c.Role != role {
			continue
		}
		a.Commands[c.Status.String()]++
		switch c.Status {
		case dispatch.StatusInDoubt:
			a.InDoubt = append(a.InDoubt, c.ID)
		case dispatch.StatusPending:
			a.Pending = append(a.Pending, c.ID)
		}
	}
	verify := dispatch.Verify
	if midLog {
		verify = dispatch.VerifyFrom
	}
	for _, v := range verify(entries) {
		if v.Role != role {
			continue
		}
		a.Violations = append(a.Violations, LogViolation{Offset: v.Offset, Kind: string(v.Kind), CommandID: v.CommandID, Message: v.Message})
	}
	a.Clean = len(a.Violations) == 0
	return a
}

func writeAuditText(o *LogOptions, a LogAudit) {
	fmt.Fprintf(o.Out, "role %s, %s-%d: %d records\n", a.Role, a.Topic, a.Partition, a.Records)
	fmt.Fprintln(o.Out, "leaderships:")
	for _, l := range a.Leaderships {
		terms := "term " + l.FirstTerm.String()
		if l.LastTerm != l.FirstTerm {
			terms = "terms " + l.FirstTerm.String() + " .. " + l.LastTerm.String()
		}
		fmt.Fprintf(o.Out, "  %-12s %s  tokens %s .. %s  offsets %d-%d  %s .. %s  (%d records)\n", l.Member, terms, l.FirstToken, l.LastToken,
			l.FirstOffset, l.LastOffset, l.From.UTC().Format(time.RFC3339), l.To.UTC().Format(time.RFC3339), l.Records)
	}
	statuses := make([]string, 0, len(a.Commands))
	for s, n := range a.Commands {
		statuses = append(statuses, fmt.Sprintf("%d %s", n, s))
	}
	sort.Strings(statuses)
	fmt.Fprintf(o.Out, "commands: %s\n", dash(strings.Join(statuses, ", ")))
	if len(a.InDoubt) > 0 {
		fmt.Fprintf(o.Out, "in doubt (resolve with `dispatcher resolve`): %s\n", strings.Join(a.InDoubt, ", "))
	}
	if len(a.Pending) > 0 {
		fmt.Fprintf(o.Out, "pending: %s\n", strings.Join(a.Pending, ", "))
	}
	if a.Clean {
		fmt.Fprintln(o.Out, "verify: clean")
		return
	}
	fmt.Fprintf(o.Out, "verify: %d VIOLATIONS\n", len(a.Violations))
	for _, v := range a.Violations {
		fmt.Fprintf(o.Out, "  offset %d: %s %s %s\n", v.Offset, v.Kind, v.CommandID, v.Message)
	}
}

func records(entries []dispatch.Entry) []LogRecord {
	out := make([]LogRecord, len(entries))
	var cps checkpointParts
	for i, e := range entries {
		out[i] = cps.record(e)
	}
	return out
}

// checkpointParts gathers the parts of the checkpoint being read, so that
// its last part can sum up the whole.
type checkpointParts struct {
	role  string
	token coordination.FencingToken
	parts []dispatch.CheckpointPart
}

// record flattens one entry, and sums up the checkpoint its last part ends.
func (c *checkpointParts) record(e dispatch.Entry) LogRecord {
	r := record(e)
	if e.Kind != dispatch.EntryCheckpoint || e.Checkpoint == nil {
		return r
	}
	p := *e.Checkpoint
	if p.Part == 0 || len(c.parts) == 0 || c.role != e.Role || c.token != e.Token || c.parts[0].Sequence != p.Sequence {
		c.role, c.token, c.parts = e.Role, e.Token, c.parts[:0]
	}
	c.parts = append(c.parts, p)
	if p.Part != p.Parts-1 {
		return r
	}
	if len(c.parts) != p.Parts {
		// The earlier parts were not read: a range that starts inside it.
		c.parts = c.parts[:0]
		return r
	}
	cp, err := dispatch.AssembleCheckpoint(e.Role, c.parts)
	c.parts = c.parts[:0]
	if err != nil {
		r.Checkpoint.State = &LogCheckpointState{Error: err.Error()}
		return r
	}
	st := &LogCheckpointState{Whole: len(cp.Commands), CompactIDs: len(cp.IDs),
		IntakeTopic: cp.IntakeTopic, IntakePartition: cp.IntakePartition, IntakeNext: cp.IntakeNext}
	if b := cp.Base; b != nil {
		st.Base = &LogCheckpointBase{Sequence: b.Sequence, Token: b.Token.String(), First: b.First, Last: b.Last}
	}
	for _, cmd := range cp.Commands {
		switch cmd.Status {
		case dispatch.StatusPending:
			st.Pending++
		case dispatch.StatusInDoubt:
			st.InDoubt++
		}
	}
	r.Checkpoint.State = st
	return r
}

// record flattens one entry.
func record(e dispatch.Entry) LogRecord {
	r := LogRecord{Offset: e.Offset, At: e.At.UTC(), Role: e.Role, Member: e.Member, Term: e.Term, Token: e.Token.String(), Kind: e.Kind.String(), CommandID: e.CommandID()}
	switch {
	case e.Issued != nil:
		c := e.Issued.Command
		r.Device, r.Action, r.Attempt = c.Device, c.Action, dispatch.FirstAttempt
	case e.Redispatched != nil:
		r.Attempt, r.Reason = e.Redispatched.Attempt, e.Redispatched.Reason.String()
	case e.Outcome != nil:
		r.Status, r.Reason, r.Detail, r.Attempt = e.Outcome.Status.String(), e.Outcome.Reason, e.Outcome.Result.Detail, e.Outcome.Attempt
	case e.Intake != nil:
		from, next := e.Intake.FromOffset, e.Intake.NextOffset
		r.IntakeFrom, r.IntakeNext = &from, &next
	case e.Checkpoint != nil:
		p := e.Checkpoint
		r.Checkpoint = &LogCheckpoint{Sequence: p.Sequence, Part: p.Part + 1, Parts: p.Parts, Bytes: len(p.Data)}
	}
	return r
}

// checkpointDetail is the one-line summary of a checkpoint record.
func checkpointDetail(c *LogCheckpoint) string {
	detail := fmt.Sprintf("checkpoint %d part %d/%d", c.Sequence, c.Part, c.Parts)
	switch st := c.State; {
	case st == nil:
	case st.Error != "":
		detail += ": does not decode: " + st.Error
	default:
		detail += fmt.Sprintf(": %d pending, %d in doubt, %d whole, %d compact IDs", st.Pending, st.InDoubt, st.Whole, st.CompactIDs)
		if b := st.Base; b != nil {
			detail += fmt.Sprintf(" added since checkpoint %d (%s) at offsets %d-%d", b.Sequence, b.Token, b.First, b.Last)
		}
		if st.IntakeTopic != "" {
			detail += fmt.Sprintf(", intake %s-%d@%d", st.IntakeTopic, st.IntakePartition, st.IntakeNext)
		}
	}
	return detail
}

var recordsHeader = []string{"OFFSET", "TIME", "MEMBER", "TERM", "TOKEN", "KIND", "COMMAND", "DETAIL"}

func recordRow(r LogRecord) []string {
	var detail string
	switch {
	case r.Device != "":
		detail = r.Device + " " + r.Action
	case r.Status != "":
		detail = r.Status
		if r.Reason != "" {
			detail += ": " + r.Reason
		} else if r.Detail != "" {
			detail += ": " + r.Detail
		}
	case r.IntakeNext != nil:
		detail = fmt.Sprintf("requests %d..%d", *r.IntakeFrom, *r.IntakeNext)
	case r.Checkpoint != nil:
		detail = checkpointDetail(r.Checkpoint)
	case r.Reason != "":
		detail = "attempt " + strconv.Itoa(r.Attempt) + ": " + r.Reason
	}
	term := "-"
	if r.Term != coordination.NoTerm {
		term = r.Term.String()
	}
	return []string{strconv.FormatInt(r.Offset, 10), r.At.Format("15:04:05.000"), r.Member, term, r.Token, r.Kind, dash(r.CommandID), detail}
}

func recordsTable(entries []dispatch.Entry) table {
	t := table{header: recordsHeader}
	var cps checkpointParts
	for _, e := range entries {
		t.rows = append(t.rows, recordRow(cps.record(e)))
	}
	return t
}
