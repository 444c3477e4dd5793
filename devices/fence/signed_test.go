package fence

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

var (
	keyA = bytes.Repeat([]byte{0xa1}, MinKeyBytes)
	keyB = bytes.Repeat([]byte{0xb2}, MinKeyBytes)
	keyX = bytes.Repeat([]byte{0x99}, MinKeyBytes) // the forger's
	now  = time.Date(2026, 11, 30, 6, 29, 30, 0, time.UTC)
)

func verifier(t *testing.T, keys ...Key) *Verifier {
	t.Helper()
	v, err := NewVerifier(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func command(t *testing.T, id string, term int64) Command {
	return Command{
		Version: 2, Term: coordination.Term(term), Token: tok(t, 1001, 3),
		Role: "plant-a", ID: id, Device: "valve-1", Action: "open",
		Payload: []byte(`{"percent":40}`), Deadline: now.Add(time.Minute),
	}
}

func sign(v *Verifier, c Command) (string, []byte) { return v.Sign(c.AppendCanonical(nil)) }

func admitSigned(s *Store, v, signer *Verifier, c Command) (Admission, error) {
	kid, mac := sign(signer, c)
	return s.AdmitSigned(v, c, kid, mac, now)
}

func TestAdmitSignedRefusesForgeryWithoutTouchingState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	s := openStore(t, path)
	device := verifier(t, Key{ID: "k1", Secret: keyA})
	if _, err := admitSigned(s, device, device, command(t, "c1", 5)); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	forger := verifier(t, Key{ID: "k1", Secret: keyX})
	for _, term := range []int64{4, 5, 6, math.MaxInt64} {
		if _, err := admitSigned(s, device, forger, command(t, "forged", term)); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("forged term %d: err = %v, want ErrUnauthenticated", term, err)
		}
	}
	// An authentic envelope altered after signing: the term is raised.
	c := command(t, "c2", 6)
	kid, mac := sign(device, c)
	c.Term = math.MaxInt64
	if _, err := s.AdmitSigned(device, c, kid, mac, now); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("altered term: err = %v", err)
	}
	c = command(t, "c2", 6)
	c.Payload = []byte(`{"percent":100}`)
	if _, err := s.AdmitSigned(device, c, kid, mac, now); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("altered payload: err = %v", err)
	}
	if _, err := s.AdmitSigned(device, command(t, "c2", 6), "k1", nil, now); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("no mac: err = %v", err)
	}
	var ae *AuthError
	if _, err := s.AdmitSigned(device, command(t, "c2", 6), "k9", mac, now); !errors.As(err, &ae) || ae.Reason != "unknown key id" {
		t.Fatalf("unknown kid: err = %v", err)
	}

	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("state file changed by forgeries:\n%s\n---\n%s", before, after)
	}
	if h, _ := s.Highest("valve-1"); h.Term != 5 {
		t.Fatalf("highest term = %s, want 5", h.Term)
	}
	// The real leader, and its successor, are still admitted.
	if _, err := admitSigned(s, device, device, command(t, "c3", 5)); err != nil {
		t.Fatalf("real leader refused after forgeries: %v", err)
	}
	if _, err := admitSigned(s, device, device, command(t, "c4", 6)); err != nil {
		t.Fatalf("successor refused after forgeries: %v", err)
	}
	if _, err := admitSigned(s, device, device, command(t, "c5", 5)); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("deposed leader: err = %v, want ErrStaleTerm", err)
	}
}

func TestAdmitSignedRefusesReplayAndExpired(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "fence.json"))
	v := verifier(t, Key{ID: "k1", Secret: keyA})
	c := command(t, "c1", 5)
	kid, mac := sign(v, c)
	if _, err := s.AdmitSigned(v, c, kid, mac, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdmitSigned(v, c, kid, mac, now); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: err = %v, want ErrReplayed", err)
	}
	// A replay after a later command of the same term is still refused.
	if _, err := admitSigned(s, v, v, command(t, "c2", 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdmitSigned(v, c, kid, mac, now); !errors.Is(err, ErrReplayed) {
		t.Fatalf("later replay: err = %v, want ErrReplayed", err)
	}
	if _, err := s.AdmitSigned(v, c, kid, mac, c.Deadline.Add(time.Nanosecond)); !errors.Is(err, ErrExpired) {
		t.Fatalf("past deadline: err = %v, want ErrExpired", err)
	}
	// After a restart the ids are forgotten; the deadline still refuses.
	again := openStore(t, s.Path())
	if _, err := again.AdmitSigned(v, c, kid, mac, c.Deadline.Add(time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("replay after restart past deadline: err = %v", err)
	}
}

func TestRecentIDsAreBounded(t *testing.T) {
	var r idRing
	r.ids = make(map[string]struct{})
	for i := range MaxRecentIDs + 1 {
		r.add(string(rune('a'+i%26)) + string(rune(i)))
	}
	if len(r.ids) != MaxRecentIDs || len(r.order) != MaxRecentIDs {
		t.Fatalf("ring holds %d ids, %d in order, want %d", len(r.ids), len(r.order), MaxRecentIDs)
	}
	if r.has("a" + string(rune(0))) {
		t.Fatal("oldest id not forgotten")
	}
}

func TestRotationAcceptsBothKeysThenOnlyTheNew(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "fence.json"))
	old := verifier(t, Key{ID: "2026-01", Secret: keyA})
	rotating := verifier(t, Key{ID: "2026-02", Secret: keyB}, Key{ID: "2026-01", Secret: keyA})
	rotated := verifier(t, Key{ID: "2026-02", Secret: keyB})

	if _, err := admitSigned(s, rotating, old, command(t, "c1", 5)); err != nil {
		t.Fatalf("old key during rotation: %v", err)
	}
	if _, err := admitSigned(s, rotating, rotating, command(t, "c2", 5)); err != nil {
		t.Fatalf("new key during rotation: %v", err)
	}
	if kid, _ := sign(rotating, command(t, "x", 5)); kid != "2026-02" {
		t.Fatalf("rotating verifier signs with %q, want the first key", kid)
	}
	if _, err := admitSigned(s, rotated, old, command(t, "c3", 5)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("old key after rotation: err = %v", err)
	}
	if _, err := admitSigned(s, rotated, rotated, command(t, "c4", 5)); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
}

