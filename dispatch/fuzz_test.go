package dispatch

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// seedGolden adds every golden vector of testdata/ to the corpus.
func seedGolden(f *testing.F, prefix string, add func(path string)) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", prefix+"*.hex"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no golden vectors %s*.hex in testdata: %v", prefix, err)
	}
	for _, p := range paths {
		add(p)
	}
}

// FuzzDecodeEntry checks that DecodeEntry never panics, that it fails only
// with a *LogFormatError, and that whatever it accepts is canonical: encoding
// the entry again gives back the very same bytes, and decoding those the same
// entry.
func FuzzDecodeEntry(f *testing.F) {
	seedGolden(f, "entry-", func(path string) {
		if !strings.HasSuffix(path, ".key.hex") {
			return
		}
		key := readGolden(f, path)
		value := readGolden(f, strings.TrimSuffix(path, ".key.hex")+".value.hex")
		f.Add(key, value)
		f.Add(key, value[:len(value)/2])
	})
	f.Add([]byte{}, []byte{})
	f.Add([]byte{0, 0, 0, 4, 0, 1, 'r', 0, 0}, []byte{0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		e, err := DecodeEntry(key, value)
		if err != nil {
			var fe *LogFormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *LogFormatError", err)
			}
			return
		}
		k2, v2, err := EncodeEntry(e)
		if err != nil {
			t.Fatalf("decoded entry %+v does not encode: %v", e, err)
		}
		if !bytes.Equal(k2, key) || !bytes.Equal(v2, value) {
			t.Fatalf("not canonical:\nkey   %x\nagain %x\nvalue %x\nagain %x", key, k2, value, v2)
		}
		e2, err := DecodeEntry(k2, v2)
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("second decode %+v, %v; want %+v", e2, err, e)
		}
	})
}

// FuzzDecodeRequest checks the same properties for the request value. A
// well-formed value with an invalid command is allowed to fail with an
// *InvalidCommandError; it must still re-encode to the same bytes but for the
// field at fault, so only the canonical property of accepted values is
// checked.
func FuzzDecodeRequest(f *testing.F) {
	seedGolden(f, "request-", func(path string) {
		value := readGolden(f, path)
		f.Add(value)
		f.Add(value[:len(value)-1])
	})
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 1, 'x', 0, 0, 0, 1, 'd', 0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, value []byte) {
		cmd, err := DecodeRequest(value)
		if err != nil {
			var fe *LogFormatError
			var ice *InvalidCommandError
			if !errors.As(err, &fe) && !errors.As(err, &ice) {
				t.Fatalf("error %v is neither a *LogFormatError nor an *InvalidCommandError", err)
			}
			return
		}
		again, err := EncodeRequest(cmd)
		if err != nil {
			t.Fatalf("decoded command %+v does not encode: %v", cmd, err)
		}
		if !bytes.Equal(again, value) {
			t.Fatalf("not canonical:\nvalue %x\nagain %x", value, again)
		}
	})
}

// entriesOf builds a small log from fuzz bytes, six bytes an entry, over few
// commands, members and tokens, so that the fuzzer finds every kind of
// violation quickly.
func entriesOf(t *testing.T, data []byte) []Entry {
	var entries []Entry
	for i := 0; i+6 <= len(data); i += 6 {
		b := data[i : i+6]
		id := string(rune('a' + b[1]%3))
		e := Entry{
			Offset: int64(len(entries)),
			Kind:   EntryKind(b[0]%4 + 1),
			Role:   []string{"r1", "r2"}[b[4]>>4%2],
			Member: []string{"m1", "m2"}[b[4]%2],
			Token:  mustToken(t, int64(b[5]>>4%2), int16(b[5]%8)),
			At:     at,
		}
		attempt := int(b[3] % 4)
		switch e.Kind {
		case EntryIssued:
			cmd := sampleCommand()
			cmd.ID, cmd.Role = id, e.Role
			e.Issued = &Issued{Command: cmd}
		case EntryRedispatched:
			e.Redispatched = &Redispatched{CommandID: id, Attempt: attempt, Reason: RedispatchTakeover}
		case EntryOutcome:
			e.Outcome = &Outcome{CommandID: id, Status: Status(b[2]%6 + 1), Attempt: attempt}
		case EntryIntake:
			from := int64(b[2] % 8)
			e.Intake = &IntakePosition{Topic: "t", FromOffset: from, NextOffset: from + int64(b[3]%4)}
		}
		entries = append(entries, e)
	}
	return entries
}

