package dispatch

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
