package mqtt

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

var update = flag.Bool("update", false, "rewrite testdata/envelope-mac.json from the encoders")

// macVector is the form of testdata/envelope-mac.json, the test vector
// for firmware that implements the canonical encoding in another language.
type macVector struct {
	Comment      string `json:"comment"`
	KeyID        string `json:"key_id"`
	KeyHex       string `json:"key_hex"`
	Envelope     string `json:"envelope"`
	CanonicalHex string `json:"canonical_hex"`
	MACHex       string `json:"mac_hex"`
	Reply        struct {
		Device       string `json:"device"`
		Message      string `json:"message"`
		CanonicalHex string `json:"canonical_hex"`
		MACHex       string `json:"mac_hex"`
	} `json:"reply"`
}

const vectorKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func vectorEnvelope(t testing.TB) Envelope {
	return Envelope{
		ID: "cmd-42", Role: "plant-a", Device: "valve-1", Action: "open",
		Payload: []byte(`{"percent":40}`),
		Term:    812, Token: mustToken(t, 1001, 3),
		Deadline:    time.Date(2026, 11, 30, 6, 30, 0, 123456789, time.UTC),
		SubmittedAt: time.Date(2026, 11, 30, 6, 29, 0, 0, time.UTC),
		Attributes:  map[string]string{"operator": "ana"},
	}
}

