package dispatch

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzAssembleCheckpoint checks that the checkpoint decoder never panics,
// fails only with a *LogFormatError, and accepts only canonical bytes:
// encoding what it decoded in the version it read gives back the same
// bytes.
func FuzzAssembleCheckpoint(f *testing.F) {
	seedGolden(f, "checkpoint-", func(path string) {
		data := readGolden(f, path)
		f.Add(data)
		f.Add(data[:len(data)/2])
	})
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxCheckpointPartLen {
			return
		}
		cp, err := AssembleCheckpoint("plant-a", []CheckpointPart{{Parts: 1, Data: data}})
		checkLazyDecode(t, data, err)
		if err != nil {
			var fe *LogFormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *LogFormatError", err)
			}
			return
		}
		parts, err := EncodeCheckpoint("plant-a", 0, cp)
		if err != nil {
			t.Fatalf("decoded checkpoint %+v does not encode: %v", cp, err)
		}
		enc := parts[0].Data
		if data[1] == checkpointVersion0 {
			enc = encodeCheckpointV0(cp)
		}
		if len(parts) != 1 || !bytes.Equal(enc, data) {
			t.Fatalf("not canonical:\ndata  %x\nagain %x", data, enc)
		}
		again, err := AssembleCheckpoint("plant-a", parts)
		if err != nil || !reflect.DeepEqual(again, cp) {
			t.Fatalf("second decode %+v, %v; want %+v", again, err, cp)
		}
	})
}

// checkLazyDecode checks that a reader handed data in small buffers, as a
// streamed read of a base hands its parts, decodes what a reader of the
// whole decodes, or fails where it failed with err.
func checkLazyDecode(t *testing.T, data []byte, err error) {
	t.Helper()
	_, ids, eagerErr := decodeCheckpointState("plant-a", wireReader{buf: data})
	for _, size := range []int{1, 7, 64} {
		rest := data
		more := func() ([]byte, int, bool) {
			if len(rest) == 0 {
				return nil, 0, false
			}
			b := rest[:min(size, len(rest))]
			rest = rest[len(b):]
			// The bound is loose, as a feed that knows only the count of
			// parts gives it.
			return b, len(rest) + size, true
		}
		cp, lazyIDs, lazyErr := decodeCheckpointState("plant-a", wireReader{more: more})
		if (lazyErr != nil) != (eagerErr != nil) || (lazyErr != nil) != (err != nil) {
			t.Fatalf("buffers of %d bytes: lazy decode error %v, whole %v", size, lazyErr, eagerErr)
		}
		if lazyErr == nil && !reflect.DeepEqual(lazyIDs.all(), ids.all()) {
			t.Fatalf("buffers of %d bytes: lazy decode %+v gives other IDs", size, cp)
		}
	}
}
