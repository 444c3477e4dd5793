package dispatch

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// The bounds of a checkpoint.
const (
	// MaxCheckpointPartLen is the most data one checkpoint record carries, in
	// bytes. With its key, value head and headers a part stays well below
	// Kafka's default max.message.bytes (1 MiB), so a larger checkpoint is
	// split over several records of one transaction.
	MaxCheckpointPartLen = 768 << 10

	// MaxCheckpointParts bounds the parts of one checkpoint: 3 GiB of state,
	// far above what a dedup window of compact IDs comes to.
	MaxCheckpointParts = 4096
)

// The versions of the checkpoint state layout. Version 0 held the compact
// IDs in the order of their first offset, so a reader had to sort a million
// of them by hash and a writer a copy of its window by offset; version 1
// holds them in the order of their hash, as the dedup window does, so the
// leader writes them straight from its window and a recovery decodes them
// straight into it. Version 2 is a delta: version 1 with a reference to the
// full checkpoint it builds on, and only the compact IDs added since that
// one. Encoding writes a full checkpoint as version 1 and a delta as
// version 2; decoding reads all three.
const (
	checkpointVersion0     = 0
	checkpointVersion      = 1
	checkpointVersionDelta = 2
)

// CheckpointPart is the body of an EntryCheckpoint record: one slice of the
// encoded [Checkpoint]. Every part of one checkpoint is written in the same
// transaction, so a reader sees all of them or none; it knows it holds them
// all when it has parts 0 to Parts-1 of one Sequence under one token, and it
// decodes them with [AssembleCheckpoint].
type CheckpointPart struct {
	// Sequence names the checkpoint among those of its leadership; the parts
	// of one checkpoint share it, and their token.
	Sequence int64

	// Part is the index of this part, from 0; Parts is how many there are.
	Part, Parts int

	// Data is this part's slice of the encoded state, at most
	// MaxCheckpointPartLen bytes.
	Data []byte
}

func checkCheckpointPart(p CheckpointPart) error {
	switch {
	case p.Sequence < 0:
		return fmt.Errorf("checkpoint sequence %d is negative", p.Sequence)
	case p.Parts < 1 || p.Parts > MaxCheckpointParts:
		return fmt.Errorf("checkpoint parts %d is outside 1..%d", p.Parts, MaxCheckpointParts)
	case p.Part < 0 || p.Part >= p.Parts:
		return fmt.Errorf("checkpoint part %d is outside 0..%d", p.Part, p.Parts-1)
	case len(p.Data) > MaxCheckpointPartLen:
		return fmt.Errorf("checkpoint data is %d bytes, above the limit of %d", len(p.Data), MaxCheckpointPartLen)
	}
	return nil
}

// Checkpoint is the dispatch state of one role as of the transaction that
// wrote it: everything a recovery needs from the records before it.
type Checkpoint struct {
	// Window is the dedup window of the leader that wrote it.
	Window time.Duration

	// IntakeTopic, IntakePartition and IntakeNext are the requests
	// partition of the role and the offset where intake resumes; IntakeTopic
	// is empty when the log held no intake record.
	IntakeTopic     string
	IntakePartition int
	IntakeNext      int64

	// Commands are the commands held whole: every command not settled
	// (pending or in doubt), and any settled one the leader could not hold
	// as a compact ID.
	Commands []CheckpointCommand

	// IDs are the settled commands inside the dedup window, as compact IDs,
	// in the order of their Hash; no two hold the same hash. A delta (Base
	// set) holds only those added since its base: the window is the base's
	// IDs with these in place of any of the same hash.
	IDs []CheckpointID

	// Base is the full checkpoint that a delta builds on, or nil for a full
	// checkpoint. Commands and the intake position are always whole.
	Base *CheckpointBase
}

// CheckpointBase names the full checkpoint that a delta checkpoint builds on
// by where its parts are: a reader reads the offsets from First to Last of
// the partition and takes the parts of Sequence under Token. A delta builds
// on the role's newest full checkpoint before it, in the same partition.
type CheckpointBase struct {
	Token    coordination.FencingToken
	Sequence int64

	// First and Last are the offsets of the base's first and last part.
	First, Last int64
}

