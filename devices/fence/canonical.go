package fence

import (
	"encoding/binary"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// Domain strings open every canonical encoding, so that the MAC of a
// command can never pass for the MAC of a reply, or of a later layout.
const (
	commandDomain = "krabka-dispatch/command/1"
	replyDomain   = "krabka-dispatch/reply/1"
)

// Command holds the fields of a command that a device acts on, and that
// its MAC therefore covers. Package devices/mqtt fills it from an envelope
// (mqtt.Envelope.Signed); firmware in another language builds the same
// bytes by the layout of [Command.AppendCanonical].
type Command struct {
	// Version is the version of the envelope the command travelled in.
	Version int
	// Term and Token are the authority the command was issued under.
	Term  coordination.Term
	Token coordination.FencingToken
	// Role, ID, Device and Action are the command's fields.
	Role, ID, Device, Action string
	// Payload is the argument of the action, byte for byte as the device
	// receives it.
	Payload []byte
	// Deadline and SubmittedAt are zero when unset.
	Deadline, SubmittedAt time.Time
}

// Authority returns the command's term and token.
func (c Command) Authority() coordination.Authority {
	return coordination.Authority{Term: c.Term, Token: c.Token}
}

// AppendCanonical appends the canonical encoding of c to buf and returns
// the result. All integers are big-endian; a "bytes" field is a uint32
// length followed by that many bytes; a "time" field is a uint8 flag (0
// unset, 1 set) followed, when set, by the int64 Unix seconds and the
// uint32 nanoseconds within that second (0 to 999999999):
//
//	bytes  domain          "krabka-dispatch/command/1" (25 bytes)
//	uint16 version         the envelope version (2)
//	int64  term
//	int64  producer id     of the token
//	int16  producer epoch  of the token
//	bytes  role
//	bytes  id
//	bytes  device
//	bytes  action
//	bytes  payload
//	time   deadline
//	time   submitted_at
//
// Attributes are not covered: a device must not act on them.
func (c Command) AppendCanonical(buf []byte) []byte {
	buf = appendBytes(buf, []byte(commandDomain))
	buf = binary.BigEndian.AppendUint16(buf, uint16(c.Version))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.Term))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.Token.ProducerID()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(c.Token.ProducerEpoch()))
	buf = appendBytes(buf, []byte(c.Role))
	buf = appendBytes(buf, []byte(c.ID))
	buf = appendBytes(buf, []byte(c.Device))
	buf = appendBytes(buf, []byte(c.Action))
	buf = appendBytes(buf, c.Payload)
	buf = appendTime(buf, c.Deadline)
	return appendTime(buf, c.SubmittedAt)
}

// Reply holds the fields of a device's reply that its MAC covers.
type Reply struct {
	// Version is the version of the reply message.
	Version int
	// Device is the device that replies; it is not on the wire of an MQTT
	// reply, the dispatcher knows it from the command.
	Device string
	// ID is the command ID the reply is about.
	ID string
	// Status, Detail and Data are the result.
	Status, Detail string
	Data           []byte
}

// AppendCanonical appends the canonical encoding of r to buf, with the
// conventions of [Command.AppendCanonical]:
//
//	bytes  domain   "krabka-dispatch/reply/1" (23 bytes)
//	uint16 version  the reply version (1)
//	bytes  device
//	bytes  id
//	bytes  status
//	bytes  detail
//	bytes  data
func (r Reply) AppendCanonical(buf []byte) []byte {
	buf = appendBytes(buf, []byte(replyDomain))
	buf = binary.BigEndian.AppendUint16(buf, uint16(r.Version))
	buf = appendBytes(buf, []byte(r.Device))
	buf = appendBytes(buf, []byte(r.ID))
	buf = appendBytes(buf, []byte(r.Status))
	buf = appendBytes(buf, []byte(r.Detail))
	return appendBytes(buf, r.Data)
}

func appendBytes(buf, b []byte) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
	return append(buf, b...)
}

func appendTime(buf []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(buf, 0)
	}
	buf = append(buf, 1)
	buf = binary.BigEndian.AppendUint64(buf, uint64(t.Unix()))
	return binary.BigEndian.AppendUint32(buf, uint32(t.Nanosecond()))
}
