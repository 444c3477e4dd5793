package coordination

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata")

// golden is one vector of the frozen layout: the value it encodes, and the
// file that holds its bytes.
type golden struct {
	file   string
	encode func(t *testing.T) []byte
	decode func(t *testing.T, data []byte)
}

func goldenVectors() []golden {
	return []golden{
		{
			file: "key-registration.hex",
			encode: func(t *testing.T) []byte {
				return EncodeKey(RegistrationKey(mustRole(t, "controller"), mustMember(t, "node-1")))
			},
			decode: func(t *testing.T, data []byte) {
				key, err := DecodeKey(data)
				if err != nil || key != RegistrationKey(mustRole(t, "controller"), mustMember(t, "node-1")) {
					t.Fatalf("decoded %+v, %v", key, err)
				}
			},
		},
		{
			file: "key-lease.hex",
			encode: func(t *testing.T) []byte {
				return EncodeKey(LeaseKey(mustRole(t, "controller")))
			},
			decode: func(t *testing.T, data []byte) {
				key, err := DecodeKey(data)
				if err != nil || key != LeaseKey(mustRole(t, "controller")) {
					t.Fatalf("decoded %+v, %v", key, err)
				}
			},
		},
		{
			file: "registration.hex",
			encode: func(t *testing.T) []byte {
				return EncodeRegistration(Registration{Member: mustMember(t, "node-1"), RegisteredAt: 1700000000000})
			},
			decode: func(t *testing.T, data []byte) {
				registration, err := DecodeRegistration(data)
				if err != nil || registration != (Registration{Member: mustMember(t, "node-1"), RegisteredAt: 1700000000000}) {
					t.Fatalf("decoded %+v, %v", registration, err)
				}
			},
		},
		{
			file: "lease.hex",
			encode: func(t *testing.T) []byte {
				return EncodeLease(goldenLease(t))
			},
			decode: func(t *testing.T, data []byte) {
				lease, err := DecodeLease(data)
				if err != nil || lease != goldenLease(t) {
					t.Fatalf("decoded %+v, %v", lease, err)
				}
			},
		},
		{
			file: "term-header.hex",
			encode: func(t *testing.T) []byte {
				h := TermHeaderOf(4096)
				if h.Key != "krabka.term" {
					t.Fatalf("the term header is named %q", h.Key)
				}
				return h.Value
			},
			decode: func(t *testing.T, data []byte) {
				term, ok, err := TermFromHeaders([]Header{{Key: TermHeader, Value: data}})
				if err != nil || !ok || term != 4096 {
					t.Fatalf("decoded %s, %t, %v", term, ok, err)
				}
			},
		},
	}
}

func goldenLease(t testing.TB) Lease {
	return Lease{
		Member:    mustMember(t, "node-1"),
		Token:     mustToken(t, 4242, 7),
		GrantedAt: 1700000000000,
		Deadline:  1700000030000,
	}
}