func resetCommand(t *testing.T, id string, term int64, payload string) Command {
	c := command(t, id, term)
	c.Action = ResetAction
	c.Payload = []byte(payload)
	return c
}

func TestResetLowersTheFloorOnceAndOnlyWithTheKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	s := openStore(t, path)
	v := verifier(t, Key{ID: "k1", Secret: keyA})
	if _, err := admitSigned(s, v, v, command(t, "c1", 9000)); err != nil {
		t.Fatal(err)
	}
	// The new cluster's leader has term 3: stale before the reset.
	if _, err := admitSigned(s, v, v, command(t, "n1", 3)); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("before reset: err = %v", err)
	}
	forger := verifier(t, Key{ID: "k1", Secret: keyX})
	reset := resetCommand(t, "reset-1", 3, `{"floor":2,"reason":"move to cluster b"}`)
	if _, err := admitSigned(s, v, forger, reset); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("forged reset: err = %v", err)
	}
	adm, err := admitSigned(s, v, v, reset)
	if err != nil || !adm.Reset || adm.Floor != 2 || adm.Reason != "move to cluster b" {
		t.Fatalf("reset = %+v, %v", adm, err)
	}
	if _, err := admitSigned(s, v, v, command(t, "n2", 3)); err != nil {
		t.Fatalf("after reset: %v", err)
	}
	if _, err := admitSigned(s, v, v, command(t, "n3", 1)); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("below the floor: err = %v", err)
	}
	// A restart keeps the reset's id: its replay is refused, not applied.
	again := openStore(t, path)
	if _, err := admitSigned(again, v, v, reset); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replayed reset: err = %v", err)
	}
	if h, _ := again.Highest("valve-1"); h.Term != 3 {
		t.Fatalf("highest after replayed reset = %s, want 3", h.Term)
	}
	for name, payload := range map[string]string{
		"no floor":    `{"reason":"x"}`,
		"zero floor":  `{"floor":0,"reason":"x"}`,
		"no reason":   `{"floor":2}`,
		"not json":    `floor=2`,
		"extra field": `{"floor":2,"reason":"x","force":true}`,
	} {
		if _, err := admitSigned(again, v, v, resetCommand(t, "bad-"+name, 3, payload)); !errors.Is(err, ErrBadReset) {
			t.Errorf("%s: err = %v, want ErrBadReset", name, err)
		}
	}
	noDeadline := resetCommand(t, "reset-2", 3, `{"floor":2,"reason":"x"}`)
	noDeadline.Deadline = time.Time{}
	if _, err := admitSigned(again, v, v, noDeadline); !errors.Is(err, ErrBadReset) {
		t.Errorf("reset without deadline: err = %v", err)
	}
}

func TestParseKeyAndNewVerifier(t *testing.T) {
	good := "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1\n"
	if k, err := ParseKey(good); err != nil || !bytes.Equal(k, keyA) {
		t.Fatalf("ParseKey = %x, %v", k, err)
	}
	for _, bad := range []string{"", "a1a1", good[:62], "zz" + good[2:]} {
		if _, err := ParseKey(bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseKey(%q): err = %v", bad, err)
		}
	}
	for name, keys := range map[string][]Key{
		"none":      nil,
		"no id":     {{Secret: keyA}},
		"repeated":  {{ID: "a", Secret: keyA}, {ID: "a", Secret: keyB}},
		"too short": {{ID: "a", Secret: keyA[:31]}},
	} {
		if _, err := NewVerifier(keys...); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// FuzzAdmitSigned admits authentic commands with arbitrary actions,
// payloads and terms: nothing panics, every refusal is typed, and the state
// file always opens again.
func FuzzAdmitSigned(f *testing.F) {
	f.Add("open", []byte(`{"percent":40}`), int64(5))
	f.Add(ResetAction, []byte(`{"floor":2,"reason":"move"}`), int64(1))
	f.Add(ResetAction, []byte(`{"floor":-1,"reason":""}`), int64(0))
	f.Add(ResetAction, []byte(`{"floor":2,"reason":"x"} trailing`), int64(9))
	f.Fuzz(func(t *testing.T, action string, payload []byte, term int64) {
		path := filepath.Join(t.TempDir(), "fence.json")
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := NewVerifier(Key{ID: "k1", Secret: keyA})
		c := Command{Version: 2, Term: coordination.Term(term), Token: tok(t, 1, 1), ID: "c", Device: "d",
			Action: action, Payload: payload, Deadline: now.Add(time.Minute)}
		kid, mac := v.Sign(c.AppendCanonical(nil))
		_, err = s.AdmitSigned(v, c, kid, mac, now)
		switch {
		case err == nil, errors.Is(err, ErrBadReset), errors.Is(err, ErrNoTerm):
		default:
			t.Fatalf("AdmitSigned: %v", err)
		}
		if _, err := Open(path); err != nil {
			t.Fatalf("state file does not open after AdmitSigned: %v", err)
		}
	})
}
