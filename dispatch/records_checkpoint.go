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

// The only version of the checkpoint state layout today.
const checkpointVersion = 0

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
	// in the order of their First offset.
	IDs []CheckpointID
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
// bytes. It returns an error for a state that [AssembleCheckpoint] would
// refuse.
func EncodeCheckpoint(role string, seq int64, cp Checkpoint) ([]CheckpointPart, error) {
	if err := checkCheckpointState(role, cp, true); err != nil {
		return nil, fmt.Errorf("dispatch: encode checkpoint: %w", err)
	}
	ids := make([]compactID, len(cp.IDs))
	for i, id := range cp.IDs {
		ids[i] = toCompact(id)
	}
	return splitCheckpoint(seq, encodeCheckpointState(cp, ids))
}

// encodeWindowCheckpoint is EncodeCheckpoint for a dispatcher's state: the
// compact IDs come from its window, in the order of their first offset, and
// hold distinct hashes, as the window holds them; cp holds no IDs.
func encodeWindowCheckpoint(role string, seq int64, cp Checkpoint, ids []compactID) ([]CheckpointPart, error) {
	if err := checkCheckpointState(role, cp, true); err != nil {
		return nil, fmt.Errorf("dispatch: encode checkpoint: %w", err)
	}
	prev := int64(-1)
	for _, id := range ids {
		if id.first <= prev || id.outcome < id.first || id.submitted <= zeroTimeMillis || id.submitted > maxTimeMillis {
			return nil, fmt.Errorf("dispatch: encode checkpoint: compact ID at offset %d after offset %d is out of order or range", id.first, prev)
		}
		prev = id.first
	}
	return splitCheckpoint(seq, encodeCheckpointState(cp, ids))
}

// splitCheckpoint splits an encoded state into the parts of checkpoint seq.
func splitCheckpoint(seq int64, data []byte) ([]CheckpointPart, error) {
	n := max(1, (len(data)+MaxCheckpointPartLen-1)/MaxCheckpointPartLen)
	if n > MaxCheckpointParts {
		return nil, fmt.Errorf("dispatch: encode checkpoint: %d bytes need %d parts, above the limit of %d", len(data), n, MaxCheckpointParts)
	}
	parts := make([]CheckpointPart, n)
	for i := range parts {
		end := min(len(data), (i+1)*MaxCheckpointPartLen)
		parts[i] = CheckpointPart{Sequence: seq, Part: i, Parts: n, Data: data[i*MaxCheckpointPartLen : end]}
	}
	return parts, nil
}

// AssembleCheckpoint decodes the checkpoint of role from its parts, given in
// any order. It returns a *LogFormatError, Part "checkpoint", when a part is
// missing or repeated, the parts disagree on their sequence or count, or the
// state they carry does not decode. It never panics.
func AssembleCheckpoint(role string, parts []CheckpointPart) (Checkpoint, error) {
	return assembleCheckpoint(role, parts, true)
}