// TestGoldenVectors pins the frozen byte layout: the encoders write the
// golden bytes exactly, and the decoders read them back. Run the test with
// -update to rewrite the files after a deliberate change of the layout, which
// the ports in other languages then have to follow.
func TestGoldenVectors(t *testing.T) {
	for _, g := range goldenVectors() {
		t.Run(g.file, func(t *testing.T) {
			path := filepath.Join("testdata", g.file)
			encoded := g.encode(t)
			if *update {
				if err := os.WriteFile(path, []byte(hex.EncodeToString(encoded)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := hex.DecodeString(strings.TrimSpace(string(text)))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !bytes.Equal(encoded, want) {
				t.Fatalf("encoded\n%x\nwant %s\n%x", encoded, path, want)
			}
			g.decode(t, want)
		})
	}
}

// TestLayoutByHand spells the lease layout out field by field, so a change
// that rewrote both the encoder and the golden file still fails here.
func TestLayoutByHand(t *testing.T) {
	want := []byte{
		0, 0, // version
		0, 6, 'n', 'o', 'd', 'e', '-', '1', // member
		0, 0, 0, 0, 0, 0, 0x10, 0x92, // producer id 4242
		0, 7, // producer epoch
		0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // granted at 1700000000000
		0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0xdd, 0x30, // deadline 1700000030000
	}
	if got := EncodeLease(goldenLease(t)); !bytes.Equal(got, want) {
		t.Fatalf("lease\n%x\nwant\n%x", got, want)
	}
	key := []byte{0, 0, 0, 1, 0, 10, 'c', 'o', 'n', 't', 'r', 'o', 'l', 'l', 'e', 'r', 0, 0}
	if got := EncodeKey(LeaseKey(mustRole(t, "controller"))); !bytes.Equal(got, key) {
		t.Fatalf("lease key\n%x\nwant\n%x", got, key)
	}
}

func TestEncodeKeyLeaseIgnoresMember(t *testing.T) {
	role := mustRole(t, "controller")
	withMember := Key{Kind: KindLease, Role: role, Member: mustMember(t, "node-1")}
	if !bytes.Equal(EncodeKey(withMember), EncodeKey(LeaseKey(role))) {
		t.Fatal("a lease key encodes its member")
	}
}

func TestRoundTrip(t *testing.T) {
	role := mustRole(t, strings.Repeat("r", MaxRoleLen))
	member := mustMember(t, strings.Repeat("m", MaxMemberIDLen))
	for _, key := range []Key{RegistrationKey(role, member), LeaseKey(role), RegistrationKey(mustRole(t, "é"), mustMember(t, "\x00"))} {
		got, err := DecodeKey(EncodeKey(key))
		if err != nil || got != key {
			t.Fatalf("key %+v came back as %+v, %v", key, got, err)
		}
	}
	for _, at := range []int64{math.MinInt64, -1, 0, math.MaxInt64} {
		registration := Registration{Member: member, RegisteredAt: at}
		got, err := DecodeRegistration(EncodeRegistration(registration))
		if err != nil || got != registration {
			t.Fatalf("registration %+v came back as %+v, %v", registration, got, err)
		}
		lease := Lease{Member: member, Token: mustToken(t, math.MaxInt64, math.MaxInt16), GrantedAt: at, Deadline: -at}
		gotLease, err := DecodeLease(EncodeLease(lease))
		if err != nil || gotLease != lease {
			t.Fatalf("lease %+v came back as %+v, %v", lease, gotLease, err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	role := mustRole(t, "controller")
	member := mustMember(t, "node-1")
	regKey := EncodeKey(RegistrationKey(role, member))
	registration := EncodeRegistration(Registration{Member: member, RegisteredAt: 1})
	lease := EncodeLease(goldenLease(t))
	patch := func(b []byte, at int, bytes ...byte) []byte {
		out := append([]byte(nil), b...)
		copy(out[at:], bytes)
		return out
	}
	str := func(s string) []byte { return append([]byte{0, byte(len(s))}, s...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	long := strings.Repeat("x", 250)
	longStr := append([]byte{0, 250}, long...)

	tests := []struct {
		name   string
		decode func([]byte) error
		data   []byte
		part   string
		reason string
	}{
		{"key empty", decodeKey, nil, "key", "truncated version"},
		{"key truncated", decodeKey, regKey[:len(regKey)-1], "key", "truncated member"},
		{"key trailing", decodeKey, append(regKey, 0), "key", "1 trailing bytes"},
		{"key version", decodeKey, patch(regKey, 0, 0, 1), "key", "unknown version 1"},
		{"key kind", decodeKey, patch(regKey, 2, 0, 2), "key", "unknown record kind 2"},
		{"key negative role length", decodeKey, patch(regKey, 4, 0xff, 0xff), "key", "negative role length -1"},
		{"key negative member length", decodeKey, cat([]byte{0, 0, 0, 0}, str("controller"), []byte{0x80, 0}), "key", "negative member length -32768"},
		{"key empty role", decodeKey, cat([]byte{0, 0, 0, 0}, str(""), str("node-1")), "key", "invalid role"},
		{"key long role", decodeKey, cat([]byte{0, 0, 0, 0}, longStr, str("node-1")), "key", "invalid role"},
		{"key empty member", decodeKey, cat([]byte{0, 0, 0, 0}, str("controller"), str("")), "key", "invalid member"},
		{"key long member", decodeKey, cat([]byte{0, 0, 0, 0}, str("controller"), longStr), "key", "invalid member"},
		{"lease key names member", decodeKey, cat([]byte{0, 0, 0, 1}, str("controller"), str("node-1")), "key", `lease key names member "node-1"`},
		{"registration truncated", decodeRegistration, registration[:len(registration)-1], "registration value", "truncated registeredAt"},
		{"registration trailing", decodeRegistration, append(registration, 1, 2), "registration value", "2 trailing bytes"},
		{"registration version", decodeRegistration, patch(registration, 0, 0xff, 0xff), "registration value", "unknown version -1"},
		{"registration negative length", decodeRegistration, patch(registration, 2, 0xff, 0xfe), "registration value", "negative member length -2"},
		{"registration empty member", decodeRegistration, cat([]byte{0, 0}, str(""), make([]byte, 8)), "registration value", "invalid member"},
		{"lease truncated", decodeLease, lease[:30], "lease value", "truncated deadline"},
		{"lease trailing", decodeLease, append(lease, 0), "lease value", "1 trailing bytes"},
		{"lease version", decodeLease, patch(lease, 0, 0, 9), "lease value", "unknown version 9"},
		{"lease negative length", decodeLease, patch(lease, 2, 0x80, 0x00), "lease value", "negative member length"},
		{"lease long member", decodeLease, cat([]byte{0, 0}, longStr, make([]byte, 26)), "lease value", "invalid member"},
		{"lease negative producer id", decodeLease, patch(lease, 10, 0xff), "lease value", "invalid token"},
		{"lease negative epoch", decodeLease, patch(lease, 18, 0xff, 0xff), "lease value", "invalid token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode(tt.data)
			var format *FormatError
			if !errors.As(err, &format) {
				t.Fatalf("error %v is no *FormatError", err)
			}
			if format.Part != tt.part || !strings.Contains(err.Error(), tt.reason) || !strings.Contains(err.Error(), tt.part) {
				t.Fatalf("error %q, want part %q and %q", err, tt.part, tt.reason)
			}
		})
	}
}

func TestFormatErrorUnwrapsConstructorError(t *testing.T) {
	_, err := DecodeKey([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	var format *FormatError
	if !errors.As(err, &format) || format.Unwrap() == nil {
		t.Fatalf("empty role: %v", err)
	}
	_, err = DecodeKey(nil)
	if !errors.As(err, &format) || format.Unwrap() != nil {
		t.Fatalf("truncated key: %v", err)
	}
}

func TestRecordKindString(t *testing.T) {
	for kind, want := range map[RecordKind]string{KindRegistration: "registration", KindLease: "lease", 7: "RecordKind(7)"} {
		if got := kind.String(); got != want {
			t.Fatalf("%d: %q, want %q", kind, got, want)
		}
	}
}

func TestIsTombstone(t *testing.T) {
	if !IsTombstone(nil) || !IsTombstone([]byte{}) || IsTombstone([]byte{0}) {
		t.Fatal("IsTombstone")
	}
}

func TestEncodeCutsOverlongString(t *testing.T) {
	// Only a bypass of the constructors holds such a name; the output stays
	// a well-formed layout all the same.
	huge := Registration{Member: MemberID{name: strings.Repeat("x", math.MaxInt16+10)}}
	data := EncodeRegistration(huge)
	if len(data) != 2+2+math.MaxInt16+8 {
		t.Fatalf("%d bytes", len(data))
	}
	if _, err := DecodeRegistration(data); err == nil {
		t.Fatal("an overlong member decoded")
	}
}

func decodeKey(b []byte) error          { _, err := DecodeKey(b); return err }
func decodeRegistration(b []byte) error { _, err := DecodeRegistration(b); return err }
func decodeLease(b []byte) error        { _, err := DecodeLease(b); return err }

// noEpochTransport is a transport whose coordinator answers an epoch
// request with NoEpoch and no error, as a broken transport could.
type noEpochTransport struct{ *memTransport }

func (noEpochTransport) AcquireEpoch(context.Context, Role) (FencingToken, error) {
	return NoEpoch, nil
}

// TestNoLeaseThatCannotBeDecodedIsWritten: a lease under NoEpoch would
// encode to bytes that DecodeLease refuses, and every reader of the role
// would then fail on it. The campaign refuses to write it.
func TestNoLeaseThatCannotBeDecodedIsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newMemCluster(t)
		transport := noEpochTransport{cluster.transport()}
		role := mustRole(t, "controller")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if l, err := AcquireLeadership(ctx, transport, role, mustMember(t, "node-1"), testOptions(NewManualClock(t0))...); err == nil {
			l.Resign(context.Background())
			t.Fatal("a leadership under NoEpoch was acquired")
		}
		tp, err := RolePartition(role, DefaultPartitions)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range cluster.records(TopicPartition{Topic: StateTopic, Partition: tp}) {
			key, err := DecodeKey(r.Key)
			if err != nil {
				t.Fatalf("offset %d: %v", r.Offset, err)
			}
			if key.Kind == KindLease && !IsTombstone(r.Value) {
				if _, err := DecodeLease(r.Value); err != nil {
					t.Errorf("offset %d: a lease that does not decode was written: %v", r.Offset, err)
				}
			}
		}
		if n := transport.callCount("WriteGuarded") + transport.callCount("WriteLease"); n != 0 {
			t.Errorf("%d lease writes under NoEpoch", n)
		}
	})
}
