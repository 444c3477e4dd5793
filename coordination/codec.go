package coordination

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// The frozen byte layout of StateTopic. Every integer is big-endian, and a
// string is an int16 length followed by that many bytes of UTF-8. Version 0 is
// the only version today.
//
//	key:                int16 version | int16 kind | string role | string member
//	registration value: int16 version | string member | int64 registeredAt
//	lease value:        int16 version | string member | int64 producerId |
//	                    int16 producerEpoch | int64 grantedAt | int64 deadline
//
// krabka-client-rs and krabka-streams-java read and write the same bytes, so a
// change here needs the same change in the two ports. The golden vectors in
// testdata pin the layout.
const recordVersion int16 = 0

// RecordKind names the record of [StateTopic] that a key holds. The key carries
// the kind, so one topic holds both kinds and one compaction key covers both.
type RecordKind int16

const (
	// KindRegistration marks the record that one member writes to announce
	// that it is available. A registration carries no authority.
	KindRegistration RecordKind = 0

	// KindLease marks the record that names the member that holds a role now,
	// and the time the claim of that member ends.
	KindLease RecordKind = 1
)

// String names the kind.
func (k RecordKind) String() string {
	switch k {
	case KindRegistration:
		return "registration"
	case KindLease:
		return "lease"
	}
	return "RecordKind(" + strconv.Itoa(int(k)) + ")"
}

// Key is the decoded key of one record of [StateTopic]. The key is the
// compaction key, so the topic keeps the last record of every role and every
// member.
type Key struct {
	// Kind names the record that the key holds.
	Kind RecordKind

	// Role is the role that the record belongs to.
	Role Role

	// Member is the member of a registration key. A lease key carries the
	// zero [MemberID], because a lease belongs to the role and not to one
	// member.
	Member MemberID
}

// RegistrationKey builds the key of the registration of one member of a role.
func RegistrationKey(role Role, member MemberID) Key {
	return Key{Kind: KindRegistration, Role: role, Member: member}
}

// LeaseKey builds the key of the lease of a role. It carries no member.
func LeaseKey(role Role) Key {
	return Key{Kind: KindLease, Role: role}
}

// Registration is the value of a record that announces one member of a role.
// A member writes a registration when it joins, and it writes a tombstone on
// the same key when it leaves.
type Registration struct {
	// Member is the member that registered.
	Member MemberID

	// RegisteredAt is the time the member registered, in milliseconds since
	// the Unix epoch.
	RegisteredAt int64
}

// Lease is the value of a record that names the member that holds a role now,
// and the time the claim of that member ends.
//
// Token is the authority. The broker fences a write that carries an older
// token, and no clock takes part in that check. Deadline is an anti-flap
// device. A standby waits for the deadline to pass before it challenges the
// holder, so a short pause does not move the role.
type Lease struct {
	// Member is the member that holds the role.
	Member MemberID

	// Token is the quorum-minted proof of the claim of the holder.
	Token FencingToken

	// GrantedAt is the time the holder took the lease, in milliseconds since
	// the Unix epoch. A renewal moves it forward.
	GrantedAt int64

	// Deadline is the time the lease expires, in milliseconds since the Unix
	// epoch.
	Deadline int64
}

// StateRecord is one record of [StateTopic] as it sits in the log. A
// [StateReader] returns these, and [BuildRoleState] folds them.
type StateRecord struct {
	// Offset is the offset of the record in its partition. The succession
	// rules rank candidates on the offset of a registration.
	Offset int64

	// Key is the encoded record key. [DecodeKey] reads it.
	Key []byte

	// Value is the encoded record value. An empty value is a tombstone. See
	// [IsTombstone].
	Value []byte

	// Headers are the record headers. A lease record after the first of its
	// leadership carries the [TermHeader]; see [Term].
	Headers []Header
}