// assembleCheckpoint is AssembleCheckpoint; without distinct it leaves the
// test that no two compact IDs share a hash to its caller, as a recovery
// that sorts them by hash anyway does.
func assembleCheckpoint(role string, parts []CheckpointPart, distinct bool) (Checkpoint, error) {
	fail := func(format string, args ...any) (Checkpoint, error) {
		return Checkpoint{}, newFormatError("checkpoint", fmt.Errorf(format, args...))
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
	size := 0
	for _, p := range parts {
		if err := checkCheckpointPart(p); err != nil {
			return fail("%w", err)
		}
		if p.Parts != n || p.Sequence != seq {
			return fail("part %d of sequence %d of %d parts beside sequence %d of %d", p.Part, p.Sequence, p.Parts, seq, n)
		}
		if seen[p.Part] {
			return fail("part %d repeated", p.Part)
		}
		seen[p.Part], ordered[p.Part] = true, p.Data
		size += len(p.Data)
	}
	data := make([]byte, 0, size)
	for _, b := range ordered {
		data = append(data, b...)
	}
	cp, err := decodeCheckpointState(role, data, distinct)
	if err != nil {
		return Checkpoint{}, newFormatError("checkpoint", err)
	}
	return cp, nil
}

// encodeCheckpointState writes cp, checked, with ids in place of its IDs.
func encodeCheckpointState(cp Checkpoint, ids []compactID) []byte {
	w := wireWriter{buf: make([]byte, 0, 64+len(ids)*14)}
	w.int16(checkpointVersion)
	w.int64(cp.Window.Milliseconds())
	w.string(cp.IntakeTopic)
	w.int32(int32(cp.IntakePartition))
	w.int64(cp.IntakeNext)
	w.int32(int32(len(cp.Commands)))
	for _, c := range cp.Commands {
		w.int8(int8(c.Status))
		if c.Issued {
			w.int8(1)
			writeCommand(&w, c.Command)
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
	w.int32(int32(len(ids)))
	prevFirst, prevAt := int64(0), int64(0)
	for _, id := range ids {
		w.buf = binary.BigEndian.AppendUint64(w.buf, id.hash)
		w.buf = binary.AppendUvarint(w.buf, uint64(id.first-prevFirst))
		w.buf = binary.AppendUvarint(w.buf, uint64(id.outcome-id.first))
		w.buf = binary.AppendVarint(w.buf, id.submitted-prevAt)
		prevFirst, prevAt = id.first, id.submitted
	}
	return w.buf
}

// checkCheckpointState checks what the decoder checks, so that a state
// encodes only when it decodes back.
func checkCheckpointState(role string, cp Checkpoint, distinct bool) error {
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
	var hashes []uint64
	if distinct {
		hashes = make([]uint64, 0, len(cp.IDs))
	}
	prev := int64(-1)
	for _, id := range cp.IDs {
		switch {
		case id.First <= prev:
			return fmt.Errorf("compact ID at offset %d does not follow offset %d", id.First, prev)
		case id.Outcome < id.First:
			return fmt.Errorf("compact ID at offset %d has its outcome before it, at %d", id.First, id.Outcome)
		}
		if p := timeProblem(id.SubmittedAt, true); p != "" {
			return fmt.Errorf("compact ID at offset %d: submitted at %s", id.First, p)
		}
		if distinct {
			hashes = append(hashes, id.Hash)
		}
		prev = id.First
	}
	if !distinct {
		return nil
	}
	// A sort, not a map: a million hashes cost 8 MB and no map.
	radixSort(hashes, func(h uint64) uint64 { return h })
	for i := 1; i < len(hashes); i++ {
		if hashes[i] == hashes[i-1] {
			return fmt.Errorf("compact ID hash %016x held twice", hashes[i])
		}
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
	if _, err := coordination.NewFencingToken(c.Token.ProducerID(), c.Token.ProducerEpoch()); err != nil {
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

func decodeCheckpointState(role string, data []byte, distinct bool) (Checkpoint, error) {
	var cp Checkpoint
	r := wireReader{buf: data}
	if v := r.int16("version"); r.err == nil && v != checkpointVersion {
		r.fail("unknown version %d", v)
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
	if r.err == nil && (n < 0 || int64(n)*20 > int64(len(data)-r.off)) {
		r.fail("command count %d does not fit the %d bytes left", n, len(data)-r.off)
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
			c.Command = readCommand(&r)
		case issued == 0:
			c.Command = Command{ID: r.string("command id", MaxCommandIDLen), Role: role}
			c.Command.SubmittedAt = readOptionalTime(&r, "submitted at")
		default:
			r.fail("issued flag %d", issued)
		}
		c.Attempt = int(r.int32("attempt"))
		pid, epoch := r.int64("producer id"), r.int16("producer epoch")
		if r.err == nil {
			t, err := coordination.NewFencingToken(pid, epoch)
			if err != nil {
				r.fail("token: %w", err)
			}
			c.Token = t
		}
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
	m := r.int32("id count")
	// Each compact ID takes at least 11 bytes.
	if r.err == nil && (m < 0 || int64(m)*11 > int64(len(data)-r.off)) {
		r.fail("id count %d does not fit the %d bytes left", m, len(data)-r.off)
	}
	if r.err == nil && m > 0 {
		cp.IDs = make([]CheckpointID, 0, m)
	}
	prevFirst, prevAt := int64(0), int64(0)
	for i := int32(0); i < m && r.err == nil; i++ {
		var id CheckpointID
		if b := r.take(8, "id hash"); b != nil {
			id.Hash = binary.BigEndian.Uint64(b)
		}
		first := r.uvarint("first offset delta")
		out := r.uvarint("outcome offset delta")
		at := r.varint("submitted at delta")
		if r.err != nil {
			break
		}
		if first > math.MaxInt64-uint64(prevFirst) || out > math.MaxInt64-(uint64(prevFirst)+first) {
			r.fail("compact ID %d: offset out of range", i)
			break
		}
		id.First = prevFirst + int64(first)
		id.Outcome = id.First + int64(out)
		if (at > 0 && prevAt > maxTimeMillis-at) || (at < 0 && prevAt < zeroTimeMillis-at) {
			r.fail("compact ID %d: submitted at out of range", i)
			break
		}
		prevAt += at
		id.SubmittedAt = time.UnixMilli(prevAt).UTC()
		prevFirst = id.First
		cp.IDs = append(cp.IDs, id)
	}
	r.end()
	if r.err != nil {
		return Checkpoint{}, r.err
	}
	if err := checkCheckpointState(role, cp, distinct); err != nil {
		return Checkpoint{}, err
	}
	return cp, nil
}

// readOptionalTime reads a time that may be the zero time.
func readOptionalTime(r *wireReader, what string) time.Time {
	ms := r.int64(what)
	if r.err != nil || ms == zeroTimeMillis {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
