package coordination

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// The fuzz targets check that a decoder never panics, that every error is a
// *FormatError, and the two round-trip properties of a frozen layout: any
// input that decodes encodes back to the same bytes, and any decoded value
// survives another encode and decode unchanged. The seed corpus is the golden
// vectors and their truncations, and a few malformed variants.

func seedCorpus(f *testing.F, valid ...[]byte) {
	for _, v := range valid {
		f.Add(v)
		for i := range v {
			f.Add(v[:i])
		}
		f.Add(append(append([]byte(nil), v...), 0))
		if len(v) > 2 {
			bad := append([]byte(nil), v...)
			bad[1] = 1
			f.Add(bad)
		}
	}
	f.Add([]byte{0, 0, 0xff, 0xff})
}

func checkFormatError(t *testing.T, err error) {
	t.Helper()
	var format *FormatError
	if !errors.As(err, &format) {
		t.Fatalf("error %v is no *FormatError", err)
	}
}

func FuzzDecodeKey(f *testing.F) {
	role := mustRole(f, "controller")
	seedCorpus(f,
		EncodeKey(RegistrationKey(role, mustMember(f, "node-1"))),
		EncodeKey(LeaseKey(role)),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		key, err := DecodeKey(data)
		if err != nil {
			checkFormatError(t, err)
			return
		}
		encoded := EncodeKey(key)
		if !bytes.Equal(encoded, data) {
			t.Fatalf("decoded %+v, encoded back\n%x\nfrom\n%x", key, encoded, data)
		}
		again, err := DecodeKey(encoded)
		if err != nil || again != key {
			t.Fatalf("round trip of %+v gave %+v, %v", key, again, err)
		}
	})
}

func FuzzDecodeRegistration(f *testing.F) {
	seedCorpus(f, EncodeRegistration(Registration{Member: mustMember(f, "node-1"), RegisteredAt: 1700000000000}))
	f.Fuzz(func(t *testing.T, data []byte) {
		registration, err := DecodeRegistration(data)
		if err != nil {
			checkFormatError(t, err)
			return
		}
		encoded := EncodeRegistration(registration)
		if !bytes.Equal(encoded, data) {
			t.Fatalf("decoded %+v, encoded back\n%x\nfrom\n%x", registration, encoded, data)
		}
		again, err := DecodeRegistration(encoded)
		if err != nil || again != registration {
			t.Fatalf("round trip of %+v gave %+v, %v", registration, again, err)
		}
	})
}

func FuzzDecodeLease(f *testing.F) {
	seedCorpus(f, EncodeLease(goldenLease(f)))
	f.Fuzz(func(t *testing.T, data []byte) {
		lease, err := DecodeLease(data)
		if err != nil {
			checkFormatError(t, err)
			return
		}
		encoded := EncodeLease(lease)
		if !bytes.Equal(encoded, data) {
			t.Fatalf("decoded %+v, encoded back\n%x\nfrom\n%x", lease, encoded, data)
		}
		again, err := DecodeLease(encoded)
		if err != nil || again != lease {
			t.Fatalf("round trip of %+v gave %+v, %v", lease, again, err)
		}
	})
}

// The encode-then-decode targets build a value from the fuzzer's arguments,
// bypassing the constructors as only code of this package can, and check the
// contract of each exported encoder, whose spec'd signature has no error:
// the unexported check accepts exactly the values whose encoding decodes,
// and what decodes is the value that was encoded (a lease key without its
// member) and encodes again to the same bytes. The seeds hold the edge
// cases: empty and over-long names, the zero values, NoEpoch, negative and
// extreme times.

func FuzzEncodeKey(f *testing.F) {
	for _, s := range []struct {
		kind         int16
		role, member string
	}{
		{0, "controller", "node-1"}, {1, "controller", ""}, {1, "controller", "node-1"},
		{0, "controller", ""}, {0, "", "node-1"}, {1, "", ""}, {2, "controller", "node-1"}, {-1, "r", "m"},
		{0, strings.Repeat("r", MaxRoleLen), strings.Repeat("m", MaxMemberIDLen)},
		{0, strings.Repeat("r", MaxRoleLen+1), "m"}, {0, "r", strings.Repeat("m", MaxMemberIDLen+1)},
		{0, "\xff", "\x00"},
	} {
		f.Add(s.kind, s.role, s.member)
	}
	f.Fuzz(func(t *testing.T, kind int16, role, member string) {
		key := Key{Kind: RecordKind(kind), Role: Role{name: role}, Member: MemberID{name: member}}
		data := EncodeKey(key)
		got, err := DecodeKey(data)
		if checkErr := checkKey(key); (checkErr == nil) != (err == nil) {
			t.Fatalf("checkKey says %v, DecodeKey says %v, for %+v", checkErr, err, key)
		}
		if err != nil {
			checkFormatError(t, err)
			if _, encErr := encodeKey(key); encErr == nil {
				t.Fatalf("encodeKey took %+v, whose bytes do not decode", key)
			}
			return
		}
		want := key
		if want.Kind == KindLease {
			want.Member = MemberID{}
		}
		if got != want || !bytes.Equal(EncodeKey(got), data) {
			t.Fatalf("round trip of %+v gave %+v", key, got)
		}
		if checked, err := encodeKey(key); err != nil || !bytes.Equal(checked, data) {
			t.Fatalf("encodeKey of %+v: %x, %v", key, checked, err)
		}
	})
}

