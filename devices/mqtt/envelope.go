package mqtt

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
)

// EnvelopeVersion is the value of the "v" field of the envelopes this
// package writes. Version 2 added "term"; [DecodeEnvelope] still reads
// version 1, whose envelopes carry no term.
const EnvelopeVersion = 2

// envelopeVersionNoTerm is the version of an envelope without "term".
const envelopeVersionNoTerm = 1

// ReplyVersion is the value of the "v" field of the replies this package
// writes, and the only one it reads.
const ReplyVersion = 1

// ErrMalformedEnvelope is matched by every error of [DecodeEnvelope] and
// [DecodeReply].
var ErrMalformedEnvelope = errors.New("mqtt: malformed envelope")

// Envelope is the message a command travels in: the command, the term and
// fencing token it was issued under, and its deadline. Device firmware
// written in Go decodes it with [DecodeEnvelope]; firmware in other
// languages reads the JSON form:
//
//	{
//	  "v": 2,
//	  "id": "cmd-42",
//	  "role": "plant-a",
//	  "device": "valve-1",
//	  "action": "open",
//	  "payload": {"percent": 40},
//	  "term": 812,
//	  "token": "1001:3",
//	  "producer_id": 1001,
//	  "producer_epoch": 3,
//	  "deadline": "2026-11-30T06:30:00.123456789Z",
//	  "submitted_at": "2026-11-30T06:29:00Z",
//	  "attributes": {"operator": "ana"},
//	  "kid": "2026-11",
//	  "mac": "5c0f…(64 hex digits)"
//	}
//
// "payload" holds a payload that is valid JSON as that JSON value, embedded
// byte for byte (a decoder may drop the white space around it); any other
// payload travels as
// standard base64 in "payload_base64" instead, and an empty payload omits
// both.
//
// "term" orders leaderships: a device that refuses a deposed leader keeps the
// highest term it has seen and refuses a lower one (package
// [github.com/krabka-io/krabka-dispatch/devices/fence] does so). It is a
// JSON number, an int64; 0 ([coordination.NoTerm]) says the dispatcher passed
// no term, and a fencing device refuses it. "token" and the two numbers
// carry one fencing token twice, for firmware that reads strings and for
// firmware that reads numbers. The token proves that the broker took the
// command's record from the leader, but it does not order leaderships: the
// producer id may rotate to a lower one within a term. Compare terms, never
// tokens.
//
// "deadline" and "submitted_at" are RFC 3339 times with nanoseconds, omitted
// when unset; a device should refuse a command past its deadline.
//
// "kid" and "mac" authenticate the command when the dispatcher signs (see
// "Authentication" in the package doc): "mac" is the HMAC-SHA256, in 64
// lowercase hex digits, of the canonical encoding of the command
// ([fence.Command.AppendCanonical]) under the device key whose id is
// "kid". Both are omitted when the dispatcher does not sign; "attributes"
// is never covered, so a device must not act on it.
type Envelope struct {
	// ID is the command's idempotency key. A device that deduplicates does
	// so by ID.
	ID string
	// Role is the role whose leader dispatched the command.
	Role string
	// Device is the device name the command is for.
	Device string
	// Action names what the device does.
	Action string
	// Payload is the argument of the action.
	Payload []byte
	// Term is the term of the leadership that issued the command;
	// coordination.NoTerm when the dispatcher passed none, or the envelope
	// is of version 1.
	Term coordination.Term
	// Token is the fencing token under which the command was issued.
	Token coordination.FencingToken
	// Deadline is the instant after which the command must not be acted
	// on; zero when the command has none.
	Deadline time.Time
	// SubmittedAt is the instant the submitter created the command; zero
	// when unknown.
	SubmittedAt time.Time
	// Attributes holds the command's optional metadata.
	Attributes map[string]string
	// KeyID names the device key that MAC was computed with; empty when
	// the envelope is not signed.
	KeyID string
	// MAC is the HMAC-SHA256 of the canonical encoding of [Envelope.Signed]
	// under the key KeyID; nil when the envelope is not signed.
	MAC []byte
}

