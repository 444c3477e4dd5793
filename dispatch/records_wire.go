package dispatch

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// The primitives of the command log's layouts. Every integer is big-endian;
// a string is an int16 length followed by that many bytes; a byte string is an
// int32 length followed by that many bytes; a time is an int64 count of
// milliseconds since the Unix epoch.

// The times the layouts hold: the milliseconds of years 1 to 9999, UTC, but
// for the first millisecond of year 1, which is the zero time.Time and means
// "none". zeroTimeMillis is time.Time{}.UnixMilli(); maxTimeMillis is the
// last millisecond of 9999-12-31.
const (
	zeroTimeMillis = -62135596800000
	maxTimeMillis  = 253402300799999
)

// timeProblem says why t cannot be written to the log and read back as the
// same time at millisecond precision, or returns "". The zero time is
// refused when required and allowed otherwise. The encoders check every
// time with it before they write, and the decoders check every time they
// read with it, so a time passes on both sides or on neither.
func timeProblem(t time.Time, required bool) string {
	if t.IsZero() {
		if required {
			return "is zero"
		}
		return ""
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Sprintf("is in year %d, outside the years 1 to 9999 that the log holds", y)
	}
	if t.UnixMilli() == zeroTimeMillis {
		return "is within the first millisecond of the zero time, which the log holds as no time at all"
	}
	return ""
}

// wireWriter appends the primitives to a buffer.
type wireWriter struct {
	buf []byte
}

func (w *wireWriter) int8(v int8)   { w.buf = append(w.buf, byte(v)) }
func (w *wireWriter) int16(v int16) { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v)) }
func (w *wireWriter) int32(v int32) { w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v)) }
func (w *wireWriter) int64(v int64) { w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v)) }
func (w *wireWriter) time(t time.Time) {
	w.int64(t.UnixMilli())
}

// string writes s with an int16 length. The caller has checked that s fits.
func (w *wireWriter) string(s string) {
	w.int16(int16(len(s)))
	w.buf = append(w.buf, s...)
}

// bytes writes b with an int32 length. The caller has checked that b fits.
func (w *wireWriter) bytes(b []byte) {
	w.int32(int32(len(b)))
	w.buf = append(w.buf, b...)
}

// wireReader consumes the primitives from a buffer, and from the buffers in
// rest after it, as if they were one: the parts of a checkpoint are read in
// turn, without a copy of them all, and the reader lets go of each one it has
// read. The first fault sticks: every later read returns a zero value, and
// err reports the fault. A length is checked against the bytes that remain
// before anything is allocated, so a hostile length can never make the
// reader allocate more than its input.
type wireReader struct {
	buf  []byte
	off  int
	err  error
	rest [][]byte

	// base counts the bytes before buf, for the offsets of faults.
	base int

	// more, when not nil, hands the buffer that follows rest once the
	// reader needs it, with a bound of the bytes that may follow that
	// buffer, and false when no buffer follows: a reader can decode the
	// parts of a checkpoint while the later ones are still read. unread
	// is the bound it gave last.
	more   func() (b []byte, unread int, ok bool)
	unread int

	// bridged, when buf is a bridge that fill made, is the buffer whose
	// first bridgedAt bytes end it; rest[0] is what follows of bridged.
	bridged   []byte
	bridgedAt int
}

func (r *wireReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// remaining counts the bytes left to read. A reader with more takes every
// buffer that follows to count them.
func (r *wireReader) remaining() int {
	return r.pull(math.MaxInt)
}

// fits reports whether need bytes or more are left to read, and how many
// are known to be: all that are left when they are fewer than need. A
// reader with more takes only the buffers that it takes to tell.
func (r *wireReader) fits(need int64) (left int, ok bool) {
	left = r.pull(int(min(need, math.MaxInt)))
	return left, int64(left) >= need
}

// mayFit reports whether need bytes may be left to read: whether the bytes
// in hand and the bound of those that more may still hand reach need. It
// takes no buffer from more.
func (r *wireReader) mayFit(need int64) bool {
	have := int64(r.inHand())
	if r.more != nil {
		have += int64(r.unread)
	}
	return have >= need
}

// inHand counts the bytes left to read that the reader holds now.
func (r *wireReader) inHand() int {
	n := len(r.buf) - r.off
	for _, b := range r.rest {
		n += len(b)
	}
	return n
}

// pull takes buffers from more into rest until the reader holds n bytes
// or more has none left, and returns the bytes it holds.
func (r *wireReader) pull(n int) int {
	have := r.inHand()
	for have < n && r.more != nil {
		b, unread, ok := r.more()
		if !ok {
			r.more, r.unread = nil, 0
			break
		}
		r.unread = unread
		if len(b) > 0 {
			r.rest = append(r.rest, b)
			have += len(b)
		}
	}
	return have
}

// fill makes the next n bytes, or all that remain if fewer, follow one
// another in buf. It moves on to the next buffer without a copy when buf is
// read to its end; otherwise it copies what remains of buf, and the first n
// bytes of the buffers after it, into a bridge, and goes back into the
// buffer that the bridge ends in, without a copy, once the bytes of buf it
// took are read: a reader of parts of 768 KiB copies a few bytes where two
// parts meet, not the next part whole.
func (r *wireReader) fill(n int) {
	if len(r.buf)-r.off >= n {
		return
	}
	if r.bridged != nil {
		if left := len(r.buf) - r.off; left <= r.bridgedAt {
			// What is left of the bridge is the end of its prefix of
			// bridged, which follows on in bridged itself.
			r.base += len(r.buf) - r.bridgedAt
			r.buf, r.off = r.bridged, r.bridgedAt-left
			r.rest[0], r.rest = nil, r.rest[1:]
			r.bridged = nil
			if len(r.buf)-r.off >= n {
				return
			}
		}
	}
	r.pull(n)
	if len(r.rest) == 0 {
		return
	}
	if r.off == len(r.buf) && len(r.rest[0]) >= n {
		r.base += len(r.buf)
		r.buf, r.off = r.rest[0], 0
		r.rest[0], r.rest = nil, r.rest[1:]
		r.bridged = nil
		return
	}
	bridge := make([]byte, 0, len(r.buf)-r.off+n)
	bridge = append(bridge, r.buf[r.off:]...)
	r.bridged = nil
	for len(r.rest) > 0 && len(bridge) < n {
		next := r.rest[0]
		// n bytes of the buffer that the bridge ends in, at least: the
		// reader is back in that buffer before it needs another bridge.
		k := min(len(next), n)
		bridge = append(bridge, next[:k]...)
		if k < len(next) {
			// The bridge ends inside next: the reader goes on in it.
			r.bridged, r.bridgedAt = next, k
			r.rest[0] = next[k:]
			break
		}
		r.rest[0], r.rest = nil, r.rest[1:]
	}
	r.base += r.off
	r.buf, r.off = bridge, 0
}

// take returns the next n bytes, or nil after a fault.
func (r *wireReader) take(n int, what string) []byte { return r.takeOf(n, what, "") }

// takeOf is take of a field named what and suffix, which are joined only
// for the message of a fault: a decoder reads a length before each string,
// and a name built for each would cost an allocation a string.
func (r *wireReader) takeOf(n int, what, suffix string) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.buf)-r.off {
		r.fill(n)
	}
	if n > len(r.buf)-r.off {
		r.fail("%s%s: truncated at byte %d: need %d bytes, %d remain", what, suffix, r.base+r.off, n, len(r.buf)-r.off)
		return nil
	}
	b := r.buf[r.off : r.off+n]
	r.off += n
	return b
}