// FuzzVerify checks that Verify and Replay take any log without panicking,
// that every violation names a record of the log, in log order, and that
// Verify is incremental: the violations of a prefix of the log are exactly
// the violations of the whole log within that prefix, so a follower may
// verify a log as it grows.
func FuzzVerify(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 2, 0, 0, 1, 0, 0}, uint8(1))
	f.Add([]byte{0, 0, 0, 0, 0, 1, 2, 0, 1, 1, 0, 1, 2, 0, 2, 1, 1, 0, 3, 0, 0, 0, 0, 0}, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		entries := entriesOf(t, data)
		h := Replay(entries)
		for _, c := range h.Commands {
			if _, ok := h.Command(c.Role, c.ID); !ok {
				t.Fatalf("command %s/%s is listed but not indexed", c.Role, c.ID)
			}
		}
		all := Verify(entries)
		for i, v := range all {
			if v.Offset < 0 || v.Offset >= int64(len(entries)) || (i > 0 && v.Offset < all[i-1].Offset) {
				t.Fatalf("violation %v is out of the log or out of order", v)
			}
		}
		k := 0
		if len(entries) > 0 {
			k = int(cut) % (len(entries) + 1)
		}
		var want []Violation
		for _, v := range all {
			if v.Offset < int64(k) {
				want = append(want, v)
			}
		}
		if got := Verify(entries[:k]); !reflect.DeepEqual(got, want) {
			t.Fatalf("prefix of %d entries: %v, want %v", k, got, want)
		}
	})
}

// The encode-then-decode targets build a value of each record kind from the
// fuzzer's arguments and check the contract between the two sides: an
// encoder accepts exactly what its decoder accepts back (for an Issued
// record, exactly what Command.Validate accepts, so a command that intake
// takes can always be written), and whatever encodes decodes to the same
// value, at the log's precision, and encodes again to the same bytes.

// fuzzTime builds a time from a kind and an offset that the fuzzer picks,
// so that the zero time, the first millisecond after it, the Unix epoch and
// the ends of the range the log holds are close at hand. kind/2 picks the
// base: 0 the zero time plus off nanoseconds, 1 the Unix epoch plus off
// nanoseconds, 2 off milliseconds after the Unix epoch, 3 the last
// millisecond of year 9999 plus off nanoseconds. An odd kind puts the time
// in a zone other than UTC.
func fuzzTime(kind uint8, off int64) time.Time {
	var t time.Time
	switch kind / 2 % 4 {
	case 0:
		t = time.Time{}.Add(time.Duration(off))
	case 1:
		t = time.Unix(0, off)
	case 2:
		t = time.UnixMilli(off)
	default:
		t = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC).Add(time.Duration(off))
	}
	if kind%2 == 1 {
		t = t.In(time.FixedZone("UTC+1", 3600))
	}
	return t
}

// atLogPrecision returns t as a decoder gives it back: in UTC, cut to the
// millisecond.
func atLogPrecision(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// commandAtLogPrecision returns cmd as a decoder gives it back.
func commandAtLogPrecision(cmd Command) Command {
	cmd.SubmittedAt, cmd.Deadline = atLogPrecision(cmd.SubmittedAt), atLogPrecision(cmd.Deadline)
	if len(cmd.Payload) == 0 {
		cmd.Payload = nil
	}
	if len(cmd.Attributes) == 0 {
		cmd.Attributes = nil
	}
	return cmd
}

// fuzzHead builds the fields every entry shares.
func fuzzHead(kind EntryKind, role, member string, producerID int64, epoch int16, atKind uint8, atOff int64) Entry {
	token, err := coordination.NewFencingToken(producerID, epoch)
	if err != nil {
		token = coordination.NoEpoch
	}
	return Entry{Kind: kind, Role: role, Member: member, Token: token, At: fuzzTime(atKind, atOff)}
}

// checkEntryRoundTrip checks that e either fails to encode, or decodes back
// to want and encodes again to the same bytes. It reports whether e encoded.
func checkEntryRoundTrip(t *testing.T, e Entry, want func(Entry) Entry) bool {
	t.Helper()
	key, value, err := EncodeEntry(e)
	if err != nil {
		return false
	}
	got, err := DecodeEntry(key, value)
	if err != nil {
		t.Fatalf("%+v encoded, and its bytes do not decode: %v", e, err)
	}
	e.At = atLogPrecision(e.At)
	if w := want(e); !reflect.DeepEqual(got, w) {
		t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, w)
	}
	k2, v2, err := EncodeEntry(got)
	if err != nil || !bytes.Equal(k2, key) || !bytes.Equal(v2, value) {
		t.Fatalf("the decoded entry does not encode to the same bytes: %v", err)
	}
	return true
}