// Signed returns the fields of the envelope that its MAC covers, for
// [fence.Store.AdmitSigned] or [fence.Verifier.Verify].
func (e Envelope) Signed() fence.Command {
	return fence.Command{
		Version:     EnvelopeVersion,
		Term:        e.Term,
		Token:       e.Token,
		Role:        e.Role,
		ID:          e.ID,
		Device:      e.Device,
		Action:      e.Action,
		Payload:     e.Payload,
		Deadline:    e.Deadline,
		SubmittedAt: e.SubmittedAt,
	}
}

// Authority returns the term and token the command was issued under.
func (e Envelope) Authority() coordination.Authority {
	return coordination.Authority{Term: e.Term, Token: e.Token}
}

// wireEnvelope is the JSON form of an Envelope.
type wireEnvelope struct {
	V             int               `json:"v"`
	ID            string            `json:"id"`
	Role          string            `json:"role,omitempty"`
	Device        string            `json:"device"`
	Action        string            `json:"action"`
	Payload       json.RawMessage   `json:"payload,omitempty"`
	PayloadBase64 []byte            `json:"payload_base64,omitempty"`
	Term          *int64            `json:"term,omitempty"`
	Token         string            `json:"token"`
	ProducerID    *int64            `json:"producer_id"`
	ProducerEpoch *int16            `json:"producer_epoch"`
	Deadline      time.Time         `json:"deadline,omitzero"`
	SubmittedAt   time.Time         `json:"submitted_at,omitzero"`
	Attributes    map[string]string `json:"attributes,omitempty"`
	KeyID         string            `json:"kid,omitempty"`
	MAC           string            `json:"mac,omitempty"`
}

// EncodeEnvelope writes env in its JSON form, with the payload encoding of
// [PayloadAuto].
func EncodeEnvelope(env Envelope) ([]byte, error) {
	return encodeEnvelope(env, PayloadAuto)
}

// errPayloadNotJSON reports a payload that PayloadJSON cannot carry.
var errPayloadNotJSON = errors.New("mqtt: payload is not valid JSON")

func encodeEnvelope(env Envelope, encoding string) ([]byte, error) {
	buf, err := appendEnvelope(make([]byte, 0, 256+len(env.Payload)*4/3), env, encoding)
	if err != nil {
		if errors.Is(err, errPayloadNotJSON) {
			return nil, err
		}
		return nil, fmt.Errorf("mqtt: encode envelope: %w", err)
	}
	return buf, nil
}

// setPayload stores p in the JSON field or the base64 field.
func setPayload(p []byte, encoding string, asJSON *json.RawMessage, asBase64 *[]byte) error {
	if len(p) == 0 {
		return nil
	}
	switch {
	case encoding == PayloadBase64:
		*asBase64 = p
	case json.Valid(p):
		*asJSON = p
	case encoding == PayloadJSON:
		return errPayloadNotJSON
	default:
		*asBase64 = p
	}
	return nil
}

