package dispatch

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/ from the encoders")

// at is a fixed instant at millisecond precision, in UTC as decoders return.
var at = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

func mustToken(t testing.TB, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	tok, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func sampleCommand() Command {
	return Command{
		ID:          "cmd-0001",
		Role:        "plant-a",
		Device:      "valve-7",
		Action:      "open",
		Payload:     []byte{0x01, 0x02, 0xff},
		SubmittedAt: at,
		Deadline:    at.Add(30 * time.Second),
		Attributes:  map[string]string{"operator": "ana", "reason": "drill"},
	}
}

// goldenEntries are the entries whose encodings testdata/ holds.
func goldenEntries(t testing.TB) map[string]Entry {
	tok := mustToken(t, 4001, 7)
	head := func(kind EntryKind) Entry {
		return Entry{Kind: kind, Role: "plant-a", Token: tok, Member: "node-1", At: at.Add(1500 * time.Millisecond)}
	}
	issued := head(EntryIssued)
	issued.Issued = &Issued{Command: sampleCommand()}

	redispatched := head(EntryRedispatched)
	redispatched.Redispatched = &Redispatched{CommandID: "cmd-0001", Attempt: 2, Reason: RedispatchTakeover}

	succeeded := head(EntryOutcome)
	succeeded.Outcome = &Outcome{CommandID: "cmd-0001", Status: StatusSucceeded, Attempt: 2,
		Result: Result{Detail: "acknowledged", Data: []byte("ok")}}

	rejected := head(EntryOutcome)
	rejected.Outcome = &Outcome{CommandID: "cmd-0002", Status: StatusRejected, Attempt: NoAttempt,
		Reason: "dispatch: invalid command: Device is empty"}

	intake := head(EntryIntake)
	intake.Intake = &IntakePosition{Topic: DefaultRequestsTopic, Partition: 12, FromOffset: 100, NextOffset: 164}

	checkpoint := head(EntryCheckpoint)
	// The data of a part is opaque to the entry's layout: the state of
	// version 0 keeps this vector as it was.
	checkpoint.Checkpoint = &CheckpointPart{Sequence: 3, Part: 0, Parts: 1, Data: readGolden(t, "testdata/checkpoint-state-v0.hex")}

	return map[string]Entry{
		"checkpoint":       checkpoint,
		"issued":           issued,
		"redispatched":     redispatched,
		"outcome-success":  succeeded,
		"outcome-rejected": rejected,
		"intake":           intake,
	}
}

func goldenRequests() map[string]Command {
	minimal := Command{ID: "r-1", Device: "relay-1", SubmittedAt: at}
	return map[string]Command{
		"request-full":    sampleCommand(),
		"request-minimal": minimal,
	}
}

// golden compares data with the hex in testdata/name, or rewrites the file
// under -update.
func golden(t *testing.T, name string, data []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".hex")
	if *update {
		if err := os.WriteFile(path, []byte(hex.EncodeToString(data)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readGolden(t, path)
	if !bytes.Equal(data, want) {
		t.Errorf("%s:\n got %x\nwant %x", path, data, want)
	}
}

func readGolden(t testing.TB, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to write it)", err)
	}
	data, err := hex.DecodeString(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return data
}

func TestEntryGolden(t *testing.T) {
	for name, e := range goldenEntries(t) {
		t.Run(name, func(t *testing.T) {
			key, value, err := EncodeEntry(e)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "entry-"+name+".key", key)
			golden(t, "entry-"+name+".value", value)
			if *update {
				return
			}
			got, err := DecodeEntry(readGolden(t, filepath.Join("testdata", "entry-"+name+".key.hex")),
				readGolden(t, filepath.Join("testdata", "entry-"+name+".value.hex")))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, e) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, e)
			}
		})
	}
}

func TestRequestGolden(t *testing.T) {
	for name, cmd := range goldenRequests() {
		t.Run(name, func(t *testing.T) {
			value, err := EncodeRequest(cmd)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name, value)
			if *update {
				return
			}
			got, err := DecodeRequest(readGolden(t, filepath.Join("testdata", name+".hex")))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, cmd) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, cmd)
			}
		})
	}
}