// IsTombstone reports whether a record value is a tombstone. A tombstone of a
// registration key deregisters one member, and a tombstone of a lease key
// clears the lease of one role. No value of this topic is legally empty, so an
// empty value and a nil value are both tombstones.
func IsTombstone(value []byte) bool { return len(value) == 0 }

// FormatError reports a malformed record of [StateTopic].
type FormatError struct {
	// Part names the record part that failed to decode. It is "key",
	// "registration value", "lease value", or "term header".
	Part string

	offset int    // the byte offset of the fault within the part
	reason string // what is wrong there
	err    error  // the constructor error behind the fault, if any
}

// Error describes the fault and names the record part that carries it.
func (e *FormatError) Error() string {
	msg := "coordination: malformed " + e.Part + " at byte " + strconv.Itoa(e.offset) + ": " + e.reason
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

// Unwrap returns the constructor error behind the fault, such as the error of
// [NewMemberID] for an empty member id, and nil for a fault of the layout
// itself.
func (e *FormatError) Unwrap() error { return e.err }

// The names of the three record parts, as FormatError.Part carries them.
const (
	partKey          = "key"
	partRegistration = "registration value"
	partLease        = "lease value"
)

// known reports whether the kind is one that DecodeKey accepts.
func (k RecordKind) known() bool { return k == KindRegistration || k == KindLease }

// checkKey reports why DecodeKey would refuse the bytes that EncodeKey writes
// for key, or returns nil. It runs the checks that DecodeKey runs on the same
// fields: RecordKind.known on the kind, NewRole on the role and, for a
// registration key, NewMemberID on the member. Every key this package writes
// passes it first (see encodeKey).
func checkKey(key Key) error {
	if !key.Kind.known() {
		return fmt.Errorf("coordination: unknown record kind %d", int16(key.Kind))
	}
	if _, err := NewRole(key.Role.name); err != nil {
		return err
	}
	if key.Kind == KindRegistration {
		if _, err := NewMemberID(key.Member.name); err != nil {
			return err
		}
	}
	return nil
}

// checkRegistration reports why DecodeRegistration would refuse the bytes
// that EncodeRegistration writes, or returns nil: it runs NewMemberID on the
// member, as the decoder does. RegisteredAt takes any value.
func checkRegistration(registration Registration) error {
	_, err := NewMemberID(registration.Member.name)
	return err
}

// checkLease reports why DecodeLease would refuse the bytes that EncodeLease
// writes, or returns nil: it runs NewMemberID on the member and
// NewFencingToken on the token, as the decoder does, so [NoEpoch] is refused.
// GrantedAt and Deadline take any value.
func checkLease(lease Lease) error {
	if _, err := NewMemberID(lease.Member.name); err != nil {
		return err
	}
	_, err := NewFencingToken(lease.Token.producerID, lease.Token.producerEpoch)
	return err
}

// encodeKey, encodeRegistration and encodeLease encode after the check that
// their decoder makes, so that this package never writes a record that no
// reader can decode. The exported encoders keep the signatures of the spec,
// which has no error to return.
func encodeKey(key Key) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("coordination: encode key: %w", err)
	}
	return EncodeKey(key), nil
}

func encodeRegistration(registration Registration) ([]byte, error) {
	if err := checkRegistration(registration); err != nil {
		return nil, fmt.Errorf("coordination: encode registration: %w", err)
	}
	return EncodeRegistration(registration), nil
}

func encodeLease(lease Lease) ([]byte, error) {
	if err := checkLease(lease); err != nil {
		return nil, fmt.Errorf("coordination: encode lease: %w", err)
	}
	return EncodeLease(lease), nil
}