// headValid reports whether the shared fields can be recorded, by the
// constructors that both sides use.
func headValid(e Entry) bool { return checkEntryHead(e) == nil }

// headSeed is one edge case of the fields every entry shares.
type headSeed struct {
	role, member string
	producerID   int64
	epoch        int16
	atKind       uint8
	atOff        int64
}

// headSeeds are the edge cases of the shared fields, the first arguments of
// every entry target; the first one is sound.
var headSeeds = []headSeed{
	{"controller", "node-1", 7, 0, 4, at.UnixMilli()},
	{"controller", "node-1", 7, 0, 0, 500_000},   // 0.5 ms after the zero time
	{"controller", "node-1", 7, 0, 0, 1_000_000}, // 1 ms after it
	{"controller", "node-1", 7, 0, 0, 0},         // the zero time
	{"controller", "node-1", 7, 0, 4, 1 << 62},   // past year 9999
	{"controller", "node-1", 7, 0, 6, 0},         // the last millisecond of 9999
	{"controller", "node-1", 7, 0, 6, 1_000_000}, // past it
	{"", "node-1", 7, 0, 4, 1_700_000_000_000},   // no role
	{"controller", "", -1, -1, 5, 1_700_000_000_000},
	{strings.Repeat("r", 249), strings.Repeat("m", 250), 0, 32767, 5, -1},
}

// timeSeed is one edge case of a command's two times.
type timeSeed struct {
	subKind uint8
	subOff  int64
	dlKind  uint8
	dlOff   int64
}

var timeSeeds = []timeSeed{
	{4, 1_700_000_000_000, 4, 1_700_000_060_000},
	{0, 500_000, 4, 1_700_000_060_000}, // submitted 0.5 ms after the zero time
	{0, 500_000, 0, 0},
	{4, 1_700_000_000_000, 0, 500_000}, // a deadline 0.5 ms after the zero time
	{4, 1_700_000_000_000, 0, 0},       // no deadline
	{0, 1_000_000, 0, 1_500_000},       // a deadline within the same millisecond
	{0, 1_000_000, 0, 2_000_000},
	{6, -1_000_000, 6, 0}, // the last millisecond of the range
	{6, -1_000_000, 6, 1_000_000},
	{0, 0, 0, 0},
}