func (r *wireReader) int8(what string) int8 {
	b := r.take(1, what)
	if b == nil {
		return 0
	}
	return int8(b[0])
}

func (r *wireReader) int16(what string) int16 {
	b := r.take(2, what)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *wireReader) int32(what string) int32 {
	b := r.take(4, what)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *wireReader) int64(what string) int64 {
	b := r.take(8, what)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (r *wireReader) time(what string) time.Time {
	ms := r.int64(what)
	if r.err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// token reads a fencing token: an int64 producer id and an int16 producer
// epoch, their names in errors after prefix, and fails on one that
// coordination.NewFencingToken refuses.
func (r *wireReader) token(prefix string) coordination.FencingToken {
	id, epoch := r.int64(prefix+"producer id"), r.int16(prefix+"producer epoch")
	if r.err != nil {
		return coordination.FencingToken{}
	}
	t, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		r.fail("%stoken: %w", prefix, err)
	}
	return t
}

// checkToken refuses a token that coordination.NewFencingToken would not
// make, as the token's reader does.
func checkToken(t coordination.FencingToken) error {
	_, err := coordination.NewFencingToken(t.ProducerID(), t.ProducerEpoch())
	return err
}

// string reads an int16-length string of at most limit bytes.
func (r *wireReader) string(what string, limit int) string {
	l := r.takeOf(2, what, " length")
	if l == nil {
		return ""
	}
	n := int16(binary.BigEndian.Uint16(l))
	if n < 0 {
		r.fail("%s: negative length %d", what, n)
		return ""
	}
	if int(n) > limit {
		r.fail("%s: length %d is above the limit of %d", what, n, limit)
		return ""
	}
	return string(r.take(int(n), what))
}

// bytes reads an int32-length byte string of at most limit bytes. An empty
// byte string reads as nil.
func (r *wireReader) bytes(what string, limit int) []byte {
	b := r.sharedBytes(what, limit)
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// sharedBytes is bytes without the copy: the slice shares the reader's
// buffer, and its capacity ends with it.
func (r *wireReader) sharedBytes(what string, limit int) []byte {
	l := r.takeOf(4, what, " length")
	if l == nil {
		return nil
	}
	n := int32(binary.BigEndian.Uint32(l))
	if n < 0 {
		r.fail("%s: negative length %d", what, n)
		return nil
	}
	if int64(n) > int64(limit) {
		r.fail("%s: length %d is above the limit of %d", what, n, limit)
		return nil
	}
	b := r.take(int(n), what)
	if len(b) == 0 {
		return nil
	}
	return b[:len(b):len(b)]
}

// end records a fault when bytes remain after the layout.
func (r *wireReader) end() {
	if n := r.remaining(); r.err == nil && n != 0 {
		r.fail("%d trailing bytes after byte %d", n, r.base+r.off)
	}
}

// uvarint reads an unsigned varint in its shortest form.
func (r *wireReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.buf)-r.off < binary.MaxVarintLen64 {
		r.fill(binary.MaxVarintLen64)
	}
	v, n := shortestUvarint(r.buf[r.off:])
	if n <= 0 {
		r.fail("%s: malformed varint at byte %d", what, r.base+r.off)
		return 0
	}
	r.off += n
	return v
}

// varint reads a signed (zigzag) varint in its shortest form.
func (r *wireReader) varint(what string) int64 {
	u := r.uvarint(what)
	return int64(u>>1) ^ -int64(u&1)
}

// shortestUvarint decodes the unsigned varint that b begins with and
// returns it with its length, or a length of 0 or less when b does not
// begin with one in its shortest form: its last byte, but for a varint of
// one byte, is not zero.
func shortestUvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n > 1 && b[n-1] == 0 {
		return 0, 0
	}
	return v, n
}

// uvarintLen is the length of v's shortest unsigned varint.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}
