package dispatch

import (
	"encoding/binary"
	"strings"
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

// TestWireReaderBridge reads int64s across the meeting of two buffers: the
// reader copies a few bytes into a bridge and goes back into the second
// buffer itself, and a fault's offset counts the bytes of both.
func TestWireReaderBridge(t *testing.T) {
	var all []byte
	for i := range 200 {
		all = binary.BigEndian.AppendUint64(all, uint64(i)*0x0101)
	}
	// The first buffer ends in the middle of the 13th int64.
	a, b := all[:100], all[100:]
	r := wireReader{buf: a, rest: [][]byte{b}}
	for i := range 200 {
		if got := r.int64("n"); got != int64(i)*0x0101 || r.err != nil {
			t.Fatalf("int64 %d: %d, %v", i, got, r.err)
		}
		if i == 14 && &r.buf[0] != &b[0] {
			t.Fatalf("after the meeting the reader reads a copy (%d bytes), not the second buffer", len(r.buf))
		}
	}
	r.int64("past the end")
	if r.err == nil || !strings.Contains(r.err.Error(), "truncated at byte 1600") {
		t.Fatalf("a read past the end: %v; want it truncated at byte 1600", r.err)
	}

	// A source that hands the buffers one at a time reads the same.
	bufs := [][]byte{all[:3], all[3:100], all[100:101], all[101:]}
	lazy := wireReader{more: func() ([]byte, int, bool) {
		if len(bufs) == 0 {
			return nil, 0, false
		}
		b := bufs[0]
		bufs = bufs[1:]
		return b, 1 << 20, true
	}}
	for i := range 200 {
		if got := lazy.int64("n"); got != int64(i)*0x0101 || lazy.err != nil {
			t.Fatalf("lazy int64 %d: %d, %v", i, got, lazy.err)
		}
	}
	if lazy.end(); lazy.err != nil {
		t.Fatalf("trailing bytes after the last int64: %v", lazy.err)
	}
}