func checkCheckpointBase(b CheckpointBase) error {
	if err := checkToken(b.Token); err != nil {
		return fmt.Errorf("base token: %w", err)
	}
	switch {
	case b.Sequence < 0:
		return fmt.Errorf("base sequence %d is negative", b.Sequence)
	case b.First < 0 || b.Last < b.First:
		return fmt.Errorf("base offsets %d to %d are out of order or range", b.First, b.Last)
	}
	return nil
}

// CheckpointCommand is one command held whole in a checkpoint.
type CheckpointCommand struct {
	// Command is the command of the Issued record; without one (Issued
	// false) only its ID, Role and SubmittedAt are set.
	Command Command

	// Issued reports that the log holds the command's Issued record.
	Issued bool

	// Status is StatusPending for a command waiting for its outcome,
	// StatusInDoubt, or the terminal status of a settled one.
	Status Status

	// Attempt and Token are the command's latest attempt and the token it
	// was opened under.
	Attempt int
	Token   coordination.FencingToken

	// Outcome is the command's latest outcome; unset for StatusPending.
	Outcome Outcome

	// First is the offset of the first record that names the command, or
	// -1 when its writer could not tell.
	First int64
}

// CheckpointID is a settled command inside the dedup window, held as the
// hash of its ID ([IDHash]) and the offsets of its records: a hash that
// matches is checked exactly by reading the record at First.
type CheckpointID struct {
	Hash uint64

	// First is the offset of the first record that names the command: its
	// Issued record, or its outcome for a request rejected at intake.
	First int64

	// Outcome is the offset of its terminal outcome, at or after First.
	Outcome int64

	// SubmittedAt is the command's SubmittedAt, which the window counts from.
	SubmittedAt time.Time
}

// IDHash returns the 64-bit hash of a command ID that checkpoints hold:
// FNV-1a over the ID's bytes.
func IDHash(id string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= prime
	}
	return h
}

// EncodeCheckpoint encodes cp, the state of role, and splits it into the
// parts of one checkpoint named seq, each at most MaxCheckpointPartLen
// bytes. It writes cp.IDs in the order of their hash, whatever their order
// in cp, as [AssembleCheckpoint] returns them. It returns an error for a
// state that AssembleCheckpoint would refuse.
func EncodeCheckpoint(role string, seq int64, cp Checkpoint) ([]CheckpointPart, error) {
	if err := checkCheckpointHead(role, cp); err != nil {
		return nil, fmt.Errorf("dispatch: encode checkpoint: %w", err)
	}
	ids := make([]compactID, len(cp.IDs))
	for i, id := range cp.IDs {
		if p := timeProblem(id.SubmittedAt, true); p != "" {
			return nil, fmt.Errorf("dispatch: encode checkpoint: compact ID %016x: submitted at %s", id.Hash, p)
		}
		ids[i] = toCompact(id)
	}
	sortByHash(ids)
	return encodeWindowCheckpoint(role, seq, cp, blocksOf(ids))
}

// encodeWindowCheckpoint is EncodeCheckpoint for a dispatcher's state: the
// compact IDs come from its window, in hash order, and cp's IDs are not
// read. It reads ids only, so the window may hand over its own blocks.
func encodeWindowCheckpoint(role string, seq int64, cp Checkpoint, ids idBlocks) ([]CheckpointPart, error) {
	var parts []CheckpointPart
	err := eachWindowCheckpointPart(role, seq, cp, ids, func(p CheckpointPart) error {
		p.Data = ownCopy(p.Data)
		parts = append(parts, p)
		return nil
	})
	return parts, err
}

