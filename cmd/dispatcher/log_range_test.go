package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// pagedLog is a log of ten settled commands, c0 to c9: c<i> issued at
// minute i (offset 2i) and settled at minute i and a half (offset 2i+1).
func pagedLog(t *testing.T, at time.Time) fakeLog {
	tok, err := coordination.NewFencingToken(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	var log fakeLog
	for i := range 10 {
		id := fmt.Sprintf("c%d", i)
		issuedAt := at.Add(time.Duration(i) * time.Minute)
		cmd := dispatch.Command{ID: id, Role: "controller", Device: "d", Action: "x", SubmittedAt: issuedAt, Deadline: issuedAt.Add(time.Hour)}
		log = append(log,
			dispatch.Entry{Offset: int64(2 * i), Kind: dispatch.EntryIssued, Role: "controller", Member: "m1", Token: tok, At: issuedAt,
				Issued: &dispatch.Issued{Command: cmd}},
			dispatch.Entry{Offset: int64(2*i + 1), Kind: dispatch.EntryOutcome, Role: "controller", Member: "m1", Token: tok, At: issuedAt.Add(30 * time.Second),
				Outcome: &dispatch.Outcome{CommandID: id, Status: dispatch.StatusSucceeded, Attempt: dispatch.FirstAttempt}})
	}
	return log
}

// TestLogReadsARange wants log --since/--until/--limit to read the part of
// the partition they name, mapped from times to offsets, to say which part
// it read, and to verify a part that starts with an outcome whose Issued
// record lies before it as clean.
func TestLogReadsARange(t *testing.T) {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	log := pagedLog(t, at)
	run := func(o *LogOptions) (LogAudit, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		o.Output, o.Streams = OutputJSON, Streams{Out: &out, Err: &errOut}
		o.Cluster = ClusterOptions{Brokers: []string{"127.0.0.1:1"}, Role: "controller", Timeout: time.Second}
		o.openReader = func(context.Context, *LogOptions) (logReader, error) { return log, nil }
		if err := o.Complete(); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); err != nil {
			return LogAudit{}, err
		}
		err := o.Run(context.Background())
		var a LogAudit
		if jerr := json.Unmarshal(out.Bytes(), &a); jerr != nil {
			t.Fatalf("%v: %s", jerr, out.String())
		}
		return a, err
	}
	offsets := func(a LogAudit) (first, last int64, n int) {
		if len(a.Log) == 0 {
			return -1, -1, 0
		}
		return a.Log[0].Offset, a.Log[len(a.Log)-1].Offset, len(a.Log)
	}
	for _, c := range []struct {
		name                string
		o                   LogOptions
		first, last         int64
		midLog, limited     bool
		wantFrom, wantUntil int64
	}{
		{"since an outcome", LogOptions{Since: at.Add(5*time.Minute + 30*time.Second).Format(time.RFC3339)}, 11, 19, true, false, 11, 20},
		{"since and until", LogOptions{Since: at.Add(2 * time.Minute).Format(time.RFC3339), Until: at.Add(4 * time.Minute).Format(time.RFC3339)}, 4, 7, true, false, 4, 8},
		{"until alone", LogOptions{Until: at.Add(2 * time.Minute).Format(time.RFC3339)}, 0, 3, false, false, 0, 4},
		{"since and limit", LogOptions{Since: at.Add(3 * time.Minute).Format(time.RFC3339), Limit: 3}, 6, 8, true, true, 6, 9},
		{"limit alone: the last records", LogOptions{Limit: 4}, 16, 19, true, true, 16, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			a, err := run(&o)
			if err != nil {
				t.Fatalf("exit %d: %v; violations %+v", codeOf(err), err, a.Violations)
			}
			first, last, n := offsets(a)
			if first != c.first || last != c.last || n != int(c.last-c.first+1) {
				t.Errorf("read offsets %d..%d (%d records), want %d..%d", first, last, n, c.first, c.last)
			}
			if a.Range == nil || a.Range.MidLog != c.midLog || a.Range.Limited != c.limited || a.Range.From != c.wantFrom || a.Range.Until != c.wantUntil {
				t.Errorf("range %+v", a.Range)
			}
			if !a.Clean {
				t.Errorf("a part of a sound log does not verify: %+v", a.Violations)
			}
		})
	}
	// A mid-log part that holds a real fault still fails.
	bad := append(fakeLog(nil), log...)
	bad[13].Outcome = &dispatch.Outcome{CommandID: "c6", Status: dispatch.StatusSucceeded, Attempt: 2}
	log = bad
	o := LogOptions{Since: at.Add(5*time.Minute + 30*time.Second).Format(time.RFC3339)}
	if a, err := run(&o); codeOf(err) != ExitAuditFailed || len(a.Violations) != 1 || a.Violations[0].Kind != string(dispatch.ViolationAttemptSequence) {
		t.Errorf("a faulty part: exit %d, violations %+v", codeOf(err), a.Violations)
	}

	for _, bad := range []LogOptions{
		{Since: "yesterday"}, {Since: "-1h"}, {Limit: -1}, {Follow: true, Until: "1h"}, {Follow: true, Limit: 5},
		{Since: "1h", Until: "2h"},
	} {
		o := bad
		if _, err := run(&o); codeOf(err) != ExitUsage {
			t.Errorf("%+v: exit %d (%v), want usage", bad, codeOf(err), err)
		}
	}
}