func FuzzEncodeIssued(f *testing.F) {
	for _, h := range headSeeds {
		f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, "cmd-1", "", "valve", "open", []byte("p"),
			uint8(4), int64(1_700_000_000_000), uint8(4), int64(1_700_000_060_000), "k", "v")
	}
	h := headSeeds[0]
	for _, ts := range timeSeeds {
		f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, "cmd-1", "controller", "valve", "", []byte(nil),
			ts.subKind, ts.subOff, ts.dlKind, ts.dlOff, "", "")
	}
	f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, strings.Repeat("i", 255), "controller", strings.Repeat("d", 255),
		strings.Repeat("a", 256), []byte{}, uint8(2), int64(1), uint8(2), int64(2), strings.Repeat("k", 255), strings.Repeat("v", 4096))
	f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, "\xff", "controller", "valve", "set", []byte(nil),
		uint8(2), int64(1), uint8(2), int64(2), "", "x")
	f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, "cmd-1", "other", "valve", "set", []byte(nil),
		uint8(2), int64(1), uint8(2), int64(2), "", "")
	f.Fuzz(func(t *testing.T, role, member string, producerID int64, epoch int16, atKind uint8, atOff int64,
		id, cmdRole, device, action string, payload []byte, subKind uint8, subOff int64, dlKind uint8, dlOff int64, attrKey, attrValue string) {
		cmd := Command{ID: id, Role: cmdRole, Device: device, Action: action, Payload: payload,
			SubmittedAt: fuzzTime(subKind, subOff), Deadline: fuzzTime(dlKind, dlOff)}
		if attrKey != "" || attrValue != "" {
			cmd.Attributes = map[string]string{attrKey: attrValue}
		}
		e := fuzzHead(EntryIssued, role, member, producerID, epoch, atKind, atOff)
		e.Issued = &Issued{Command: cmd}
		encoded := checkEntryRoundTrip(t, e, func(e Entry) Entry {
			cmd := commandAtLogPrecision(e.Issued.Command)
			if cmd.Role == "" {
				cmd.Role = e.Role
			}
			e.Issued = &Issued{Command: cmd}
			return e
		})
		// Intake's validation and the encoder agree: a command that Validate
		// takes encodes, and one that it refuses does not.
		if cmd.Role == "" {
			cmd.Role = role
		}
		if accepted := cmd.Validate() == nil && cmd.Role == role && headValid(e); accepted != encoded {
			t.Fatalf("Validate %v and the head %v, yet the encoder accepted: %v", cmd.Validate(), headValid(e), encoded)
		}
	})
}

func FuzzEncodeRedispatched(f *testing.F) {
	for _, h := range headSeeds {
		f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, "cmd-1", 2, int8(RedispatchTakeover))
	}
	h := headSeeds[0]
	for _, b := range []struct {
		id      string
		attempt int
		reason  int8
	}{
		{"", 2, 1}, {"cmd", 1, 1}, {"cmd", math.MaxInt32, 2}, {"cmd", math.MaxInt32 + 1, 2},
		{"cmd", 3, 0}, {"cmd", 3, 3}, {strings.Repeat("i", 256), 2, 1}, {"\xff", 2, 1},
	} {
		f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, b.id, b.attempt, b.reason)
	}
	f.Fuzz(func(t *testing.T, role, member string, producerID int64, epoch int16, atKind uint8, atOff int64, id string, attempt int, reason int8) {
		e := fuzzHead(EntryRedispatched, role, member, producerID, epoch, atKind, atOff)
		e.Redispatched = &Redispatched{CommandID: id, Attempt: attempt, Reason: RedispatchReason(reason)}
		checkEntryRoundTrip(t, e, func(e Entry) Entry { return e })
	})
}

func FuzzEncodeOutcome(f *testing.F) {
	for _, h := range headSeeds {
		f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, "cmd-1", int8(StatusSucceeded), 1, "", "ok", []byte("reply"))
	}
	h := headSeeds[0]
	for _, b := range []struct {
		id             string
		status         Status
		attempt        int
		reason, detail string
		data           []byte
	}{
		{"cmd", StatusRejected, NoAttempt, "invalid", "", nil},
		{"cmd", StatusFailed, NoAttempt, "", "", []byte{}},
		{"cmd", StatusPending, 1, "", "", []byte{}},
		{"cmd", StatusCancelled + 1, 1, "", "", []byte{}},
		{"cmd", StatusInDoubt, -1, "", "", []byte{}},
		{"cmd", StatusInDoubt, math.MaxInt32 + 1, "", "", []byte{}},
		{"cmd", StatusInDoubt, 2, strings.Repeat("r", MaxReasonLen), strings.Repeat("d", MaxDetailLen), []byte{}},
		{"cmd", StatusInDoubt, 2, strings.Repeat("r", MaxReasonLen+1), "", []byte{}},
		{"cmd", StatusInDoubt, 2, "", strings.Repeat("d", MaxDetailLen+1), []byte{}},
		{"cmd", StatusInDoubt, 2, "\xff\xfe", "\xc3", []byte{0}},
		{"", StatusSucceeded, 1, "", "", []byte{}},
	} {
		f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, b.id, int8(b.status), b.attempt, b.reason, b.detail, b.data)
	}
	f.Fuzz(func(t *testing.T, role, member string, producerID int64, epoch int16, atKind uint8, atOff int64,
		id string, status int8, attempt int, reason, detail string, data []byte) {
		e := fuzzHead(EntryOutcome, role, member, producerID, epoch, atKind, atOff)
		e.Outcome = &Outcome{CommandID: id, Status: Status(status), Attempt: attempt, Reason: reason, Result: Result{Detail: detail, Data: data}}
		checkEntryRoundTrip(t, e, func(e Entry) Entry {
			o := *e.Outcome
			if len(o.Result.Data) == 0 {
				o.Result.Data = nil
			}
			e.Outcome = &o
			return e
		})
	})
}

