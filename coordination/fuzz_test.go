package coordination

import (
	"bytes"
	"errors"
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