// eachWindowCheckpointPart is encodeWindowCheckpoint that hands each part to
// emit, in order, as it is written, and writes the next into the same
// buffer: p.Data is valid only until emit returns. A writer that copies
// each part into its record so holds the state once, not twice. It checks
// the whole state, and the count of its parts, before the first emit; an
// error of emit ends the encoding and is returned.
func eachWindowCheckpointPart(role string, seq int64, cp Checkpoint, ids idBlocks, emit func(p CheckpointPart) error) error {
	if err := checkCheckpointHead(role, cp); err != nil {
		return fmt.Errorf("dispatch: encode checkpoint: %w", err)
	}
	if n := ids.count(); n > math.MaxInt32 {
		return fmt.Errorf("dispatch: encode checkpoint: %d compact IDs are too many", n)
	}
	var prev compactID
	for i, id := range ids.each() {
		var before *compactID
		if i > 0 {
			before = &prev
		}
		if err := checkCompactID(before, id); err != nil {
			return fmt.Errorf("dispatch: encode checkpoint: %w", err)
		}
		prev = id
	}
	return encodeCheckpointParts(cp, ids, func(part, parts int, data []byte) error {
		if parts > MaxCheckpointParts {
			return fmt.Errorf("dispatch: encode checkpoint: the state needs %d parts, above the limit of %d", parts, MaxCheckpointParts)
		}
		return emit(CheckpointPart{Sequence: seq, Part: part, Parts: parts, Data: data})
	})
}

// checkCompactID checks id as the decoder of version 1 does: its hash
// follows the one of prev, the ID before it if any, and its offsets and
// time are in range.
func checkCompactID(prev *compactID, id compactID) error {
	switch {
	case prev != nil && id.hash <= prev.hash:
		return fmt.Errorf("compact ID hash %016x does not follow %016x: the IDs are out of order or hold one hash twice", id.hash, prev.hash)
	case id.first < 0 || id.outcome < id.first:
		return fmt.Errorf("compact ID %016x: offsets %d and %d are out of order or range", id.hash, id.first, id.outcome)
	case id.submitted <= zeroTimeMillis || id.submitted > maxTimeMillis:
		return fmt.Errorf("compact ID %016x: submitted at %d ms is outside the years 1 to 9999", id.hash, id.submitted)
	}
	return nil
}

// AssembleCheckpoint decodes the checkpoint of role from its parts, given in
// any order. It returns a *LogFormatError, Part "checkpoint", when a part is
// missing or repeated, the parts disagree on their sequence or count, or the
// state they carry does not decode. It never panics.
func AssembleCheckpoint(role string, parts []CheckpointPart) (Checkpoint, error) {
	cp, ids, err := assembleCheckpoint(role, parts)
	if err != nil {
		return Checkpoint{}, err
	}
	if n := ids.count(); n > 0 {
		cp.IDs = make([]CheckpointID, 0, n)
		for _, id := range ids.each() {
			cp.IDs = append(cp.IDs, id.checkpointID())
		}
	}
	return cp, nil
}

// assembleCheckpoint is AssembleCheckpoint with the compact IDs returned
// apart, in hash order, as the dedup window holds them; cp.IDs is nil. It
// reads the parts' data in place, one part after another, and lets go of
// each part it has read: a caller that holds no other reference to them
// holds at most one part beside the IDs while it decodes.
func assembleCheckpoint(role string, parts []CheckpointPart) (Checkpoint, idBlocks, error) {
	r, err := checkpointReader(parts)
	if err != nil {
		return Checkpoint{}, idBlocks{}, err
	}
	cp, ids, err := decodeCheckpointState(role, r)
	if err != nil {
		return Checkpoint{}, idBlocks{}, newFormatError("checkpoint", err)
	}
	return cp, ids, nil
}

// checkpointReader checks parts, the parts of one checkpoint in any order,
// and returns a reader of their data in order. It lets go of parts.
func checkpointReader(parts []CheckpointPart) (wireReader, error) {
	fail := func(format string, args ...any) (wireReader, error) {
		return wireReader{}, newFormatError("checkpoint", fmt.Errorf(format, args...))
	}
	if len(parts) == 0 {
		return fail("no parts")
	}
	n, seq := parts[0].Parts, parts[0].Sequence
	if len(parts) != n {
		return fail("%d parts of a checkpoint of %d", len(parts), n)
	}
	ordered := make([][]byte, n)
	seen := make([]bool, n)
	for _, p := range parts {
		if err := checkPartOf(p, n, seq, func(i int) bool { return seen[i] }); err != nil {
			return fail("%w", err)
		}
		seen[p.Part], ordered[p.Part] = true, p.Data
	}
	clear(parts)
	return wireReader{buf: ordered[0], rest: ordered[1:]}, nil
}

