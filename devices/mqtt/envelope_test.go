package mqtt

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

func mustToken(t testing.TB, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	tok, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func sampleEnvelope(t testing.TB, payload []byte) Envelope {
	return Envelope{
		ID:          "cmd-42",
		Role:        "plant-a",
		Device:      "valve-1",
		Action:      "open",
		Payload:     payload,
		Term:        812,
		Token:       mustToken(t, 1001, 3),
		Deadline:    time.Date(2026, 11, 30, 6, 30, 0, 123456789, time.UTC),
		SubmittedAt: time.Date(2026, 11, 30, 6, 29, 0, 0, time.UTC),
		Attributes:  map[string]string{"operator": "ana"},
	}
}

func TestEnvelopeWireForm(t *testing.T) {
	b, err := EncodeEnvelope(sampleEnvelope(t, []byte(`{"percent": 40}`)))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":2,"id":"cmd-42","role":"plant-a","device":"valve-1","action":"open","payload":{"percent": 40},` +
		`"term":812,"token":"1001:3","producer_id":1001,"producer_epoch":3,"deadline":"2026-11-30T06:30:00.123456789Z",` +
		`"submitted_at":"2026-11-30T06:29:00Z","attributes":{"operator":"ana"}}`
	if string(b) != want {
		t.Fatalf("wire form\n got %s\nwant %s", b, want)
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	cases := []struct {
		name     string
		payload  []byte
		encoding string
		field    string // the JSON field that must carry it
	}{
		{"json object", []byte(`{"a":[1,2,"<&>"]}`), PayloadAuto, "payload"},
		{"json number", []byte(`42`), PayloadAuto, "payload"},
		{"json null", []byte(`null`), PayloadAuto, "payload"},
		{"json string", []byte(`"on"`), PayloadJSON, "payload"},
		{"binary", []byte{0, 1, 2, 0xff}, PayloadAuto, "payload_base64"},
		{"text not json", []byte(`open 40%`), PayloadAuto, "payload_base64"},
		{"json forced to base64", []byte(`{"a": 1}`), PayloadBase64, "payload_base64"},
		{"empty", nil, PayloadAuto, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := sampleEnvelope(t, tc.payload)
			b, err := encodeEnvelope(in, tc.encoding)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"payload", "payload_base64"} {
				if _, ok := raw[f]; ok != (f == tc.field) {
					t.Fatalf("field %q present=%v in %s", f, ok, b)
				}
			}
			out, err := DecodeEnvelope(b)
			if err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if !bytes.Equal(out.Payload, in.Payload) {
				t.Fatalf("payload %q, want %q", out.Payload, in.Payload)
			}
			if out.ID != in.ID || out.Role != in.Role || out.Device != in.Device || out.Action != in.Action ||
				out.Term != in.Term || out.Token != in.Token || !out.Deadline.Equal(in.Deadline) || !out.SubmittedAt.Equal(in.SubmittedAt) ||
				out.Attributes["operator"] != "ana" {
				t.Fatalf("decoded %+v, want %+v", out, in)
			}
		})
	}
}

func TestEnvelopeEmbedsJSONPayloadByteForByte(t *testing.T) {
	payload := []byte("{ \"a\" :\n [1, 2] }")
	b, err := EncodeEnvelope(sampleEnvelope(t, payload))
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Payload, payload) {
		t.Fatalf("payload %q, want %q", out.Payload, payload)
	}
}

// TestEnvelopeEncoderAgreesWithEncodingJSON checks the hand-written encoder
// against encoding/json on text that needs escaping.
func TestEnvelopeEncoderAgreesWithEncodingJSON(t *testing.T) {
	texts := []string{"plain", `quote " and \\ back`, "tab\tnew\nline\r", "ctl \x00\x01\x1f\x7f", "<html>&", "ünïcødé ✓ \u2028\u2029", ""}
	for _, s := range texts {
		env := sampleEnvelope(t, []byte(s))
		env.ID, env.Action = "id-"+s, s
		env.Attributes = map[string]string{s: s, "z": "1", "a": s}
		got, err := EncodeEnvelope(env)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		id, epoch, term := env.Token.ProducerID(), env.Token.ProducerEpoch(), int64(env.Term)
		w := wireEnvelope{V: EnvelopeVersion, ID: env.ID, Role: env.Role, Device: env.Device, Action: env.Action, Term: &term, Token: env.Token.String(),
			ProducerID: &id, ProducerEpoch: &epoch, Deadline: env.Deadline, SubmittedAt: env.SubmittedAt, Attributes: env.Attributes}
		if s != "" {
			w.PayloadBase64 = []byte(s)
		}
		want, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		var g, wnt any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%q: invalid JSON %s: %v", s, got, err)
		}
		if err := json.Unmarshal(want, &wnt); err != nil {
			t.Fatal(err)
		}
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(wnt)
		if !bytes.Equal(gb, wb) {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
	}
}