// EncodeKey encodes a key of [StateTopic].
//
// The function writes the empty member string for a lease key, whatever
// key.Member holds, because the frozen layout gives a lease no member.
//
// DecodeKey reads back what EncodeKey writes for every key that
// [RegistrationKey] or [LeaseKey] builds from a [Role] and a [MemberID] that
// their constructors made. A zero Role, a zero MemberID in a registration
// key, or a Kind other than [KindRegistration] and [KindLease] encodes to
// bytes that DecodeKey refuses; the package checks every key it writes first.
func EncodeKey(key Key) []byte {
	member := key.Member.name
	if key.Kind == KindLease {
		member = ""
	}
	b := make([]byte, 0, 8+len(key.Role.name)+len(member))
	b = binary.BigEndian.AppendUint16(b, uint16(recordVersion))
	b = binary.BigEndian.AppendUint16(b, uint16(key.Kind))
	b = appendString(b, key.Role.name)
	return appendString(b, member)
}

// EncodeRegistration encodes the value of a registration record.
// DecodeRegistration reads back what it writes for a registration whose
// Member its constructor made; a zero Member encodes to bytes that the
// decoder refuses, and the package checks every registration it writes first.
func EncodeRegistration(registration Registration) []byte {
	b := make([]byte, 0, 12+len(registration.Member.name))
	b = binary.BigEndian.AppendUint16(b, uint16(recordVersion))
	b = appendString(b, registration.Member.name)
	return binary.BigEndian.AppendUint64(b, uint64(registration.RegisteredAt))
}