func FuzzEncodeIntake(f *testing.F) {
	for _, h := range headSeeds {
		f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, DefaultRequestsTopic, 12, int64(0), int64(42))
	}
	h := headSeeds[0]
	for _, b := range []struct {
		topic      string
		partition  int
		from, next int64
	}{
		{"", 0, 0, 0}, {strings.Repeat("t", MaxTopicLen), 0, 5, 5}, {strings.Repeat("t", MaxTopicLen+1), 0, 0, 1},
		{"t", -1, 0, 1}, {"t", math.MaxInt32 + 1, 0, 1}, {"t", 0, -1, 1}, {"t", 0, 3, 2},
		{"t", 0, math.MaxInt64, math.MaxInt64},
	} {
		f.Add(h.role, h.member, h.producerID, h.epoch, h.atKind, h.atOff, b.topic, b.partition, b.from, b.next)
	}
	f.Fuzz(func(t *testing.T, role, member string, producerID int64, epoch int16, atKind uint8, atOff int64, topic string, partition int, from, next int64) {
		e := fuzzHead(EntryIntake, role, member, producerID, epoch, atKind, atOff)
		e.Intake = &IntakePosition{Topic: topic, Partition: partition, FromOffset: from, NextOffset: next}
		checkEntryRoundTrip(t, e, func(e Entry) Entry { return e })
	})
}

// FuzzEncodeRequest checks the request value the same way: what encodes
// decodes back to the same command and to the same bytes, and the encoder
// takes exactly what the dispatcher's intake takes.
func FuzzEncodeRequest(f *testing.F) {
	for _, ts := range timeSeeds {
		f.Add("cmd-1", "", "valve", "open", []byte("p"), ts.subKind, ts.subOff, ts.dlKind, ts.dlOff, "k", "v")
	}
	f.Add("cmd-1", strings.Repeat("r", 250), "valve", "", []byte(nil), uint8(2), int64(1), uint8(2), int64(2), "", "")
	f.Add(strings.Repeat("i", 255), "controller", strings.Repeat("d", 256), "", []byte{}, uint8(2), int64(1), uint8(2), int64(2), "", "")
	f.Fuzz(func(t *testing.T, id, role, device, action string, payload []byte, subKind uint8, subOff int64, dlKind uint8, dlOff int64, attrKey, attrValue string) {
		cmd := Command{ID: id, Role: role, Device: device, Action: action, Payload: payload,
			SubmittedAt: fuzzTime(subKind, subOff), Deadline: fuzzTime(dlKind, dlOff)}
		if attrKey != "" || attrValue != "" {
			cmd.Attributes = map[string]string{attrKey: attrValue}
		}
		value, err := EncodeRequest(cmd)
		if err != nil {
			var ice *InvalidCommandError
			if !errors.As(err, &ice) {
				t.Fatalf("error %v is not an *InvalidCommandError", err)
			}
			return
		}
		got, err := DecodeRequest(value)
		if err != nil {
			t.Fatalf("%+v encoded, and its bytes do not decode: %v", cmd, err)
		}
		if want := commandAtLogPrecision(cmd); !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, want)
		}
		again, err := EncodeRequest(got)
		if err != nil || !bytes.Equal(again, value) {
			t.Fatalf("the decoded command does not encode to the same bytes: %v", err)
		}
	})
}