func TestEnvelopeRefusesInvalidUTF8AndYears(t *testing.T) {
	env := sampleEnvelope(t, nil)
	env.ID = "bad\xff"
	if _, err := EncodeEnvelope(env); !errors.Is(err, errNotUTF8) {
		t.Fatalf("invalid UTF-8 id: %v", err)
	}
	env = sampleEnvelope(t, nil)
	env.Deadline = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := EncodeEnvelope(env); err == nil {
		t.Fatal("deadline in year 10000 encoded")
	}
	env = sampleEnvelope(t, nil)
	env.Term = -1
	if _, err := EncodeEnvelope(env); err == nil {
		t.Fatal("negative term encoded")
	}
}

// TestEnvelopeCarriesNoTermAsZero encodes an envelope without a term, as
// Dispatch sends it: "term" is 0 and decodes as NoTerm.
func TestEnvelopeCarriesNoTermAsZero(t *testing.T) {
	env := sampleEnvelope(t, nil)
	env.Term = coordination.NoTerm
	b, err := EncodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"term":0,"token":"1001:3"`) {
		t.Fatalf("no zero term beside the token: %s", b)
	}
	out, err := DecodeEnvelope(b)
	if err != nil || out.Term != coordination.NoTerm || out.Authority() != (coordination.Authority{Token: env.Token}) {
		t.Fatalf("decode = %+v, %v", out, err)
	}
}

// TestDecodeEnvelopeVersionOne reads envelopes written before terms: they
// decode with NoTerm, even one that holds a "term" field it did not define.
func TestDecodeEnvelopeVersionOne(t *testing.T) {
	for _, in := range []string{
		`{"v":1,"id":"x","device":"valve-1","token":"900:4","producer_id":900,"producer_epoch":4}`,
		`{"v":1,"id":"x","device":"valve-1","term":55,"token":"900:4","producer_id":900,"producer_epoch":4}`,
	} {
		env, err := DecodeEnvelope([]byte(in))
		if err != nil {
			t.Fatalf("DecodeEnvelope(%s) = %v", in, err)
		}
		if env.Term != coordination.NoTerm || env.Token != mustToken(t, 900, 4) || env.Device != "valve-1" {
			t.Fatalf("DecodeEnvelope(%s) = %+v", in, env)
		}
	}
}

func TestEnvelopeOmitsUnsetTimes(t *testing.T) {
	env := sampleEnvelope(t, nil)
	env.Deadline, env.SubmittedAt = time.Time{}, time.Time{}
	b, err := EncodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "deadline") || strings.Contains(string(b), "submitted_at") {
		t.Fatalf("unset times encoded: %s", b)
	}
	out, err := DecodeEnvelope(b)
	if err != nil || !out.Deadline.IsZero() {
		t.Fatalf("decode = %+v, %v", out, err)
	}
}

func TestEnvelopeJSONEncodingRefusesNonJSON(t *testing.T) {
	if _, err := encodeEnvelope(sampleEnvelope(t, []byte("not json")), PayloadJSON); !errors.Is(err, errPayloadNotJSON) {
		t.Fatalf("encode = %v, want errPayloadNotJSON", err)
	}
}

func TestDecodeEnvelopeRejectsMalformed(t *testing.T) {
	cases := map[string]string{
		"not json":        `{"v":2,`,
		"version 3":       `{"v":3,"id":"x","term":5,"token":"1:1","producer_id":1,"producer_epoch":1}`,
		"no version":      `{"id":"x","term":5,"token":"1:1","producer_id":1,"producer_epoch":1}`,
		"no id":           `{"v":2,"term":5,"token":"1:1","producer_id":1,"producer_epoch":1}`,
		"no term":         `{"v":2,"id":"x","token":"1:1","producer_id":1,"producer_epoch":1}`,
		"negative term":   `{"v":2,"id":"x","term":-5,"token":"1:1","producer_id":1,"producer_epoch":1}`,
		"term a string":   `{"v":2,"id":"x","term":"5","token":"1:1","producer_id":1,"producer_epoch":1}`,
		"term a fraction": `{"v":2,"id":"x","term":5.5,"token":"1:1","producer_id":1,"producer_epoch":1}`,
		"no token":        `{"v":2,"id":"x","term":5,"producer_id":1,"producer_epoch":1}`,
		"bad token":       `{"v":2,"id":"x","term":5,"token":"1:-1","producer_id":1,"producer_epoch":-1}`,
		"numbers missing": `{"v":2,"id":"x","term":5,"token":"1:1"}`,
		"numbers differ":  `{"v":2,"id":"x","term":5,"token":"1:1","producer_id":1,"producer_epoch":2}`,
		"both payloads":   `{"v":2,"id":"x","term":5,"token":"1:1","producer_id":1,"producer_epoch":1,"payload":1,"payload_base64":"AA=="}`,
		"bad base64":      `{"v":2,"id":"x","term":5,"token":"1:1","producer_id":1,"producer_epoch":1,"payload_base64":"!!"}`,
		"bad deadline":    `{"v":2,"id":"x","term":5,"token":"1:1","producer_id":1,"producer_epoch":1,"deadline":"tomorrow"}`,
		"v1 no token":     `{"v":1,"id":"x","producer_id":1,"producer_epoch":1}`,
	}
	for name, in := range cases {
		if _, err := DecodeEnvelope([]byte(in)); !errors.Is(err, ErrMalformedEnvelope) {
			t.Fatalf("%s: DecodeEnvelope = %v, want ErrMalformedEnvelope", name, err)
		}
	}
	var ve *VersionError
	if _, err := DecodeEnvelope([]byte(cases["version 3"])); !errors.As(err, &ve) || ve.Version != 3 || ve.Reply {
		t.Fatalf("version 3: want a *VersionError with Version 3, got %v", err)
	}
}

func TestDecodeEnvelopeIgnoresUnknownFields(t *testing.T) {
	in := `{"v":2,"id":"x","term":31,"token":"7:0","producer_id":7,"producer_epoch":0,"future":{"a":1}}`
	env, err := DecodeEnvelope([]byte(in))
	if err != nil || env.Token != mustToken(t, 7, 0) || env.Term != 31 {
		t.Fatalf("DecodeEnvelope = %+v, %v", env, err)
	}
}

func TestReplyRoundTrip(t *testing.T) {
	for _, r := range []Reply{
		{ID: "c1", Status: StatusOK, Detail: "opened", Data: []byte(`{"percent":40}`)},
		{ID: "c2", Status: StatusRejected, Detail: "stale token"},
		{ID: "c3", Status: StatusError, Data: []byte{0xde, 0xad}},
	} {
		b, err := EncodeReply(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeReply(b)
		if err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		if got.ID != r.ID || got.Status != r.Status || got.Detail != r.Detail || !bytes.Equal(got.Data, r.Data) {
			t.Fatalf("reply %+v, want %+v", got, r)
		}
	}
	for _, bad := range []string{`{"v":1,"id":"c","status":"maybe"}`, `{"v":1,"status":"ok"}`, `{"v":2,"id":"c","status":"ok"}`, `[]`} {
		if _, err := DecodeReply([]byte(bad)); !errors.Is(err, ErrMalformedEnvelope) {
			t.Fatalf("DecodeReply(%s) = %v, want ErrMalformedEnvelope", bad, err)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	good, _ := EncodeEnvelope(sampleEnvelope(f, []byte(`{"a":1}`)))
	f.Add(good)
	f.Add([]byte(`{"v":2,"id":"x","term":9,"token":"1:1","producer_id":1,"producer_epoch":1,"payload_base64":"AA=="}`))
	f.Add([]byte(`{"v":2,"id":"x","term":0,"token":"1:1","producer_id":1,"producer_epoch":1}`))
	f.Add([]byte(`{"v":1,"id":"x","token":"1:1","producer_id":1,"producer_epoch":1,"payload_base64":"AA=="}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := DecodeEnvelope(data)
		if err != nil {
			return
		}
		again, err := EncodeEnvelope(env)
		if err != nil {
			// A payload decoded from base64 re-encodes; a JSON payload is
			// valid JSON by construction.
			t.Fatalf("re-encode of a decoded envelope: %v", err)
		}
		env2, err := DecodeEnvelope(again)
		if err != nil || env2.ID != env.ID || env2.Token != env.Token || env2.Term != env.Term {
			t.Fatalf("round trip changed %+v into %+v (%v)", env, env2, err)
		}
	})
}

func BenchmarkEncodeEnvelope(b *testing.B) {
	env := sampleEnvelope(b, []byte(`{"percent":40}`))
	env.Attributes = nil
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeEnvelope(env, PayloadAuto); err != nil {
			b.Fatal(err)
		}
	}
}
