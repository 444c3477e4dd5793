package dispatch

import (
	"encoding/binary"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// A transaction learns its token only once it runs, while the records it
// writes are encoded before, outside every lock: they are encoded under a
// stand-in token, and the transaction stamps its own into them in place.

// Header keys that every record of the command log carries beside the W3C
// trace context ("traceparent", "tracestate"). The token and the member are
// in the record value too; the headers let a tool read them without the
// codec.
const (
	// HeaderToken carries the fencing token, in FencingToken.String's form.
	HeaderToken = "krabka-token"

	// HeaderMember carries the member that held the role.
	HeaderMember = "krabka-member"
)

// valueTokenOffset is where the producer id starts in an entry value: after
// the int16 version. The int16 epoch follows it. See "The command log".
const valueTokenOffset = 2

// stampToken writes token into an encoded entry value in place.
func stampToken(value []byte, token coordination.FencingToken) {
	binary.BigEndian.PutUint64(value[valueTokenOffset:], uint64(token.ProducerID()))
	binary.BigEndian.PutUint16(value[valueTokenOffset+8:], uint16(token.ProducerEpoch()))
}

// standInToken is a valid token to encode with before the transaction's own
// is known.
func standInToken() coordination.FencingToken {
	t, _ := coordination.NewFencingToken(0, 0)
	return t
}
