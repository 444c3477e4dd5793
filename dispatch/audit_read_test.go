package dispatch

import (
	"slices"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestVerifyFromStartsMidLog checks a range of a log that starts after the
// Issued record of a command: Verify reports its outcome as not issued,
// VerifyFrom does not, and both still report an outcome before an Issued
// record inside the range and a second terminal outcome.
func TestVerifyFromStartsMidLog(t *testing.T) {
	tok := mustToken(t, 7, 1)
	at := func(offset int64, e Entry) Entry {
		e.Offset, e.Role, e.Member, e.Token = offset, "role", "node-1", tok
		return e
	}
	entries := []Entry{
		at(10, Entry{Kind: EntryRedispatched, Redispatched: &Redispatched{CommandID: "before", Attempt: 2, Reason: RedispatchTakeover}}),
		at(11, outcomeEntry("before", StatusSucceeded, 2)),
		at(12, outcomeEntry("early", StatusSucceeded, FirstAttempt)),
		at(13, issuedEntry("early")),
		at(14, issuedEntry("inside")),
		at(15, outcomeEntry("inside", StatusSucceeded, FirstAttempt)),
		at(16, outcomeEntry("inside", StatusFailed, FirstAttempt)),
	}
	kinds := func(vs []Violation) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.CommandID+":"+string(v.Kind))
		}
		return out
	}
	full := kinds(Verify(entries))
	if !slices.Contains(full, "before:"+string(ViolationNotIssued)) {
		t.Fatalf("Verify: %v; want the command issued before the range reported", full)
	}
	got := kinds(VerifyFrom(entries))
	want := []string{"early:" + string(ViolationNotIssued), "early:" + string(ViolationAfterTerminal), "inside:" + string(ViolationSecondTerminal)}
	if !slices.Equal(got, want) {
		t.Errorf("VerifyFrom: %v, want %v", got, want)
	}
}

// TestGrownFetchLimit checks when a read makes room for more than one large
// record a fetch, and how much.
func TestGrownFetchLimit(t *testing.T) {
	const part = MaxCheckpointPartLen + 100
	for _, tc := range []struct {
		name         string
		limit, whole int32
		biggest      int
		left         int64
		want         int32
	}{
		{"small records keep the limit", 16 << 10, 50 << 20, 200, 40, 0},
		{"two records fit the limit", 1 << 20, 50 << 20, 400 << 10, 40, 0},
		{"checkpoint parts under the default limit", 1 << 20, 50 << 20, part, 4, 4 * part},
		{"checkpoint parts under a range's limit", 256 << 10, 50 << 20, part, 3, 3 * part},
		{"many parts stop at grownFetchMax", 1 << 20, 50 << 20, part, 1000, grownFetchMax},
		{"a base's parts among small records stop there too", 627456, 50 << 20, part, 2450, grownFetchMax},
		{"and at the client's limit of a fetch", 1 << 20, 2 << 20, part, 1000, 2 << 20},
		{"one record left needs no room", 1 << 20, 50 << 20, part, 1, 0},
		{"nothing fetched", 1 << 20, 50 << 20, 0, 40, 0},
		{"a client limit below the range's keeps it", 1 << 20, 1 << 20, part, 40, 0},
	} {
		if got := grownFetchLimit(tc.limit, tc.whole, tc.biggest, tc.left); got != tc.want {
			t.Errorf("%s: grownFetchLimit(%d, %d, %d, %d) = %d, want %d", tc.name, tc.limit, tc.whole, tc.biggest, tc.left, got, tc.want)
		}
	}
}

// TestDecodeRecordSharesCheckpointData checks that a decoded checkpoint
// part's data is a slice of the record's value, capped so that an append
// cannot write into the value, and that DecodeEntry copies it.
func TestDecodeRecordSharesCheckpointData(t *testing.T) {
	tok, _ := coordination.NewFencingToken(7, 3)
	p := CheckpointPart{Sequence: 1, Part: 0, Parts: 1, Data: []byte("the state")}
	key, value, err := EncodeEntry(Entry{Kind: EntryCheckpoint, Role: "plant-a", Token: tok, Member: "node-1", At: time.Now(), Checkpoint: &p})
	if err != nil {
		t.Fatal(err)
	}
	e, err := DecodeRecord(&kgo.Record{Key: key, Value: value})
	if err != nil {
		t.Fatal(err)
	}
	data := e.Checkpoint.Data
	if string(data) != "the state" || cap(data) != len(data) || &data[0] != &value[len(value)-len(data)] {
		t.Fatalf("DecodeRecord: data %q (cap %d), want %q sharing the value's last bytes, capped", data, cap(data), "the state")
	}
	if e, err = DecodeEntry(key, value); err != nil || &e.Checkpoint.Data[0] == &value[len(value)-len(data)] {
		t.Fatalf("DecodeEntry: %v; want the data copied", err)
	}
}
