package dispatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// The bounds of the text and data of an outcome and an intake record.
const (
	// MaxReasonLen is the longest outcome reason, in bytes.
	MaxReasonLen = 4096

	// MaxDetailLen is the longest Result.Detail, in bytes.
	MaxDetailLen = 4096

	// MaxResultDataLen is the largest Result.Data, in bytes.
	MaxResultDataLen = 256 << 10

	// MaxTopicLen is the longest topic name, Kafka's own bound.
	MaxTopicLen = 249
)

// The only versions of the entry layouts today.
const (
	entryKeyVersion   = 0
	entryValueVersion = 0
)

// errCommandRole reports an Issued command whose role differs from its entry.
var errCommandRole = errors.New("the command's role differs from the entry's role")

// EncodeEntry encodes a record of the command log. The key carries the kind,
// the role and the command ID; the value carries the token, the member, the
// time and the body. See "The command log" in the package doc for the bytes.
//
// It returns an error, and writes nothing, for an entry that DecodeEntry
// would refuse: an unknown kind, a body other than the one Kind names, a role
// or member its constructor rejects, an At that does not survive the
// millisecond encoding (see timeProblem), a text or data field over its
// bound, an invalid command, an attempt or offset out of range. An Issued
// command with an empty Role is recorded with the entry's role.
func EncodeEntry(e Entry) (key, value []byte, err error) {
	if err := checkEntryHead(e); err != nil {
		return nil, nil, fmt.Errorf("dispatch: encode %s entry: %w", e.Kind, err)
	}
	id := ""
	// The body is written after the value's head, in the value itself, so
	// that a large body (a checkpoint's part) is copied once.
	body := wireWriter{buf: make([]byte, 0, 22+len(e.Member)+bodySize(e))}
	body.int16(entryValueVersion)
	body.int64(e.Token.ProducerID())
	body.int16(e.Token.ProducerEpoch())
	body.string(e.Member)
	body.time(e.At)
	switch e.Kind {
	case EntryIssued:
		cmd := e.Issued.Command
		if cmd.Role == "" {
			cmd.Role = e.Role
		}
		if err := checkIssued(e.Role, cmd); err != nil {
			return nil, nil, fmt.Errorf("dispatch: encode issued entry: %w", err)
		}
		id = cmd.ID
		writeCommand(&body, cmd)
	case EntryRedispatched:
		d := e.Redispatched
		if err := checkRedispatched(*d); err != nil {
			return nil, nil, fmt.Errorf("dispatch: encode redispatched entry: %w", err)
		}
		id = d.CommandID
		body.int32(int32(d.Attempt))
		body.int8(int8(d.Reason))
	case EntryOutcome:
		o := e.Outcome
		if err := checkOutcome(*o); err != nil {
			return nil, nil, fmt.Errorf("dispatch: encode outcome entry: %w", err)
		}
		id = o.CommandID
		body.int8(int8(o.Status))
		body.int32(int32(o.Attempt))
		body.string(o.Reason)
		body.string(o.Result.Detail)
		body.bytes(o.Result.Data)
	case EntryIntake:
		p := e.Intake
		if err := checkIntake(*p); err != nil {
			return nil, nil, fmt.Errorf("dispatch: encode intake entry: %w", err)
		}
		body.string(p.Topic)
		body.int32(int32(p.Partition))
		body.int64(p.FromOffset)
		body.int64(p.NextOffset)
	case EntryCheckpoint:
		p := e.Checkpoint
		if err := checkCheckpointPart(*p); err != nil {
			return nil, nil, fmt.Errorf("dispatch: encode checkpoint entry: %w", err)
		}
		body.int64(p.Sequence)
		body.int32(int32(p.Part))
		body.int32(int32(p.Parts))
		body.bytes(p.Data)
	}

	k := wireWriter{buf: make([]byte, 0, 8+len(e.Role)+len(id))}
	k.int16(entryKeyVersion)
	k.int16(int16(e.Kind))
	k.string(e.Role)
	k.string(id)

	return k.buf, body.buf, nil
}

// bodySize returns about how many bytes the body of e takes, checked: a
// bound for the common case, not a limit.
func bodySize(e Entry) int {
	switch e.Kind {
	case EntryIssued:
		return commandSize(e.Issued.Command) + len(e.Role)
	case EntryOutcome:
		return 32 + len(e.Outcome.Reason) + len(e.Outcome.Result.Detail) + len(e.Outcome.Result.Data)
	case EntryCheckpoint:
		return 20 + len(e.Checkpoint.Data)
	}
	return 64 + len(e.Role)
}