// getPayload returns the payload from whichever field holds it.
func getPayload(asJSON json.RawMessage, asBase64 []byte, field string) ([]byte, error) {
	if len(asJSON) > 0 && len(asBase64) > 0 {
		return nil, fmt.Errorf("%w: both %q and %q are set", ErrMalformedEnvelope, field, field+"_base64")
	}
	if len(asJSON) > 0 {
		return []byte(asJSON), nil
	}
	if len(asBase64) > 0 {
		return asBase64, nil
	}
	return nil, nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("mqtt: encode envelope: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// VersionError reports an envelope or reply of a version this package does
// not read.
type VersionError struct {
	// Version is the value of the "v" field.
	Version int

	// Reply is true for a reply, false for an envelope.
	Reply bool
}

func (e *VersionError) Error() string {
	if e.Reply {
		return fmt.Sprintf("mqtt: reply version %d, want %d", e.Version, ReplyVersion)
	}
	return fmt.Sprintf("mqtt: envelope version %d, want %d to %d", e.Version, envelopeVersionNoTerm, EnvelopeVersion)
}

// Is reports whether target is ErrMalformedEnvelope.
func (e *VersionError) Is(target error) bool { return target == ErrMalformedEnvelope }

// DecodeEnvelope reads the JSON form of an Envelope. It fails, with an
// error that matches ErrMalformedEnvelope, on invalid JSON, a version other
// than 1 or EnvelopeVersion (a *VersionError), a missing ID, a version-2
// envelope without a term or with a negative one, a token that is missing
// or whose two forms disagree, both payload fields set, "kid" without
// "mac" or the reverse, a "mac" that is not 64 hex digits, or a signed
// version-1 envelope. It verifies no MAC: [fence.Store.AdmitSigned] does. A version-1
// envelope decodes with coordination.NoTerm, whatever "term" it holds. It
// ignores unknown fields, so that a later version may add some.
func DecodeEnvelope(data []byte) (Envelope, error) {
	var w wireEnvelope
	if err := json.Unmarshal(data, &w); err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrMalformedEnvelope, err)
	}
	term := coordination.NoTerm
	switch w.V {
	case envelopeVersionNoTerm:
	case EnvelopeVersion:
		if w.Term == nil {
			return Envelope{}, fmt.Errorf("%w: term missing", ErrMalformedEnvelope)
		}
		if *w.Term < 0 {
			return Envelope{}, fmt.Errorf("%w: term %d is negative", ErrMalformedEnvelope, *w.Term)
		}
		term = coordination.Term(*w.Term)
	default:
		return Envelope{}, &VersionError{Version: w.V}
	}
	if w.ID == "" {
		return Envelope{}, fmt.Errorf("%w: no command id", ErrMalformedEnvelope)
	}
	if w.ProducerID == nil || w.ProducerEpoch == nil {
		return Envelope{}, fmt.Errorf("%w: producer_id or producer_epoch missing", ErrMalformedEnvelope)
	}
	token, err := coordination.NewFencingToken(*w.ProducerID, *w.ProducerEpoch)
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrMalformedEnvelope, err)
	}
	// The text form must be exactly the one String writes for the numbers.
	if w.Token != token.String() {
		return Envelope{}, fmt.Errorf("%w: token %q disagrees with producer_id %d and producer_epoch %d",
			ErrMalformedEnvelope, w.Token, *w.ProducerID, *w.ProducerEpoch)
	}
	payload, err := getPayload(w.Payload, w.PayloadBase64, "payload")
	if err != nil {
		return Envelope{}, err
	}
	mac, err := decodeMAC(w.KeyID, w.MAC)
	if err != nil {
		return Envelope{}, err
	}
	if mac != nil && w.V == envelopeVersionNoTerm {
		return Envelope{}, fmt.Errorf("%w: a version-%d envelope cannot be signed", ErrMalformedEnvelope, w.V)
	}
	return Envelope{
		ID:          w.ID,
		Role:        w.Role,
		Device:      w.Device,
		Action:      w.Action,
		Payload:     payload,
		Term:        term,
		Token:       token,
		Deadline:    w.Deadline,
		SubmittedAt: w.SubmittedAt,
		Attributes:  w.Attributes,
		KeyID:       w.KeyID,
		MAC:         mac,
	}, nil
}

// decodeMAC reads the "kid" and "mac" fields of an envelope or a reply.
func decodeMAC(kid, text string) ([]byte, error) {
	if (kid == "") != (text == "") {
		return nil, fmt.Errorf("%w: \"kid\" and \"mac\" go together", ErrMalformedEnvelope)
	}
	if text == "" {
		return nil, nil
	}
	if len(text) != 2*fence.MACBytes {
		return nil, fmt.Errorf("%w: mac has %d hex digits, want %d", ErrMalformedEnvelope, len(text), 2*fence.MACBytes)
	}
	mac, err := hex.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("%w: mac: %w", ErrMalformedEnvelope, err)
	}
	return mac, nil
}