// EncodeLease encodes the value of a lease record. DecodeLease reads back
// what it writes for a lease whose Member and Token their constructors made;
// a zero Member or [NoEpoch] encodes to bytes that the decoder refuses, and
// the package checks every lease it writes first.
func EncodeLease(lease Lease) []byte {
	b := make([]byte, 0, 30+len(lease.Member.name))
	b = binary.BigEndian.AppendUint16(b, uint16(recordVersion))
	b = appendString(b, lease.Member.name)
	b = binary.BigEndian.AppendUint64(b, uint64(lease.Token.producerID))
	b = binary.BigEndian.AppendUint16(b, uint16(lease.Token.producerEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(lease.GrantedAt))
	return binary.BigEndian.AppendUint64(b, uint64(lease.Deadline))
}

// appendString writes the int16 length and the bytes of s. The names of this
// package are at most 249 bytes long; a longer string, which only a zero-value
// bypass of the constructors can hold, is cut at the int16 bound so the
// output always stays decodable as a layout.
func appendString(b []byte, s string) []byte {
	if len(s) > math.MaxInt16 {
		s = s[:math.MaxInt16]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// DecodeKey decodes a key of [StateTopic]. It returns a *[FormatError] for a
// truncated buffer, for trailing bytes, for an unknown version, for an unknown
// kind, for a negative string length, for a role or a member id that its
// constructor rejects, and for a lease key that names a member.
func DecodeKey(data []byte) (Key, error) {
	r := reader{part: partKey, data: data}
	if err := r.version(); err != nil {
		return Key{}, err
	}
	kindAt := r.pos
	kind, err := r.int16("kind")
	if err != nil {
		return Key{}, err
	}
	if !RecordKind(kind).known() {
		return Key{}, r.fault(kindAt, "unknown record kind "+strconv.Itoa(int(kind)), nil)
	}
	roleAt := r.pos
	roleName, err := r.string("role")
	if err != nil {
		return Key{}, err
	}
	role, err := NewRole(roleName)
	if err != nil {
		return Key{}, r.fault(roleAt, "invalid role", err)
	}
	memberAt := r.pos
	memberName, err := r.string("member")
	if err != nil {
		return Key{}, err
	}
	if err := r.end(); err != nil {
		return Key{}, err
	}
	if RecordKind(kind) == KindLease {
		if memberName != "" {
			return Key{}, r.fault(memberAt, "lease key names member "+strconv.Quote(memberName), nil)
		}
		return LeaseKey(role), nil
	}
	member, err := NewMemberID(memberName)
	if err != nil {
		return Key{}, r.fault(memberAt, "invalid member", err)
	}
	return RegistrationKey(role, member), nil
}

// DecodeRegistration decodes the value of a registration record. It returns a
// *[FormatError] for a truncated buffer, for trailing bytes, for an unknown
// version, for a negative string length, and for a member id that its
// constructor rejects.
func DecodeRegistration(data []byte) (Registration, error) {
	r := reader{part: partRegistration, data: data}
	if err := r.version(); err != nil {
		return Registration{}, err
	}
	member, err := r.member()
	if err != nil {
		return Registration{}, err
	}
	registeredAt, err := r.int64("registeredAt")
	if err != nil {
		return Registration{}, err
	}
	if err := r.end(); err != nil {
		return Registration{}, err
	}
	return Registration{Member: member, RegisteredAt: registeredAt}, nil
}

// DecodeLease decodes the value of a lease record. It returns a
// *[FormatError] for a truncated buffer, for trailing bytes, for an unknown
// version, for a negative string length, for a member id that its constructor
// rejects, and for a negative producer id or producer epoch.
func DecodeLease(data []byte) (Lease, error) {
	r := reader{part: partLease, data: data}
	if err := r.version(); err != nil {
		return Lease{}, err
	}
	member, err := r.member()
	if err != nil {
		return Lease{}, err
	}
	tokenAt := r.pos
	producerID, err := r.int64("producerId")
	if err != nil {
		return Lease{}, err
	}
	producerEpoch, err := r.int16("producerEpoch")
	if err != nil {
		return Lease{}, err
	}
	grantedAt, err := r.int64("grantedAt")
	if err != nil {
		return Lease{}, err
	}
	deadline, err := r.int64("deadline")
	if err != nil {
		return Lease{}, err
	}
	if err := r.end(); err != nil {
		return Lease{}, err
	}
	token, err := NewFencingToken(producerID, producerEpoch)
	if err != nil {
		return Lease{}, r.fault(tokenAt, "invalid token", err)
	}
	return Lease{Member: member, Token: token, GrantedAt: grantedAt, Deadline: deadline}, nil
}

// reader walks one encoded record part and reports every fault as a
// *FormatError that names the part and the byte offset.
type reader struct {
	part string
	data []byte
	pos  int
}

func (r *reader) fault(at int, reason string, err error) *FormatError {
	return &FormatError{Part: r.part, offset: at, reason: reason, err: err}
}

func (r *reader) take(n int, field string) ([]byte, error) {
	if len(r.data)-r.pos < n {
		return nil, r.fault(r.pos, fmt.Sprintf("truncated %s: want %d bytes, have %d", field, n, len(r.data)-r.pos), nil)
	}
	b := r.data[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

func (r *reader) int16(field string) (int16, error) {
	b, err := r.take(2, field)
	if err != nil {
		return 0, err
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}

func (r *reader) int64(field string) (int64, error) {
	b, err := r.take(8, field)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

func (r *reader) string(field string) (string, error) {
	at := r.pos
	n, err := r.int16(field + " length")
	if err != nil {
		return "", err
	}
	if n < 0 {
		return "", r.fault(at, fmt.Sprintf("negative %s length %d", field, n), nil)
	}
	b, err := r.take(int(n), field)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (r *reader) version() error {
	v, err := r.int16("version")
	if err != nil {
		return err
	}
	if v != recordVersion {
		return r.fault(0, "unknown version "+strconv.Itoa(int(v)), nil)
	}
	return nil
}

func (r *reader) member() (MemberID, error) {
	at := r.pos
	name, err := r.string("member")
	if err != nil {
		return MemberID{}, err
	}
	member, err := NewMemberID(name)
	if err != nil {
		return MemberID{}, r.fault(at, "invalid member", err)
	}
	return member, nil
}

func (r *reader) end() error {
	if extra := len(r.data) - r.pos; extra > 0 {
		return r.fault(r.pos, fmt.Sprintf("%d trailing bytes", extra), nil)
	}
	return nil
}
