package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// TestLogPrintsTerms builds the audit of a log in which node-1's producer id
// rotated to a lower one within term 40 and node-2 then led in term 57 with
// a lower token still: every record shows its term, the leaderships show
// theirs, and the log verifies.
func TestLogPrintsTerms(t *testing.T) {
	tok := func(id int64, epoch int16) coordination.FencingToken {
		tk, err := coordination.NewFencingToken(id, epoch)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	issued := func(off int64, member string, term coordination.Term, token coordination.FencingToken, id string) dispatch.Entry {
		return dispatch.Entry{Offset: off, Kind: dispatch.EntryIssued, Role: "r", Term: term, Token: token, Member: member, At: at,
			Issued: &dispatch.Issued{Command: dispatch.Command{ID: id, Role: "r", Device: "valve-1", Action: "open"}}}
	}
	outcome := func(off int64, member string, term coordination.Term, token coordination.FencingToken, id string) dispatch.Entry {
		return dispatch.Entry{Offset: off, Kind: dispatch.EntryOutcome, Role: "r", Term: term, Token: token, Member: member, At: at,
			Outcome: &dispatch.Outcome{CommandID: id, Status: dispatch.StatusSucceeded, Attempt: dispatch.FirstAttempt}}
	}
	entries := []dispatch.Entry{
		issued(0, "node-1", 40, tok(900, 3), "c1"),
		outcome(1, "node-1", 40, tok(2, 0), "c1"),
		issued(2, "node-2", 57, tok(1, 0), "c2"),
		outcome(3, "node-2", 57, tok(1, 1), "c2"),
	}
	a := buildAudit("r", coordination.TopicPartition{Topic: "dispatch.log", Partition: 3}, entries)
	if !a.Clean {
		t.Fatalf("violations %+v", a.Violations)
	}
	if len(a.Leaderships) != 2 || a.Leaderships[0].FirstTerm != 40 || a.Leaderships[0].LastTerm != 40 ||
		a.Leaderships[1].FirstTerm != 57 {
		t.Fatalf("leaderships %+v", a.Leaderships)
	}
	for i, want := range []coordination.Term{40, 40, 57, 57} {
		if r := record(entries[i]); r.Term != want {
			t.Errorf("record %d: term %s, want %s", i, r.Term, want)
		}
	}
	row := strings.Join(recordRow(record(entries[1])), "  ")
	if !strings.Contains(row, "node-1  40  2:0  outcome") {
		t.Errorf("row %q lacks the term beside the token", row)
	}
	old := issued(4, "node-2", coordination.NoTerm, tok(1, 1), "c3")
	if row := recordRow(record(old)); row[3] != "-" {
		t.Errorf("a record without a term shows %q", row[3])
	}

	var out bytes.Buffer
	writeAuditText(&LogOptions{Streams: Streams{Out: &out}}, a)
	for _, want := range []string{"node-1       term 40  tokens 900:3 .. 2:0", "node-2       term 57  tokens 1:0 .. 1:1", "verify: clean"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("audit text lacks %q:\n%s", want, out.String())
		}
	}
}
