package dispatch

import (
	"encoding/binary"
	"testing"
)

// TestShortestUvarint checks the varint reader against encoding/binary on
// every input of up to two bytes and on some longer ones: the same value
// and length for a varint in its shortest form, and a length of 0 or less
// for one that is not, truncated or too long.
func TestShortestUvarint(t *testing.T) {
	want := func(b []byte) (uint64, int) {
		v, n := binary.Uvarint(b)
		if n > 1 && b[n-1] == 0 {
			return 0, 0
		}
		return v, n
	}
	check := func(b []byte) {
		t.Helper()
		v, n := shortestUvarint(b)
		wv, wn := want(b)
		if (wn > 0) != (n > 0) || (wn > 0 && (v != wv || n != wn)) {
			t.Fatalf("% x: %d, %d; want %d, %d", b, v, n, wv, wn)
		}
	}
	check(nil)
	for i := range 256 {
		check([]byte{byte(i)})
		for j := range 256 {
			check([]byte{byte(i), byte(j)})
			check([]byte{byte(i), byte(j), 0x01})
			check([]byte{byte(i), byte(j), 0x00})
		}
	}
	for _, v := range []uint64{1 << 14, 1<<21 - 1, 1 << 35, 1<<63 + 5, ^uint64(0)} {
		b := binary.AppendUvarint(nil, v)
		check(b)
		check(b[:len(b)-1])
		check(append(b[:len(b):len(b)], 0x7f))
	}
	check([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}) // too long
}