func FuzzEncodeRegistration(f *testing.F) {
	for _, s := range []struct {
		member string
		at     int64
	}{
		{"node-1", 1700000000000}, {"", 1700000000000}, {"node-1", 0}, {"node-1", -1},
		{"node-1", math.MaxInt64}, {"node-1", math.MinInt64},
		{strings.Repeat("m", MaxMemberIDLen), 1}, {strings.Repeat("m", MaxMemberIDLen+1), 1},
	} {
		f.Add(s.member, s.at)
	}
	f.Fuzz(func(t *testing.T, member string, registeredAt int64) {
		registration := Registration{Member: MemberID{name: member}, RegisteredAt: registeredAt}
		data := EncodeRegistration(registration)
		got, err := DecodeRegistration(data)
		if checkErr := checkRegistration(registration); (checkErr == nil) != (err == nil) {
			t.Fatalf("checkRegistration says %v, DecodeRegistration says %v, for %+v", checkErr, err, registration)
		}
		if err != nil {
			checkFormatError(t, err)
			if _, encErr := encodeRegistration(registration); encErr == nil {
				t.Fatalf("encodeRegistration took %+v, whose bytes do not decode", registration)
			}
			return
		}
		if got != registration || !bytes.Equal(EncodeRegistration(got), data) {
			t.Fatalf("round trip of %+v gave %+v", registration, got)
		}
		if checked, err := encodeRegistration(registration); err != nil || !bytes.Equal(checked, data) {
			t.Fatalf("encodeRegistration of %+v: %x, %v", registration, checked, err)
		}
	})
}

func FuzzEncodeLease(f *testing.F) {
	for _, s := range []struct {
		member            string
		producerID        int64
		epoch             int16
		granted, deadline int64
	}{
		{"node-1", 4242, 7, 1700000000000, 1700000030000}, {"node-1", -1, -1, 1, 2}, {"node-1", 0, 0, 0, 0},
		{"node-1", 5, -1, 1, 2}, {"node-1", -5, 1, 1, 2}, {"", 1, 1, 1, 2},
		{"node-1", math.MaxInt64, math.MaxInt16, math.MinInt64, math.MaxInt64},
		{strings.Repeat("m", MaxMemberIDLen), 1, 1, 2, 1}, {strings.Repeat("m", MaxMemberIDLen+1), 1, 1, 1, 2},
	} {
		f.Add(s.member, s.producerID, s.epoch, s.granted, s.deadline)
	}
	f.Fuzz(func(t *testing.T, member string, producerID int64, epoch int16, grantedAt, deadline int64) {
		lease := Lease{Member: MemberID{name: member}, Token: FencingToken{producerID: producerID, producerEpoch: epoch},
			GrantedAt: grantedAt, Deadline: deadline}
		data := EncodeLease(lease)
		got, err := DecodeLease(data)
		if checkErr := checkLease(lease); (checkErr == nil) != (err == nil) {
			t.Fatalf("checkLease says %v, DecodeLease says %v, for %+v", checkErr, err, lease)
		}
		if err != nil {
			checkFormatError(t, err)
			if _, encErr := encodeLease(lease); encErr == nil {
				t.Fatalf("encodeLease took %+v, whose bytes do not decode", lease)
			}
			return
		}
		if got != lease || !bytes.Equal(EncodeLease(got), data) {
			t.Fatalf("round trip of %+v gave %+v", lease, got)
		}
		if checked, err := encodeLease(lease); err != nil || !bytes.Equal(checked, data) {
			t.Fatalf("encodeLease of %+v: %x, %v", lease, checked, err)
		}
	})
}
