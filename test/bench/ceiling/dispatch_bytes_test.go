package ceiling

import (
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// TestCheckpointBytesAreToldApart: the counting leader tells a checkpoint
// part's record from a command's by its key alone, and counts the same
// bytes for a command that the ceiling counts for its records.
func TestCheckpointBytesAreToldApart(t *testing.T) {
	token, err := coordination.NewFencingToken(7, 1)
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_700_000_000_000)
	part := dispatch.CheckpointPart{Sequence: 1, Part: 0, Parts: 1, Data: []byte("ids")}
	cmd := BenchCommand("bench-role", "b", 1, at)
	for _, c := range []struct {
		entry dispatch.Entry
		want  bool
	}{
		{dispatch.Entry{Kind: dispatch.EntryCheckpoint, Checkpoint: &part}, true},
		{dispatch.Entry{Kind: dispatch.EntryIssued, Issued: &dispatch.Issued{Command: cmd}}, false},
		{dispatch.Entry{Kind: dispatch.EntryOutcome, Outcome: &dispatch.Outcome{CommandID: cmd.ID, Status: dispatch.StatusSucceeded, Attempt: dispatch.FirstAttempt}}, false},
	} {
		e := c.entry
		e.Role, e.Member, e.Token, e.At = "bench-role", "bench", token, at
		key, _, err := dispatch.EncodeEntry(e)
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		if got := isCheckpointKey(key); got != c.want {
			t.Errorf("isCheckpointKey of a %s record = %t, want %t", e.Kind, got, c.want)
		}
	}
	if isCheckpointKey([]byte{0, 1, 0}) {
		t.Error("isCheckpointKey took a key of three bytes for a checkpoint's")
	}

	commands, err := EncodeCommands("bench-role", 1)
	if err != nil {
		t.Fatal(err)
	}
	c := commands[0]
	var headers []coordination.Header
	for _, h := range c.Headers {
		headers = append(headers, coordination.Header{Key: h.Key, Value: h.Value})
	}
	want := RecordBytes(c.Key[0], c.Value[0], headers) + RecordBytes(c.Key[1], c.Value[1], headers)
	if got := c.Bytes(); got != want || got == 0 {
		t.Errorf("the ceiling counts %d bytes for a command, the counting leader %d", got, want)
	}
}