// Reply statuses.
const (
	// StatusOK says the device acted on the command.
	StatusOK = "ok"
	// StatusError says the device tried and failed; it may have acted in
	// part, so the command is in doubt.
	StatusError = "error"
	// StatusRejected says the device refused the command without acting,
	// such as for a stale term or a past deadline.
	StatusRejected = "rejected"
)

// Reply is what a device publishes on the reply topic about one command. Its
// JSON form is
//
//	{"v": 1, "id": "cmd-42", "status": "ok", "detail": "opened", "data": {"percent": 40},
//	 "kid": "2026-11", "mac": "…"}
//
// with "data" following the payload rule of [Envelope] ("data_base64" for
// data that is not JSON). A device whose commands are signed signs its
// replies with the same key: "mac" is the HMAC-SHA256 of the canonical
// encoding of [Reply.Signed] ([fence.Reply.AppendCanonical]), which covers
// the device name, the command ID, the status, the detail and the data.
type Reply struct {
	// ID is the command ID the reply is about.
	ID string
	// Status is StatusOK, StatusError or StatusRejected.
	Status string
	// Detail is a short human-readable account.
	Detail string
	// Data is an optional result, such as a reading.
	Data []byte
	// KeyID and MAC authenticate the reply; empty when it is not signed.
	KeyID string
	MAC   []byte
}

// Signed returns the fields of the reply that its MAC covers; device is the
// name of the device that replies.
func (r Reply) Signed(device string) fence.Reply {
	return fence.Reply{Version: ReplyVersion, Device: device, ID: r.ID, Status: r.Status, Detail: r.Detail, Data: r.Data}
}

// SignReply returns r with KeyID and MAC set by v's signing key, for the
// device named device.
func SignReply(v *fence.Verifier, device string, r Reply) Reply {
	r.KeyID, r.MAC = v.Sign(r.Signed(device).AppendCanonical(nil))
	return r
}

type wireReply struct {
	V          int             `json:"v"`
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	Detail     string          `json:"detail,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	DataBase64 []byte          `json:"data_base64,omitempty"`
	KeyID      string          `json:"kid,omitempty"`
	MAC        string          `json:"mac,omitempty"`
}

// EncodeReply writes r in its JSON form.
func EncodeReply(r Reply) ([]byte, error) {
	w := wireReply{V: ReplyVersion, ID: r.ID, Status: r.Status, Detail: r.Detail, KeyID: r.KeyID}
	if r.MAC != nil {
		w.MAC = hex.EncodeToString(r.MAC)
	}
	if err := setPayload(r.Data, PayloadAuto, &w.Data, &w.DataBase64); err != nil {
		return nil, err
	}
	return marshal(w)
}

// DecodeReply reads the JSON form of a Reply. It fails, with an error that
// matches ErrMalformedEnvelope, on invalid JSON, another version, a missing
// ID, a status other than the three defined, or "kid" and "mac" that
// [DecodeEnvelope] would refuse. It verifies no MAC.
func DecodeReply(data []byte) (Reply, error) {
	var w wireReply
	if err := json.Unmarshal(data, &w); err != nil {
		return Reply{}, fmt.Errorf("%w: %w", ErrMalformedEnvelope, err)
	}
	if w.V != ReplyVersion {
		return Reply{}, &VersionError{Version: w.V, Reply: true}
	}
	if w.ID == "" {
		return Reply{}, fmt.Errorf("%w: reply without command id", ErrMalformedEnvelope)
	}
	switch w.Status {
	case StatusOK, StatusError, StatusRejected:
	default:
		return Reply{}, fmt.Errorf("%w: reply status %q, want ok, error or rejected", ErrMalformedEnvelope, w.Status)
	}
	data, err := getPayload(w.Data, w.DataBase64, "data")
	if err != nil {
		return Reply{}, err
	}
	mac, err := decodeMAC(w.KeyID, w.MAC)
	if err != nil {
		return Reply{}, err
	}
	return Reply{ID: w.ID, Status: w.Status, Detail: w.Detail, Data: data, KeyID: w.KeyID, MAC: mac}, nil
}