// TestEntryLayoutBytes spells out one value byte by byte, as the package doc
// documents it, so the doc and the encoder cannot drift apart unnoticed.
func TestEntryLayoutBytes(t *testing.T) {
	e := Entry{Kind: EntryRedispatched, Role: "r", Token: mustToken(t, 5, 2), Member: "m1",
		At: time.UnixMilli(0x0102030405).UTC(), Redispatched: &Redispatched{CommandID: "c", Attempt: 3, Reason: RedispatchOperator}}
	key, value, err := EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	wantKey := []byte{0, 0, 0, 2, 0, 1, 'r', 0, 1, 'c'}
	wantValue := []byte{
		0, 0, // version
		0, 0, 0, 0, 0, 0, 0, 5, // producer id
		0, 2, // producer epoch
		0, 2, 'm', '1', // member
		0, 0, 0, 1, 2, 3, 4, 5, // at
		0, 0, 0, 3, // attempt
		2, // reason operator
	}
	if !bytes.Equal(key, wantKey) || !bytes.Equal(value, wantValue) {
		t.Errorf("got key %x value %x\nwant key %x value %x", key, value, wantKey, wantValue)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	for name, e := range goldenEntries(t) {
		key, value, err := EncodeEntry(e)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := DecodeEntry(key, value)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip\n%+v\nwant\n%+v", name, got, e)
		}
	}
}

func TestEncodeEntryIssuedTakesEntryRole(t *testing.T) {
	e := goldenEntries(t)["issued"]
	cmd := sampleCommand()
	cmd.Role = ""
	e.Issued = &Issued{Command: cmd}
	key, value, err := EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEntry(key, value)
	if err != nil {
		t.Fatal(err)
	}
	if got.Issued.Command.Role != e.Role {
		t.Errorf("decoded role %q, want the entry's %q", got.Issued.Command.Role, e.Role)
	}

	cmd.Role = "other"
	e.Issued = &Issued{Command: cmd}
	if _, _, err := EncodeEntry(e); !errors.Is(err, errCommandRole) {
		t.Errorf("a command of another role encoded: %v", err)
	}
}