// checkEntryHead checks the fields every kind shares, and that exactly the
// body that Kind names is set.
func checkEntryHead(e Entry) error {
	if _, err := coordination.NewRole(e.Role); err != nil {
		return err
	}
	if _, err := coordination.NewMemberID(e.Member); err != nil {
		return err
	}
	if err := checkToken(e.Token); err != nil {
		return err
	}
	if p := timeProblem(e.At, true); p != "" {
		return fmt.Errorf("the entry's At %s", p)
	}
	set := 0
	for _, b := range []bool{e.Issued != nil, e.Redispatched != nil, e.Outcome != nil, e.Intake != nil, e.Checkpoint != nil} {
		if b {
			set++
		}
	}
	var want bool
	switch e.Kind {
	case EntryIssued:
		want = e.Issued != nil
	case EntryRedispatched:
		want = e.Redispatched != nil
	case EntryOutcome:
		want = e.Outcome != nil
	case EntryIntake:
		want = e.Intake != nil
	case EntryCheckpoint:
		want = e.Checkpoint != nil
	default:
		return fmt.Errorf("unknown kind %d", int16(e.Kind))
	}
	if !want || set != 1 {
		return fmt.Errorf("want exactly the %s body set, found %d bodies", e.Kind, set)
	}
	return nil
}

func checkIssued(role string, cmd Command) error {
	if err := cmd.Validate(); err != nil {
		return err
	}
	if cmd.Role != role {
		return fmt.Errorf("command role %q, entry role %q: %w", cmd.Role, role, errCommandRole)
	}
	return nil
}

func checkCommandID(id string) error {
	return checkText("ID", id, MaxCommandIDLen, true)
}

func checkRedispatched(d Redispatched) error {
	if err := checkCommandID(d.CommandID); err != nil {
		return err
	}
	if d.Attempt <= FirstAttempt || d.Attempt > math.MaxInt32 {
		return fmt.Errorf("attempt %d is outside %d..%d", d.Attempt, FirstAttempt+1, math.MaxInt32)
	}
	if !d.Reason.valid() {
		return fmt.Errorf("unknown redispatch reason %d", int8(d.Reason))
	}
	return nil
}

func checkOutcome(o Outcome) error {
	if err := checkCommandID(o.CommandID); err != nil {
		return err
	}
	if !o.Status.valid() {
		return fmt.Errorf("status %s cannot be recorded", o.Status)
	}
	if o.Attempt < NoAttempt || o.Attempt > math.MaxInt32 {
		return fmt.Errorf("attempt %d is outside %d..%d", o.Attempt, NoAttempt, math.MaxInt32)
	}
	if o.Attempt == NoAttempt && o.Status != StatusRejected {
		return fmt.Errorf("an outcome without an attempt must be %s, not %s", StatusRejected, o.Status)
	}
	switch {
	case len(o.Reason) > MaxReasonLen:
		return fmt.Errorf("reason is %d bytes, above the limit of %d", len(o.Reason), MaxReasonLen)
	case len(o.Result.Detail) > MaxDetailLen:
		return fmt.Errorf("result detail is %d bytes, above the limit of %d", len(o.Result.Detail), MaxDetailLen)
	case len(o.Result.Data) > MaxResultDataLen:
		return fmt.Errorf("result data is %d bytes, above the limit of %d", len(o.Result.Data), MaxResultDataLen)
	}
	return nil
}

func checkIntake(p IntakePosition) error {
	switch {
	case p.Topic == "" || len(p.Topic) > MaxTopicLen:
		return fmt.Errorf("topic %.32q is empty or over %d bytes", p.Topic, MaxTopicLen)
	case p.Partition < 0 || p.Partition > math.MaxInt32:
		return fmt.Errorf("partition %d is out of range", p.Partition)
	case p.FromOffset < 0:
		return fmt.Errorf("from offset %d is negative", p.FromOffset)
	case p.NextOffset < p.FromOffset:
		return fmt.Errorf("next offset %d is below from offset %d", p.NextOffset, p.FromOffset)
	}
	return nil
}

// keyRole returns the role that the key of a record of the command log
// names, without decoding the rest of the record, and whether the key
// begins as DecodeEntry reads it: a known version and a role of a valid
// length.
func keyRole(key []byte) ([]byte, bool) {
	if len(key) < 6 || int16(binary.BigEndian.Uint16(key)) != entryKeyVersion {
		return nil, false
	}
	n := int(int16(binary.BigEndian.Uint16(key[4:])))
	if n < 0 || n > coordination.MaxRoleLen || len(key) < 6+n {
		return nil, false
	}
	return key[6 : 6+n], true
}

// DecodeEntry decodes a record of the command log. The returned entry has no
// Offset and no Batch, and its Term is [coordination.NoTerm]: they live
// outside the value, and [DecodeRecord] sets them from a fetched record.
//
// It returns a *LogFormatError, with Part "entry key" or "entry value", for
// any input that EncodeEntry would not have written: a truncated buffer,
// trailing bytes, an unknown version or kind, a negative length or one over
// its bound, a role or member its constructor rejects, a negative token, an
// invalid command (the error wraps its *InvalidCommandError), an unknown
// status or reason, an attempt or offset out of range. It never panics, and
// it never allocates more than the size of its input.
func DecodeEntry(key, value []byte) (Entry, error) {
	return decodeEntry(key, value, false)
}