func TestEnvelopeMACVector(t *testing.T) {
	path := filepath.Join("testdata", "envelope-mac.json")
	secret, err := fence.ParseKey(vectorKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := fence.NewVerifier(fence.Key{ID: "2026-11", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	env := vectorEnvelope(t)
	canonical := env.Signed().AppendCanonical(nil)
	env.KeyID, env.MAC = keys.Sign(canonical)
	wire, err := EncodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	r := SignReply(keys, "valve-1", Reply{ID: "cmd-42", Status: StatusOK, Detail: "opened", Data: []byte(`{"percent":40}`)})
	replyWire, err := EncodeReply(r)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		var v macVector
		v.Comment = "HMAC-SHA256(key, canonical) of devices/mqtt's canonical encodings; see the package doc, section Authentication"
		v.KeyID, v.KeyHex, v.Envelope = "2026-11", vectorKeyHex, string(wire)
		v.CanonicalHex, v.MACHex = hex.EncodeToString(canonical), hex.EncodeToString(env.MAC)
		v.Reply.Device, v.Reply.Message = "valve-1", string(replyWire)
		v.Reply.CanonicalHex = hex.EncodeToString(r.Signed("valve-1").AppendCanonical(nil))
		v.Reply.MACHex = hex.EncodeToString(r.MAC)
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v macVector
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.KeyHex != vectorKeyHex || v.CanonicalHex != hex.EncodeToString(canonical) || v.MACHex != hex.EncodeToString(env.MAC) {
		t.Fatalf("the encoder disagrees with %s:\ncanonical %x\nmac       %x", path, canonical, env.MAC)
	}
	if v.Envelope != string(wire) {
		t.Fatalf("envelope in %s differs from the encoder's:\n%s\n%s", path, v.Envelope, wire)
	}
	// The device side: decode the envelope of the vector and verify it.
	got, err := DecodeEnvelope([]byte(v.Envelope))
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Verify(got.KeyID, got.Signed().AppendCanonical(nil), got.MAC); err != nil {
		t.Fatalf("the vector's envelope does not verify after decoding: %v", err)
	}
	gotReply, err := DecodeReply([]byte(v.Reply.Message))
	if err != nil {
		t.Fatal(err)
	}
	if v.Reply.MACHex != hex.EncodeToString(r.MAC) ||
		keys.Verify(gotReply.KeyID, gotReply.Signed(v.Reply.Device).AppendCanonical(nil), gotReply.MAC) != nil {
		t.Fatalf("the vector's reply does not verify")
	}
	// The domain and the version open the encoding, at the offsets the
	// package doc gives.
	if !bytes.HasPrefix(canonical, append([]byte{0, 0, 0, 25}, "krabka-dispatch/command/1"...)) ||
		canonical[29] != 0 || canonical[30] != EnvelopeVersion {
		t.Fatalf("canonical encoding opens with %x", canonical[:31])
	}
}

func TestDecodeEnvelopeRefusesMalformedMAC(t *testing.T) {
	base := `{"v":2,"id":"x","term":9,"token":"1:1","producer_id":1,"producer_epoch":1`
	mac := strings.Repeat("ab", 32)
	for name, text := range map[string]string{
		"kid without mac": base + `,"kid":"k"}`,
		"mac without kid": base + `,"mac":"` + mac + `"}`,
		"short mac":       base + `,"kid":"k","mac":"abcd"}`,
		"mac not hex":     base + `,"kid":"k","mac":"` + strings.Repeat("zz", 32) + `"}`,
		"signed v1":       `{"v":1,"id":"x","token":"1:1","producer_id":1,"producer_epoch":1,"kid":"k","mac":"` + mac + `"}`,
	} {
		if _, err := DecodeEnvelope([]byte(text)); !errors.Is(err, ErrMalformedEnvelope) {
			t.Errorf("%s: err = %v, want ErrMalformedEnvelope", name, err)
		}
	}
	if _, err := DecodeReply([]byte(`{"v":1,"id":"x","status":"ok","kid":"k"}`)); !errors.Is(err, ErrMalformedEnvelope) {
		t.Errorf("reply kid without mac: err = %v", err)
	}
}

func TestConfigKeys(t *testing.T) {
	no := false
	for name, tc := range map[string]struct {
		edit  func(*Config)
		field string
	}{
		"no keys":        {func(c *Config) { c.Verifier = nil }, "keys"},
		"keys and off":   {func(c *Config) { c.Authenticate = &no }, "authenticate"},
		"both file, env": {func(c *Config) { c.Verifier = nil; c.Keys = []KeyConfig{{ID: "a", KeyFile: "f", KeyEnv: "E"}} }, "keys[0]"},
		"neither":        {func(c *Config) { c.Verifier = nil; c.Keys = []KeyConfig{{ID: "a"}} }, "keys[0]"},
		"no id":          {func(c *Config) { c.Verifier = nil; c.Keys = []KeyConfig{{KeyEnv: "E"}} }, "keys[0].id"},
		"repeated id": {func(c *Config) {
			c.Verifier = nil
			c.Keys = []KeyConfig{{ID: "a", KeyEnv: "E"}, {ID: "a", KeyEnv: "F"}}
		}, "keys[1].id"},
		"keys and loaded": {func(c *Config) { c.Keys = []KeyConfig{{ID: "a", KeyEnv: "E"}} }, "keys"},
	} {
		c := validConfig()
		tc.edit(&c)
		var ce *ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: err = %v, want field %s", name, err, tc.field)
		}
	}
	off := validConfig()
	off.Verifier, off.Authenticate = nil, &no
	if err := off.Validate(); err != nil || off.Authenticates() {
		t.Fatalf("authenticate: false: %v", err)
	}
}

func TestLoadVerifierFromFileAndEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "k.hex")
	if err := os.WriteFile(file, []byte(vectorKeyHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KRABKA_TEST_KEY", strings.Repeat("ab", 32))
	t.Setenv("KRABKA_TEST_SHORT", strings.Repeat("ab", 31))
	v, err := LoadVerifier([]KeyConfig{{ID: "new", KeyEnv: "KRABKA_TEST_KEY"}, {ID: "old", KeyFile: file}})
	if err != nil {
		t.Fatal(err)
	}
	if v.KeyID() != "new" || strings.Join(v.KeyIDs(), ",") != "new,old" {
		t.Fatalf("key ids %v", v.KeyIDs())
	}
	for name, tc := range map[string]struct {
		k     KeyConfig
		field string
	}{
		"missing file": {KeyConfig{ID: "a", KeyFile: filepath.Join(dir, "none")}, "keys[0].key_file"},
		"unset env":    {KeyConfig{ID: "a", KeyEnv: "KRABKA_TEST_UNSET"}, "keys[0].key_env"},
		"short key":    {KeyConfig{ID: "a", KeyEnv: "KRABKA_TEST_SHORT"}, "keys[0].key_env"},
	} {
		var ce *ConfigError
		if _, err := LoadVerifier([]KeyConfig{tc.k}); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: err = %v, want field %s", name, err, tc.field)
		} else if strings.Contains(err.Error(), strings.Repeat("ab", 31)) {
			t.Errorf("%s: the error repeats the secret: %v", name, err)
		}
	}
}

// TestDispatchedEnvelopeVerifiesOnTheDevice checks that what the Device
// signs is what the device decodes, for a JSON payload with white space
// around it and for a binary one.
func TestDispatchedEnvelopeVerifiesOnTheDevice(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	got := make(chan []byte, 4)
	b.Subscribe(t, "devices/+/cmd", func(_ string, payload []byte) { got <- append([]byte(nil), payload...) })
	d := newTestDevice(t, b.URL(), nil)
	waitConnected(t, d)
	store, err := fence.Open(filepath.Join(t.TempDir(), "fence.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i, payload := range [][]byte{[]byte(" \n{\"percent\": 40}\t "), {0xff, 0x00, 0x01}} {
		cmd := testCommand("v" + string(rune('0'+i)))
		cmd.Payload = payload
		auth := coordination.Authority{Term: 3, Token: mustToken(t, 7, 1)}
		if _, err := d.DispatchUnder(context.Background(), cmd, auth); err != nil {
			t.Fatal(err)
		}
		env, err := DecodeEnvelope(<-got)
		if err != nil {
			t.Fatal(err)
		}
		if env.KeyID != "test" {
			t.Fatalf("kid %q", env.KeyID)
		}
		if _, err := store.AdmitSigned(testKeys, env.Signed(), env.KeyID, env.MAC, time.Now()); err != nil {
			t.Fatalf("payload %q: the device refuses the dispatched envelope: %v", payload, err)
		}
	}
}

func FuzzVerifyEnvelope(f *testing.F) {
	env := vectorEnvelope(f)
	env.KeyID, env.MAC = testKeys.Sign(env.Signed().AppendCanonical(nil))
	good, _ := EncodeEnvelope(env)
	f.Add(good)
	f.Add([]byte(`{"v":2,"id":"x","term":9,"token":"1:1","producer_id":1,"producer_epoch":1,"kid":"test","mac":"` + strings.Repeat("00", 32) + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := DecodeEnvelope(data)
		if err != nil {
			return
		}
		if env.MAC != nil && len(env.MAC) != fence.MACBytes {
			t.Fatalf("decoded a %d-byte mac", len(env.MAC))
		}
		err = testKeys.Verify(env.KeyID, env.Signed().AppendCanonical(nil), env.MAC)
		if err != nil {
			if !errors.Is(err, fence.ErrUnauthenticated) {
				t.Fatalf("Verify: %v, want ErrUnauthenticated", err)
			}
			return
		}
		// Whatever verifies re-encodes to an envelope that verifies: the
		// MAC binds the fields, not their spelling. (Base64 keeps the
		// payload's bytes; a JSON payload loses the white space around it.)
		again, err := encodeEnvelope(env, PayloadBase64)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		env2, err := DecodeEnvelope(again)
		if err != nil {
			t.Fatal(err)
		}
		if err := testKeys.Verify(env2.KeyID, env2.Signed().AppendCanonical(nil), env2.MAC); err != nil {
			t.Fatalf("re-encoded envelope no longer verifies: %v", err)
		}
	})
}

// TestAuthenticateFalseSendsAndTakesUnsignedMessages: with authentication
// off, as a trusted broker allows, envelopes carry no kid or mac and an
// unsigned reply settles the command.
func TestAuthenticateFalseSendsAndTakesUnsignedMessages(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	got := make(chan Envelope, 1)
	replier(t, b, func(env Envelope) (Reply, bool) {
		got <- env
		return Reply{Status: StatusOK, Detail: "unsigned"}, true
	})
	off := false
	d := newTestDevice(t, b.URL(), func(c *Config) {
		c.Verifier, c.Authenticate = nil, &off
		c.ReplyTopic = "devices/{device}/reply"
	})
	waitConnected(t, d)
	res, err := d.DispatchUnder(context.Background(), testCommand("u1"), coordination.Authority{Term: 3, Token: mustToken(t, 7, 1)})
	if err != nil || res.Detail != "unsigned" {
		t.Fatalf("dispatch = %+v, %v", res, err)
	}
	if env := <-got; env.KeyID != "" || env.MAC != nil {
		t.Fatalf("an unauthenticated device signed: kid %q mac %x", env.KeyID, env.MAC)
	}
	if d.RefusedReplies() != 0 {
		t.Fatalf("RefusedReplies = %d", d.RefusedReplies())
	}
}

// TestUnsignedReplyDoesNotSettle: with authentication on, a reply without
// a MAC is dropped and counted, and the command waits for its real reply.
func TestUnsignedReplyDoesNotSettle(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	b.Subscribe(t, "devices/+/cmd", func(_ string, payload []byte) {
		env, err := DecodeEnvelope(payload)
		if err != nil {
			return
		}
		forged, _ := EncodeReply(Reply{ID: env.ID, Status: StatusOK, Detail: "forged"})
		genuine, _ := EncodeReply(SignReply(testKeys, env.Device, Reply{ID: env.ID, Status: StatusRejected, Detail: "real"}))
		go func() {
			_ = b.Publish("devices/"+env.Device+"/reply", forged)
			_ = b.Publish("devices/"+env.Device+"/reply", genuine)
		}()
	})
	d := newTestDevice(t, b.URL(), func(c *Config) { c.ReplyTopic = "devices/{device}/reply" })
	waitConnected(t, d)
	_, err := d.DispatchUnder(context.Background(), testCommand("u2"), coordination.Authority{Term: 3, Token: mustToken(t, 7, 1)})
	var re *ReplyError
	if !errors.As(err, &re) || re.Detail != "real" {
		t.Fatalf("dispatch: %v, want the real (rejected) reply", err)
	}
	if d.RefusedReplies() != 1 {
		t.Fatalf("RefusedReplies = %d, want 1", d.RefusedReplies())
	}
}
