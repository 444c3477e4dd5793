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