// decodeEntry is DecodeEntry. With shareParts set, the Data of a checkpoint
// part is a slice of value, not a copy: a large checkpoint is tens of
// megabytes of parts, which a recovery decodes at once.
func decodeEntry(key, value []byte, shareParts bool) (Entry, error) {
	e := Entry{Term: coordination.NoTerm}
	kr := wireReader{buf: key}
	if v := kr.int16("version"); kr.err == nil && v != entryKeyVersion {
		kr.fail("unknown version %d", v)
	}
	e.Kind = EntryKind(kr.int16("kind"))
	if kr.err == nil && (e.Kind < EntryIssued || e.Kind > EntryCheckpoint) {
		kr.fail("unknown kind %d", int16(e.Kind))
	}
	e.Role = kr.string("role", coordination.MaxRoleLen)
	id := kr.string("command id", MaxCommandIDLen)
	kr.end()
	if kr.err == nil {
		if _, err := coordination.NewRole(e.Role); err != nil {
			kr.fail("%w", err)
		}
	}
	if kr.err == nil && (e.Kind == EntryIntake || e.Kind == EntryCheckpoint) && id != "" {
		kr.fail("an %s key names command %q", e.Kind, id)
	}
	if kr.err == nil && e.Kind != EntryIntake && e.Kind != EntryCheckpoint {
		if err := checkCommandID(id); err != nil {
			kr.fail("command id: %w", err)
		}
	}
	if kr.err != nil {
		return Entry{}, newFormatError("entry key", kr.err)
	}

	r := wireReader{buf: value}
	if v := r.int16("version"); r.err == nil && v != entryValueVersion {
		r.fail("unknown version %d", v)
	}
	e.Token = r.token("")
	e.Member = r.string("member", coordination.MaxMemberIDLen)
	if r.err == nil {
		if _, err := coordination.NewMemberID(e.Member); err != nil {
			r.fail("%w", err)
		}
	}
	e.At = r.time("at")
	if r.err == nil {
		if p := timeProblem(e.At, true); p != "" {
			r.fail("at %s", p)
		}
	}
	if r.err != nil {
		return Entry{}, newFormatError("entry value", r.err)
	}

	var err error
	switch e.Kind {
	case EntryIssued:
		cmd := readCommand(&r)
		r.end()
		if r.err == nil {
			if cmd.ID != id {
				r.fail("the key names command %q, the value %q", id, cmd.ID)
			} else if err = checkIssued(e.Role, cmd); err != nil {
				r.fail("%w", err)
			}
		}
		e.Issued = &Issued{Command: cmd}
	case EntryRedispatched:
		d := Redispatched{CommandID: id}
		d.Attempt = int(r.int32("attempt"))
		d.Reason = RedispatchReason(r.int8("reason"))
		r.end()
		if r.err == nil {
			if err = checkRedispatched(d); err != nil {
				r.fail("%w", err)
			}
		}
		e.Redispatched = &d
	case EntryOutcome:
		o := Outcome{CommandID: id}
		o.Status = Status(r.int8("status"))
		o.Attempt = int(r.int32("attempt"))
		o.Reason = r.string("reason", MaxReasonLen)
		o.Result.Detail = r.string("result detail", MaxDetailLen)
		o.Result.Data = r.bytes("result data", MaxResultDataLen)
		r.end()
		if r.err == nil {
			if err = checkOutcome(o); err != nil {
				r.fail("%w", err)
			}
		}
		e.Outcome = &o
	case EntryIntake:
		p := IntakePosition{}
		p.Topic = r.string("topic", MaxTopicLen)
		p.Partition = int(r.int32("partition"))
		p.FromOffset = r.int64("from offset")
		p.NextOffset = r.int64("next offset")
		r.end()
		if r.err == nil {
			if err = checkIntake(p); err != nil {
				r.fail("%w", err)
			}
		}
		e.Intake = &p
	case EntryCheckpoint:
		p := CheckpointPart{}
		p.Sequence = r.int64("sequence")
		p.Part = int(r.int32("part"))
		p.Parts = int(r.int32("parts"))
		if shareParts {
			p.Data = r.sharedBytes("data", MaxCheckpointPartLen)
		} else {
			p.Data = r.bytes("data", MaxCheckpointPartLen)
		}
		r.end()
		if r.err == nil {
			if err = checkCheckpointPart(p); err != nil {
				r.fail("%w", err)
			}
		}
		e.Checkpoint = &p
	}
	if r.err != nil {
		return Entry{}, newFormatError("entry value", r.err)
	}
	return e, nil
}