// checkPartOf checks p, a part of the checkpoint of sequence seq in n
// parts, of which those that seen reports came already.
func checkPartOf(p CheckpointPart, n int, seq int64, seen func(part int) bool) error {
	if err := checkCheckpointPart(p); err != nil {
		return err
	}
	if p.Parts != n || p.Sequence != seq {
		return fmt.Errorf("part %d of sequence %d of %d parts beside sequence %d of %d", p.Part, p.Sequence, p.Parts, seq, n)
	}
	if seen(p.Part) {
		return fmt.Errorf("part %d repeated", p.Part)
	}
	return nil
}

// assembleCheckpointHead is assembleCheckpoint that leaves the compact IDs
// undecoded until ids is called, for a lookup that may not need them: at a
// million commands they are most of the checkpoint's bytes and of the time
// it takes to decode. An error in the IDs comes from ids.
func assembleCheckpointHead(role string, parts []CheckpointPart) (cp Checkpoint, ids func() (idBlocks, error), err error) {
	r, err := checkpointReader(parts)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	cp, version, err := decodeCheckpointHead(role, &r)
	if err != nil {
		return Checkpoint{}, nil, newFormatError("checkpoint", err)
	}
	return cp, func() (idBlocks, error) {
		ids, err := decodeCheckpointIDs(&r, version)
		if err != nil {
			return idBlocks{}, newFormatError("checkpoint", err)
		}
		return ids, nil
	}, nil
}

// encodeCheckpointState writes cp, checked, with ids, checked, in place of
// its IDs, in the layout of checkpointVersion, or of checkpointVersionDelta
// when cp has a base, and returns it split into the data of its parts, each
// in a buffer of its own and of its size.
func encodeCheckpointState(cp Checkpoint, ids idBlocks) [][]byte {
	var out [][]byte
	_ = encodeCheckpointParts(cp, ids, func(_, _ int, data []byte) error {
		out = append(out, ownCopy(data))
		return nil
	})
	return out
}