func TestEncodeEntryRefuses(t *testing.T) {
	base := goldenEntries(t)
	cases := map[string]func(e *Entry){
		"unknown kind":    func(e *Entry) { e.Kind = 9 },
		"two bodies":      func(e *Entry) { e.Intake = &IntakePosition{Topic: "t", NextOffset: 1} },
		"wrong body":      func(e *Entry) { e.Kind = EntryOutcome },
		"empty role":      func(e *Entry) { e.Role = "" },
		"empty member":    func(e *Entry) { e.Member = "" },
		"zero at":         func(e *Entry) { e.At = time.Time{} },
		"no epoch":        func(e *Entry) { e.Token = coordination.NoEpoch },
		"invalid command": func(e *Entry) { e.Issued = &Issued{Command: Command{ID: "x"}} },
	}
	for name, change := range cases {
		e := base["issued"]
		change(&e)
		if _, _, err := EncodeEntry(e); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	bodies := map[string]Entry{}
	o := base["outcome-success"]
	o.Outcome = &Outcome{CommandID: "c", Status: StatusPending, Attempt: 1}
	bodies["pending status"] = o
	o = base["outcome-success"]
	o.Outcome = &Outcome{CommandID: "c", Status: StatusFailed, Attempt: NoAttempt}
	bodies["failed without attempt"] = o
	o = base["outcome-success"]
	o.Outcome = &Outcome{CommandID: "c", Status: StatusFailed, Attempt: 1, Reason: strings.Repeat("x", MaxReasonLen+1)}
	bodies["long reason"] = o
	o = base["outcome-success"]
	o.Outcome = &Outcome{CommandID: "", Status: StatusFailed, Attempt: 1}
	bodies["outcome without id"] = o
	d := base["redispatched"]
	d.Redispatched = &Redispatched{CommandID: "c", Attempt: 1, Reason: RedispatchTakeover}
	bodies["redispatch of attempt 1"] = d
	d = base["redispatched"]
	d.Redispatched = &Redispatched{CommandID: "c", Attempt: 2}
	bodies["redispatch without reason"] = d
	i := base["intake"]
	i.Intake = &IntakePosition{Topic: "t", FromOffset: 5, NextOffset: 4}
	bodies["intake backwards"] = i
	i = base["intake"]
	i.Intake = &IntakePosition{Topic: "", NextOffset: 4}
	bodies["intake without topic"] = i
	for name, e := range bodies {
		if _, _, err := EncodeEntry(e); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

// TestDecodeEntryFormatErrors feeds malformed keys and values and wants a
// *LogFormatError naming the part.
func TestDecodeEntryFormatErrors(t *testing.T) {
	e := goldenEntries(t)["outcome-success"]
	key, value, err := EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	ikey, ivalue, err := EncodeEntry(goldenEntries(t)["issued"])
	if err != nil {
		t.Fatal(err)
	}
	with := func(b []byte, at int, v ...byte) []byte {
		c := append([]byte(nil), b...)
		copy(c[at:], v)
		return c
	}
	cases := []struct {
		name       string
		key, value []byte
		part       string
	}{
		{"empty key", nil, value, "entry key"},
		{"key version", with(key, 0, 0, 1), value, "entry key"},
		{"unknown kind", with(key, 2, 0, 9), value, "entry key"},
		{"negative role length", with(key, 4, 0xff, 0xff), value, "entry key"},
		{"trailing key byte", append(append([]byte(nil), key...), 0), value, "entry key"},
		{"truncated key", key[:len(key)-1], value, "entry key"},
		{"intake key with id", with(key, 2, 0, 4), nil, "entry key"},
		{"empty value", key, nil, "entry value"},
		{"value version", key, with(value, 0, 0, 1), "entry value"},
		{"negative producer id", key, with(value, 2, 0x80), "entry value"},
		{"negative epoch", key, with(value, 10, 0x80), "entry value"},
		{"truncated value", key, value[:len(value)-1], "entry value"},
		{"trailing value byte", key, append(append([]byte(nil), value...), 0), "entry value"},
		{"unknown status", key, with(value, 28, 0), "entry value"},
		{"key id differs from command", with(ikey, len(ikey)-1, 'X'), ivalue, "entry value"},
	}
	for _, c := range cases {
		_, err := DecodeEntry(c.key, c.value)
		var fe *LogFormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: got %v, want a *LogFormatError", c.name, err)
			continue
		}
		if fe.Part != c.part {
			t.Errorf("%s: part %q, want %q (%v)", c.name, fe.Part, c.part, err)
		}
	}
}

func TestDecodeEntryInvalidCommandUnwraps(t *testing.T) {
	e := goldenEntries(t)["issued"]
	key, value, err := EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	// The deadline is the 8 bytes before the attribute count; make it equal
	// to the submission time, which Validate refuses.
	c := sampleCommand()
	tail := 2
	for k, v := range c.Attributes {
		tail += 4 + len(k) + len(v)
	}
	deadlineAt := len(value) - tail - 8
	bad := append([]byte(nil), value...)
	copy(bad[deadlineAt:], value[deadlineAt-8:deadlineAt])
	_, err = DecodeEntry(key, bad)
	var ice *InvalidCommandError
	if !errors.As(err, &ice) || ice.Field != "Deadline" {
		t.Fatalf("got %v, want an *InvalidCommandError for Deadline", err)
	}
	var fe *LogFormatError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want it inside a *LogFormatError", err)
	}
}

// TestDecodeBoundsAllocation makes sure a length near the int32 maximum is
// refused before any allocation: the input is tiny, so reading it must fail
// on the bound, not on memory.
func TestDecodeBoundsAllocation(t *testing.T) {
	value := []byte{0, 0, 0, 1, 'x', 0, 0, 0, 1, 'd', 0, 0, 0x7f, 0xff, 0xff, 0xff}
	_, err := DecodeRequest(value)
	var fe *LogFormatError
	if !errors.As(err, &fe) || !strings.Contains(fe.Error(), "limit") {
		t.Fatalf("got %v, want a bound error", err)
	}
	allocs := testing.AllocsPerRun(10, func() { _, _ = DecodeRequest(value) })
	if allocs > 20 {
		t.Errorf("%v allocations decoding a 16-byte value", allocs)
	}
}

func TestStatus(t *testing.T) {
	terminal := map[Status]bool{
		StatusPending: false, StatusSucceeded: true, StatusFailed: true, StatusExpired: true,
		StatusRejected: true, StatusInDoubt: false, StatusCancelled: true,
	}
	names := map[string]bool{}
	for s, want := range terminal {
		if s.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", s, !want)
		}
		names[s.String()] = true
	}
	if len(names) != len(terminal) {
		t.Errorf("status names are not distinct: %v", names)
	}
	if got := Status(42).String(); got != "Status(42)" {
		t.Errorf("unknown status named %q", got)
	}
}

func TestClipText(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	got := clipText(s, 10)
	if len(got) > 10 || !strings.HasSuffix(got, "…") || !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
		t.Errorf("clipText = %q", got)
	}
	if clipText("short", 10) != "short" {
		t.Error("clipText changed a short text")
	}
}

