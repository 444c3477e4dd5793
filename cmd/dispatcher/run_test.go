package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// writeConfig writes a member's configuration for the cluster at brokers
// and the MQTT broker at mqttURL, with short lease timings.
func writeConfig(t *testing.T, brokers, member, mqttURL string, extra string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "role: controller\nmember: %s\n", member)
	fmt.Fprintf(&b, "kafka:\n  brokers: [%s]\n", brokers)
	b.WriteString("lease:\n  duration: 3s\n  renew_interval: 1s\n  challenge_stagger: 500ms\n  poll_interval: 100ms\n")
	b.WriteString("http:\n  listen: 127.0.0.1:0\n  token: s3cret\n")
	b.WriteString("dispatch:\n  safety_margin: 500ms\n  shutdown_timeout: 2s\n")
	key := filepath.Join(t.TempDir(), "valve-1.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "devices:\n  - name: valve-1\n    type: mqtt\n    mqtt:\n      brokers: [%s]\n      topic: devices/{device}/cmd\n      keys: [{id: k1, key_file: %s}]\n", mqttURL, key)
	b.WriteString(extra)
	path := filepath.Join(t.TempDir(), member+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startRun runs `dispatcher run` in the test and returns its HTTP address
// and a stop function that returns Run's error.
func startRun(t *testing.T, cfgPath string) (string, *lockedBuffer, func() error) {
	t.Helper()
	var out bytes.Buffer
	logs := &lockedBuffer{}
	addr := make(chan string, 1)
	o := &RunOptions{ConfigFile: cfgPath, LogFormat: "text", LogLevel: "info",
		Streams: Streams{Out: &out, Err: logs}, serving: func(a string) { addr <- a }}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	var a string
	select {
	case a = <-addr:
	case err := <-done:
		cancel()
		t.Fatalf("run ended at once: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("run did not serve HTTP")
	}
	stopped := false
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return a, logs, stop
}

// lockedBuffer serialises the logger's writes and the test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitHTTP polls url until it answers want, or fails the test.
func waitHTTP(t *testing.T, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer %d in time (last: %v)", url, want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRunSubmitLogResolveOnFakeCluster(t *testing.T) {
	_, brokers := newFakeCluster(t)
	broker := mqtttest.StartInProcess(t, "127.0.0.1:0")
	ctx := context.Background()
	if code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers); code != 0 {
		t.Fatalf("topics: %d\n%s%s", code, out, errOut)
	}
	var received lockedBuffer
	broker.Subscribe(t, "devices/+/cmd", func(topic string, payload []byte) { _, _ = received.Write([]byte(topic + "\n")) })

	cfg := writeConfig(t, brokers, "node-1", broker.URL(), "")
	addr, logs, stop := startRun(t, cfg)
	base := "http://" + addr
	waitHTTP(t, base+"/leaderz", http.StatusOK)
	waitHTTP(t, base+"/readyz", http.StatusOK)

	// Through the HTTP API: the token is required.
	code, out, errOut := runCLI(t, ctx, "submit", "--url", base, "--device", "valve-1", "--action", "open", "--id", "c-http", "--wait", "--timeout", "20s")
	if code == 0 || !strings.Contains(errOut, "401") {
		t.Fatalf("a submission without the token: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, ctx, "submit", "--url", base, "--token", "s3cret", "--device", "valve-1", "--action", "open", "--id", "c-http", "--wait", "--timeout", "20s", "-o", "json")
	if code != 0 {
		t.Fatalf("submit over HTTP: exit %d\n%s\n%s\n%s", code, out, errOut, logs)
	}
	var res SubmitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.State != "succeeded" {
		t.Fatalf("%v: %s", err, out)
	}

	// Through the requests topic.
	code, out, errOut = runCLI(t, ctx, "submit", "--brokers", brokers, "--role", "controller", "--device", "valve-1", "--action", "close", "--id", "c-topic", "--wait", "--timeout", "20s")
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("submit over the topic: exit %d\n%s\n%s", code, out, errOut)
	}
	// A command for a device the member lacks is recorded as rejected: exit 7.
	code, out, errOut = runCLI(t, ctx, "submit", "--brokers", brokers, "--role", "controller", "--device", "no-such", "--action", "x", "--id", "c-bad", "--wait", "--timeout", "20s")
	if code != int(ExitCommandFailed) {
		t.Fatalf("rejected command: exit %d, want %d\n%s\n%s", code, ExitCommandFailed, out, errOut)
	}
	if got := received.String(); strings.Count(got, "devices/valve-1/cmd") != 2 {
		t.Errorf("the broker saw %q, want two commands to valve-1", got)
	}

	// The log replays and verifies.
	code, out, errOut = runCLI(t, ctx, "log", "--brokers", brokers, "--role", "controller", "-o", "json")
	if code != 0 {
		t.Fatalf("log: exit %d\n%s\n%s", code, out, errOut)
	}
	var audit LogAudit
	if err := json.Unmarshal([]byte(out), &audit); err != nil {
		t.Fatal(err)
	}
	if !audit.Clean || audit.Commands["succeeded"] != 2 || audit.Commands["rejected"] != 1 || len(audit.Leaderships) != 1 || audit.Leaderships[0].Member != "node-1" {
		t.Fatalf("audit %+v", audit)
	}
	if len(audit.Log) != audit.Records || audit.Records == 0 {
		t.Errorf("%d records printed of %d", len(audit.Log), audit.Records)
	}
	// One leadership wrote the log: every record carries its term.
	term := audit.Leaderships[0].FirstTerm
	if term == coordination.NoTerm || audit.Leaderships[0].LastTerm != term {
		t.Errorf("leadership terms %s .. %s", term, audit.Leaderships[0].LastTerm)
	}
	for _, r := range audit.Log {
		if r.Term != term {
			t.Errorf("record %d has term %s, the leadership's is %s", r.Offset, r.Term, term)
		}
	}
	code, out, _ = runCLI(t, ctx, "log", "--brokers", brokers, "--role", "controller", "--verify")
	if code != 0 || !strings.Contains(out, "verify: clean") || strings.Contains(out, "OFFSET") {
		t.Fatalf("log --verify: exit %d\n%s", code, out)
	}
	// A role no member ever registered for is not a clean, empty log.
	for _, role := range []string{"nosuchrole", "Controller"} {
		code, out, errOut = runCLI(t, ctx, "log", "--brokers", brokers, "--role", role, "--verify")
		if code != int(ExitUnknownRole) || strings.Contains(out, "verify: clean") ||
			!strings.Contains(errOut, "\ndispatcher: role \""+role+"\" has never been registered") {
			t.Fatalf("log --role %s: exit %d, want %d\n%s%s", role, code, ExitUnknownRole, out, errOut)
		}
		if suggests := strings.Contains(errOut, `did you mean "controller"?`); suggests != (role == "Controller") {
			t.Errorf("log --role %s: suggestion %v\n%s", role, suggests, errOut)
		}
	}
	code, out, _ = runCLI(t, ctx, "log", "--brokers", brokers, "--role", "controller")
	if code != 0 || !strings.Contains(out, "c-topic") || !strings.Contains(out, "issued") ||
		!strings.Contains(out, "TERM  TOKEN") || !strings.Contains(out, "node-1       term "+term.String()+"  tokens") {
		t.Fatalf("log table: exit %d\n%s", code, out)
	}

	// --follow prints what is there and stops cleanly when interrupted.
	fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
	code, out, errOut = runCLI(t, fctx, "log", "--brokers", brokers, "--role", "controller", "--follow", "-o", "json")
	fcancel()
	if code != 0 {
		t.Fatalf("log --follow: exit %d\n%s\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != audit.Records+1 {
		t.Fatalf("--follow printed %d lines, want %d records and the verdict:\n%s", len(lines), audit.Records, out)
	}

	// resolve of a command that is not in doubt is refused.
	code, _, errOut = runCLI(t, ctx, "resolve", "c-http", "--action", "cancel", "--url", base, "--token", "s3cret")
	if code == 0 || !strings.Contains(errOut, "not in doubt") {
		t.Fatalf("resolve: exit %d\n%s", code, errOut)
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	_, _ = metrics.ReadFrom(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"dispatch_commands_total", "dispatch_commit_duration", "go_goroutines"} {
		if !strings.Contains(metrics.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	code, out, _ = runCLI(t, ctx, "status", "--brokers", brokers, "--role", "controller")
	if code != 0 || !strings.Contains(out, "node-1") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}

	// SIGTERM (the context) resigns and returns nil, which exits 0.
	if err := stop(); err != nil {
		t.Fatalf("run: %v\n%s", err, logs)
	}
	if !strings.Contains(logs.String(), "resigned the role") {
		t.Errorf("no resignation in the logs:\n%s", logs)
	}
	code, _, _ = runCLI(t, ctx, "status", "--brokers", brokers, "--role", "controller")
	if code != int(ExitNoLeader) {
		t.Fatalf("status after the resignation: exit %d", code)
	}
}

func TestLogAuditFailureExits4(t *testing.T) {
	tok, _ := coordination.NewFencingToken(3, 1)
	older, _ := coordination.NewFencingToken(3, 0)
	at := time.UnixMilli(1_700_000_000_000)
	cmd := dispatch.Command{ID: "a", Role: "controller", Device: "d", Action: "x", SubmittedAt: at, Deadline: at.Add(time.Minute)}
	entries := []dispatch.Entry{
		{Offset: 0, Kind: dispatch.EntryIssued, Role: "controller", Member: "m1", Token: tok, At: at, Issued: &dispatch.Issued{Command: cmd}},
		{Offset: 1, Kind: dispatch.EntryOutcome, Role: "controller", Member: "m0", Token: older, At: at, Outcome: &dispatch.Outcome{CommandID: "a", Status: dispatch.StatusSucceeded, Attempt: 1}},
	}
	var out, errOut bytes.Buffer
	o := &LogOptions{Output: OutputTable, Streams: Streams{Out: &out, Err: &errOut},
		Cluster:    ClusterOptions{Brokers: []string{"127.0.0.1:1"}, Role: "controller", Timeout: time.Second},
		openReader: func(context.Context, *LogOptions) (logReader, error) { return fakeLog(entries), nil }}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	err := o.Run(context.Background())
	if codeOf(err) != ExitAuditFailed {
		t.Fatalf("err %v (exit %d), want exit %d\n%s", err, codeOf(err), ExitAuditFailed, out.String())
	}
	if !strings.Contains(out.String(), "VIOLATIONS") || !strings.Contains(out.String(), string(dispatch.ViolationTokenRegressed)) {
		t.Errorf("output:\n%s", out.String())
	}
}

// fakeLog serves fixed entries.
type fakeLog []dispatch.Entry

func (f fakeLog) ReadLog(context.Context, coordination.TopicPartition) ([]dispatch.Entry, error) {
	return f, nil
}

func (f fakeLog) FollowLog(context.Context, coordination.TopicPartition, int64) (*dispatch.LogStream, error) {
	return nil, fmt.Errorf("not followed")
}

// ReadRange serves the entries within rng, as a Kafka partition whose
// offsets are the entries' would.
func (f fakeLog) ReadRange(_ context.Context, _ coordination.TopicPartition, rng dispatch.LogRange) ([]dispatch.Entry, error) {
	var out []dispatch.Entry
	for _, e := range f {
		if e.Offset >= rng.From && e.Offset < rng.Until && (rng.Limit <= 0 || len(out) < rng.Limit) {
			out = append(out, e)
		}
	}
	return out, nil
}

// OffsetAt returns the offset of the first entry written at or after t, or
// the end.
func (f fakeLog) OffsetAt(_ context.Context, _ coordination.TopicPartition, t time.Time) (int64, error) {
	for _, e := range f {
		if !e.At.Before(t) {
			return e.Offset, nil
		}
	}
	_, end, _ := f.Bounds(context.Background(), coordination.TopicPartition{})
	return end, nil
}

// Bounds returns the first entry's offset and one past the last's.
func (f fakeLog) Bounds(context.Context, coordination.TopicPartition) (int64, int64, error) {
	if len(f) == 0 {
		return 0, 0, nil
	}
	return f[0].Offset, f[len(f)-1].Offset + 1, nil
}

// TestRunTakesTheCommitScheduleFromTheFile: the commit keys of the
// dispatch section reach the dispatcher, which logs the schedule in force
// when it recovered, with a gap turned off as 0s.
func TestRunTakesTheCommitScheduleFromTheFile(t *testing.T) {
	_, brokers := newFakeCluster(t)
	broker := mqtttest.StartInProcess(t, "127.0.0.1:0")
	if code, out, errOut := runCLI(t, context.Background(), "topics", "--brokers", brokers); code != 0 {
		t.Fatalf("topics: %d\n%s%s", code, out, errOut)
	}
	path := writeConfig(t, brokers, "node-1", broker.URL(), "")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const section = "dispatch:\n  safety_margin: 500ms\n"
	if !strings.Contains(string(b), section) {
		t.Fatalf("the test's configuration has no %q", section)
	}
	scheduled := strings.Replace(string(b), section, section+"  commit_gap: 0s\n  commit_linger: 7ms\n  outcome_linger: 25ms\n", 1)
	if err := os.WriteFile(path, []byte(scheduled), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, logs, _ := startRun(t, path)
	waitHTTP(t, "http://"+addr+"/leaderz", http.StatusOK)
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "recovered the role's log") {
			line = l
		}
	}
	for _, want := range []string{"commit_gap=0s", "commit_linger=7ms", "outcome_linger=25ms"} {
		if !strings.Contains(line, " "+want) {
			t.Errorf("the recovery's log line %q lacks %s", line, want)
		}
	}
}