// ownCopy returns a copy of b in a buffer of its own and of its size.
func ownCopy(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// encodeCheckpointParts is encodeCheckpointState that hands each part to
// emit, with its index and the count of parts, as soon as it is full, and
// writes the next into the same buffer. The length of the whole is counted
// first, so the count is known at the first part. It returns the first
// error of emit, and writes no more after it.
func encodeCheckpointParts(cp Checkpoint, ids idBlocks, emit func(part, parts int, data []byte) error) error {
	var head wireWriter
	if cp.Base == nil {
		head.int16(checkpointVersion)
	} else {
		head.int16(checkpointVersionDelta)
	}
	encodeCheckpointHead(&head, cp)
	if b := cp.Base; b != nil {
		head.int64(b.Token.ProducerID())
		head.int16(b.Token.ProducerEpoch())
		head.int64(b.Sequence)
		head.int64(b.First)
		head.int64(b.Last)
	}
	head.int32(int32(ids.count()))
	size, prevAt := len(head.buf), int64(0)
	for _, id := range ids.each() {
		d := id.submitted - prevAt
		size += 8 + uvarintLen(uint64(id.first)) + uvarintLen(uint64(id.outcome-id.first)) + uvarintLen(uint64(d<<1)^uint64(d>>63))
		prevAt = id.submitted
	}
	w := partWriter{left: size, parts: (size + MaxCheckpointPartLen - 1) / MaxCheckpointPartLen, emit: emit}
	w.write(head.buf)
	var buf [maxCompactIDLen]byte
	prevAt = 0
	for _, id := range ids.each() {
		b := binary.BigEndian.AppendUint64(buf[:0], id.hash)
		b = binary.AppendUvarint(b, uint64(id.first))
		b = binary.AppendUvarint(b, uint64(id.outcome-id.first))
		b = binary.AppendVarint(b, id.submitted-prevAt)
		w.write(b)
		prevAt = id.submitted
	}
	return w.err
}

// partWriter writes a byte stream of a known length, in parts parts of
// MaxCheckpointPartLen bytes, into one buffer that it hands to emit each
// time a part is full, and then reuses.
type partWriter struct {
	buf         []byte
	left        int // bytes of the stream not yet written
	part, parts int
	emit        func(part, parts int, data []byte) error
	err         error
}

func (w *partWriter) write(b []byte) {
	for len(b) > 0 && w.err == nil {
		if w.buf == nil {
			w.buf = make([]byte, 0, min(w.left, MaxCheckpointPartLen))
		}
		n := min(len(b), MaxCheckpointPartLen-len(w.buf))
		w.buf = append(w.buf, b[:n]...)
		w.left -= n
		b = b[n:]
		if len(w.buf) == MaxCheckpointPartLen || w.left == 0 {
			w.err = w.emit(w.part, w.parts, w.buf)
			w.part++
			w.buf = w.buf[:0]
		}
	}
}

// maxCompactIDLen bounds the bytes of one compact ID in version 1: its
// hash in 8 bytes and three varints; minCompactIDLen is the least they take.
const (
	maxCompactIDLen = 8 + 3*binary.MaxVarintLen64
	minCompactIDLen = 8 + 3
)

// encodeCheckpointHead writes what precedes the compact IDs: the window, the
// intake position and the commands held whole.
func encodeCheckpointHead(w *wireWriter, cp Checkpoint) {
	w.int64(cp.Window.Milliseconds())
	w.string(cp.IntakeTopic)
	w.int32(int32(cp.IntakePartition))
	w.int64(cp.IntakeNext)
	w.int32(int32(len(cp.Commands)))
	for _, c := range cp.Commands {
		w.int8(int8(c.Status))
		if c.Issued {
			w.int8(1)
			writeCommand(w, c.Command)
		} else {
			w.int8(0)
			w.string(c.Command.ID)
			w.time(c.Command.SubmittedAt)
		}
		w.int32(int32(c.Attempt))
		w.int64(c.Token.ProducerID())
		w.int16(c.Token.ProducerEpoch())
		w.int64(c.First)
		if c.Status != StatusPending {
			w.int32(int32(c.Outcome.Attempt))
			w.string(c.Outcome.Reason)
			w.string(c.Outcome.Result.Detail)
			w.bytes(c.Outcome.Result.Data)
		}
	}
}

// checkCheckpointHead checks what the decoder checks of the state before
// its compact IDs, so that a state encodes only when it decodes back.
func checkCheckpointHead(role string, cp Checkpoint) error {
	if cp.Window <= 0 || cp.Window%time.Millisecond != 0 {
		return fmt.Errorf("window %s is not a positive count of milliseconds", cp.Window)
	}
	if cp.IntakeTopic == "" {
		if cp.IntakePartition != 0 || cp.IntakeNext != 0 {
			return fmt.Errorf("an intake position without a topic")
		}
	} else if err := checkIntake(IntakePosition{Topic: cp.IntakeTopic, Partition: cp.IntakePartition, NextOffset: cp.IntakeNext}); err != nil {
		return err
	}
	if cp.Base != nil {
		if err := checkCheckpointBase(*cp.Base); err != nil {
			return err
		}
	}
	if len(cp.Commands) > math.MaxInt32 || len(cp.IDs) > math.MaxInt32 {
		return fmt.Errorf("too many commands")
	}
	seen := make(map[string]bool, len(cp.Commands))
	for _, c := range cp.Commands {
		if err := checkCheckpointCommand(role, c); err != nil {
			return fmt.Errorf("command %q: %w", c.Command.ID, err)
		}
		if seen[c.Command.ID] {
			return fmt.Errorf("command %q held twice", c.Command.ID)
		}
		seen[c.Command.ID] = true
	}
	return nil
}

func checkCheckpointCommand(role string, c CheckpointCommand) error {
	if c.Issued {
		if err := checkIssued(role, c.Command); err != nil {
			return err
		}
	} else {
		if err := checkCommandID(c.Command.ID); err != nil {
			return err
		}
		if c.Command.Role != role || c.Command.Device != "" || c.Command.Action != "" || c.Command.Payload != nil ||
			!c.Command.Deadline.IsZero() || c.Command.Attributes != nil {
			return fmt.Errorf("a command without an Issued record holds more than its ID, role and submission time")
		}
		if p := timeProblem(c.Command.SubmittedAt, false); p != "" {
			return fmt.Errorf("submitted at %s", p)
		}
	}
	if c.Status != StatusPending && !c.Status.valid() {
		return fmt.Errorf("unknown status %d", int8(c.Status))
	}
	if c.Attempt < NoAttempt || c.Attempt > math.MaxInt32 {
		return fmt.Errorf("attempt %d is out of range", c.Attempt)
	}
	if err := checkToken(c.Token); err != nil {
		return err
	}
	if c.First < -1 {
		return fmt.Errorf("first offset %d is below -1", c.First)
	}
	if c.Status == StatusPending {
		if !outcomeEmpty(c.Outcome) {
			return fmt.Errorf("a pending command holds an outcome")
		}
		return nil
	}
	o := c.Outcome
	if o.CommandID != c.Command.ID || o.Status != c.Status {
		return fmt.Errorf("the outcome names %q %s, the command %q %s", o.CommandID, o.Status, c.Command.ID, c.Status)
	}
	return checkOutcome(o)
}

func outcomeEmpty(o Outcome) bool {
	return o.CommandID == "" && o.Status == StatusPending && o.Reason == "" && o.Result.Detail == "" && o.Result.Data == nil && o.Attempt == 0
}

// decodeCheckpointState decodes the state that r reads, of either version,
// and returns it with its compact IDs apart, in hash order.
func decodeCheckpointState(role string, r wireReader) (Checkpoint, idBlocks, error) {
	cp, version, err := decodeCheckpointHead(role, &r)
	if err != nil {
		return Checkpoint{}, idBlocks{}, err
	}
	ids, err := decodeCheckpointIDs(&r, version)
	if err != nil {
		return Checkpoint{}, idBlocks{}, err
	}
	return cp, ids, nil
}

// decodeCheckpointHead reads and checks what precedes the compact IDs of a
// checkpoint's state, and returns its layout version.
func decodeCheckpointHead(role string, r *wireReader) (Checkpoint, int16, error) {
	var cp Checkpoint
	version := r.int16("version")
	if r.err == nil && version != checkpointVersion && version != checkpointVersion0 && version != checkpointVersionDelta {
		r.fail("unknown version %d", version)
	}
	window := r.int64("window")
	if r.err == nil && (window <= 0 || window > math.MaxInt64/int64(time.Millisecond)) {
		r.fail("window %d ms is out of range", window)
	}
	cp.Window = time.Duration(window) * time.Millisecond
	cp.IntakeTopic = r.string("intake topic", MaxTopicLen)
	cp.IntakePartition = int(r.int32("intake partition"))
	cp.IntakeNext = r.int64("intake next offset")
	n := r.int32("command count")
	// Each command takes at least 20 bytes: a hostile count fails on the
	// bytes that remain before anything is allocated for it.
	if r.err == nil {
		if left, ok := r.fits(int64(n) * 20); n < 0 || !ok {
			r.fail("command count %d does not fit the %d bytes left", n, left)
		}
	}
	if r.err == nil && n > 0 {
		cp.Commands = make([]CheckpointCommand, 0, n)
	}
	for i := int32(0); i < n && r.err == nil; i++ {
		var c CheckpointCommand
		c.Status = Status(r.int8("status"))
		switch issued := r.int8("issued"); {
		case r.err != nil:
		case issued == 1:
			c.Issued = true
			c.Command = readCommand(r)
		case issued == 0:
			c.Command = Command{ID: r.string("command id", MaxCommandIDLen), Role: role}
			c.Command.SubmittedAt = readOptionalTime(r, "submitted at")
		default:
			r.fail("issued flag %d", issued)
		}
		c.Attempt = int(r.int32("attempt"))
		c.Token = r.token("")
		c.First = r.int64("first offset")
		if c.Status != StatusPending {
			c.Outcome = Outcome{CommandID: c.Command.ID, Status: c.Status}
			c.Outcome.Attempt = int(r.int32("outcome attempt"))
			c.Outcome.Reason = r.string("reason", MaxReasonLen)
			c.Outcome.Result.Detail = r.string("result detail", MaxDetailLen)
			c.Outcome.Result.Data = r.bytes("result data", MaxResultDataLen)
		}
		cp.Commands = append(cp.Commands, c)
	}
	if version == checkpointVersionDelta {
		b := CheckpointBase{Token: r.token("base ")}
		b.Sequence = r.int64("base sequence")
		b.First, b.Last = r.int64("base first offset"), r.int64("base last offset")
		cp.Base = &b
	}
	if r.err != nil {
		return Checkpoint{}, 0, r.err
	}
	if err := checkCheckpointHead(role, cp); err != nil {
		return Checkpoint{}, 0, err
	}
	return cp, version, nil
}

// decodeCheckpointIDs reads the compact IDs of a checkpoint's state in the
// layout of version, and checks that nothing follows them.
func decodeCheckpointIDs(r *wireReader, version int16) (idBlocks, error) {
	var ids idBlocks
	if version == checkpointVersion0 {
		ids = readCompactIDsV0(r)
	} else {
		ids = readCompactIDs(r)
	}
	r.end()
	if r.err != nil {
		return idBlocks{}, r.err
	}
	return ids, nil
}

// readIDCount reads the count of compact IDs, each taking at least least
// bytes.
func readIDCount(r *wireReader, least int) int {
	m := r.int32("id count")
	if r.err == nil {
		if left, ok := r.fits(int64(m) * int64(least)); m < 0 || !ok {
			r.fail("id count %d does not fit the %d bytes left", m, left)
		}
	}
	if r.err != nil {
		return 0
	}
	return int(m)
}

// readIDCountAhead is readIDCount for a caller that allocates for the IDs
// only as it reads them: a reader with more checks the count against the
// bound of the bytes still to come rather than take them all first, and
// decodes the IDs while the rest is read. A count above the bytes that
// come fails on the first ID that is not there.
func readIDCountAhead(r *wireReader, least int) int {
	m := r.int32("id count")
	if r.err == nil && (m < 0 || !r.mayFit(int64(m)*int64(least))) {
		r.fail("id count %d does not fit the %d bytes left", m, r.remaining())
	}
	if r.err != nil {
		return 0
	}
	return int(m)
}

// readCompactIDs reads the compact IDs of version 1, in hash order, each
// checked as checkCompactID checks it.
func readCompactIDs(r *wireReader) idBlocks {
	m := readIDCountAhead(r, minCompactIDLen)
	// The list of blocks grows with the IDs read, not with a count that a
	// reader with more has not checked against the bytes yet.
	blocks := idBlocks{list: make([][]packedID, 0, (min(m, r.inHand()/minCompactIDLen)+windowBlock-1)/windowBlock)}
	var blk []packedID
	prevHash, prevAt := uint64(0), int64(0)
	for i := range m {
		if len(blk) == cap(blk) {
			// The IDs go straight into the blocks the window keeps.
			blk = make([]packedID, 0, min(windowBlock, m-i))
		}
		var hash, first, out uint64
		var at int64
		if len(r.buf)-r.off < maxCompactIDLen {
			r.fill(maxCompactIDLen)
		}
		if b := r.buf[r.off:]; len(b) >= maxCompactIDLen {
			// The ID is read from the buffer at once; a fault is read
			// again below, for its message.
			hash = binary.BigEndian.Uint64(b)
			var n1, n2, n3 int
			if first, n1 = shortestUvarint(b[8:]); n1 > 0 {
				if out, n2 = shortestUvarint(b[8+n1:]); n2 > 0 {
					var u uint64
					if u, n3 = shortestUvarint(b[8+n1+n2:]); n3 > 0 {
						at = int64(u>>1) ^ -int64(u&1)
						r.off += 8 + n1 + n2 + n3
					}
				}
			}
			if n1 <= 0 || n2 <= 0 || n3 <= 0 {
				r.take(8, "id hash")
				r.uvarint("first offset")
				r.uvarint("outcome offset delta")
				r.varint("submitted at delta")
			}
		} else {
			if b := r.take(8, "id hash"); b != nil {
				hash = binary.BigEndian.Uint64(b)
			}
			first = r.uvarint("first offset")
			out = r.uvarint("outcome offset delta")
			at = r.varint("submitted at delta")
		}
		switch {
		case r.err != nil:
			return idBlocks{}
		case i > 0 && hash <= prevHash:
			r.fail("compact ID %d: hash %016x does not follow %016x: out of order or held twice", i, hash, prevHash)
		case first > math.MaxInt64 || out > math.MaxInt64-first:
			r.fail("compact ID %d: offset out of range", i)
		case (at > 0 && prevAt > maxTimeMillis-at) || (at < 0 && prevAt < zeroTimeMillis-at):
			r.fail("compact ID %d: submitted at out of range", i)
		}
		if r.err != nil {
			return idBlocks{}
		}
		prevHash = hash
		prevAt += at
		if prevAt <= zeroTimeMillis || prevAt > maxTimeMillis {
			r.fail("compact ID %d: submitted at %d ms is outside the years 1 to 9999", i, prevAt)
			return idBlocks{}
		}
		blk = append(blk, blocks.put(compactID{hash: prevHash, first: int64(first), outcome: int64(first + out), submitted: prevAt}))
		if len(blk) == cap(blk) {
			blocks.list = append(blocks.list, blk)
		}
	}
	return blocks
}

// readCompactIDsV0 reads the compact IDs of version 0, in the order of
// their first offset, and returns them in hash order.
func readCompactIDsV0(r *wireReader) idBlocks {
	ids := make([]compactID, readIDCount(r, 11))
	prevFirst, prevAt := int64(0), int64(0)
	for i := range ids {
		var id compactID
		if b := r.take(8, "id hash"); b != nil {
			id.hash = binary.BigEndian.Uint64(b)
		}
		first := r.uvarint("first offset delta")
		out := r.uvarint("outcome offset delta")
		at := r.varint("submitted at delta")
		if r.err != nil {
			return idBlocks{}
		}
		if first > math.MaxInt64-uint64(prevFirst) || out > math.MaxInt64-(uint64(prevFirst)+first) {
			r.fail("compact ID %d: offset out of range", i)
			return idBlocks{}
		}
		id.first = prevFirst + int64(first)
		id.outcome = id.first + int64(out)
		if (at > 0 && prevAt > maxTimeMillis-at) || (at < 0 && prevAt < zeroTimeMillis-at) {
			r.fail("compact ID %d: submitted at out of range", i)
			return idBlocks{}
		}
		prevAt += at
		id.submitted = prevAt
		switch {
		case i > 0 && id.first == prevFirst:
			r.fail("compact ID at offset %d does not follow offset %d", id.first, prevFirst)
		case prevAt <= zeroTimeMillis || prevAt > maxTimeMillis:
			r.fail("compact ID at offset %d: submitted at %d ms is outside the years 1 to 9999", id.first, prevAt)
		}
		if r.err != nil {
			return idBlocks{}
		}
		prevFirst = id.first
		ids[i] = id
	}
	sortByHash(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i].hash == ids[i-1].hash {
			r.fail("compact ID hash %016x held twice", ids[i].hash)
			return idBlocks{}
		}
	}
	return blocksOf(ids)
}

// readOptionalTime reads a time that may be the zero time.
func readOptionalTime(r *wireReader, what string) time.Time {
	ms := r.int64(what)
	if r.err != nil || ms == zeroTimeMillis {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