// TestATimeTheLogCannotHoldIsRefusedBeforeAnythingIsWritten: a time within
// the first millisecond after the zero time would be written as the zero
// time, which no decoder takes back. Submit refuses such a command at once,
// and the encoders refuse it too, so no such record reaches the log.
func TestATimeTheLogCannotHoldIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	almostZero := time.Time{}.Add(500 * time.Microsecond)
	past9999 := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		field string
		edit  func(*Command)
	}{
		{"submitted within the zero millisecond", "SubmittedAt", func(c *Command) { c.SubmittedAt = almostZero }},
		{"deadline within the zero millisecond", "Deadline", func(c *Command) { c.Deadline = almostZero }},
		{"deadline after year 9999", "Deadline", func(c *Command) { c.Deadline = past9999 }},
		{"submitted before year 1", "SubmittedAt", func(c *Command) { c.SubmittedAt = time.Time{}.Add(-time.Hour) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cmd := newCommand("c", "valve", time.Hour)
				tc.edit(&cmd)
				var ice *InvalidCommandError
				if err := cmd.Validate(); !errors.As(err, &ice) || ice.Field != tc.field {
					t.Errorf("Validate: %v, want an *InvalidCommandError of %s", err, tc.field)
				}
				cmd.Role = "controller"
				if _, _, err := EncodeEntry(Entry{Kind: EntryIssued, Role: "controller", Member: "m", Token: mustToken(t, 1, 0), At: at, Issued: &Issued{Command: cmd}}); err == nil {
					t.Error("EncodeEntry took the command")
				}
				if _, err := EncodeRequest(cmd); err == nil {
					t.Error("EncodeRequest took the command")
				}
				h := newHarness(t, nil, map[string]Device{"valve": &recordingDevice{log: &leaderLog{}, t: t}})
				h.start(t.Context())
				if _, err := h.d.Submit(t.Context(), cmd); !errors.As(err, &ice) || ice.Field != tc.field {
					t.Errorf("Submit: %v, want an *InvalidCommandError of %s", err, tc.field)
				}
				synctest.Wait()
				if n := len(h.log.entries(t)); n != 0 {
					t.Errorf("%d records written", n)
				}
				h.stop()
			})
		})
	}
	for _, when := range []time.Time{almostZero, past9999, {}} {
		e := Entry{Kind: EntryIntake, Role: "controller", Member: "m", Token: mustToken(t, 1, 0), At: when,
			Intake: &IntakePosition{Topic: "t", FromOffset: 0, NextOffset: 1}}
		if _, _, err := EncodeEntry(e); err == nil {
			t.Errorf("EncodeEntry took an entry written at %v", when)
		}
	}
	if got := (time.Time{}).UnixMilli(); got != zeroTimeMillis {
		t.Errorf("zeroTimeMillis is %d, the zero time is at %d", zeroTimeMillis, got)
	}
	if got := time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC).UnixMilli(); got != maxTimeMillis {
		t.Errorf("maxTimeMillis is %d, the last millisecond of 9999 is %d", maxTimeMillis, got)
	}
}

func TestStampTokenMatchesCodec(t *testing.T) {
	e := Entry{Kind: EntryOutcome, Role: "controller", Member: "node-1", Token: standInToken(), At: time.UnixMilli(1_700_000_000_000),
		Outcome: &Outcome{CommandID: "c", Status: StatusSucceeded, Attempt: FirstAttempt}}
	key, value, err := EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	want := fakeToken(t, 1<<40+5, 32000)
	stampToken(value, want)
	got, err := DecodeEntry(key, value)
	if err != nil {
		t.Fatal(err)
	}
	if got.Token != want || got.Member != "node-1" || got.Outcome.CommandID != "c" {
		t.Errorf("decoded %+v after stamping %s", got, want)
	}
}

// TestKeyRole checks that the role read from a key alone, as a read of one
// role's records skips the others, is the role DecodeEntry reads, and that
// a key that does not begin as DecodeEntry reads it names no role.
func TestKeyRole(t *testing.T) {
	for name, e := range goldenEntries(t) {
		for _, role := range []string{"plant-a", "r", strings.Repeat("x", coordination.MaxRoleLen)} {
			e.Role = role
			if e.Issued != nil {
				issued := *e.Issued
				issued.Command.Role = role
				e.Issued = &issued
			}
			key, value, err := EncodeEntry(e)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, ok := keyRole(key)
			if !ok || string(got) != role {
				t.Fatalf("%s: keyRole gives %q %t, want %q", name, got, ok, role)
			}
			if d, err := DecodeEntry(key, value); err != nil || d.Role != string(got) {
				t.Fatalf("%s: DecodeEntry reads role %q, %v", name, d.Role, err)
			}
			for n := range 6 + len(role) {
				if _, ok := keyRole(key[:n]); ok {
					t.Fatalf("%s: the first %d bytes of a key name a role", name, n)
				}
			}
			other := append([]byte(nil), key...)
			other[1] = 9 // an unknown version
			if _, ok := keyRole(other); ok {
				t.Fatalf("%s: a key of an unknown version names a role", name)
			}
		}
	}
}
