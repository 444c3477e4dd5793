package dispatch

import (
	"fmt"
	"strconv"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.opentelemetry.io/otel/trace"
)

// EntryKind names a record of the command log. The kind travels in the
// record key, so a reader can filter records without decoding their values.
type EntryKind int16

const (
	// EntryIssued records a command, written under the leadership token
	// before any dispatch of it. It opens attempt 1.
	EntryIssued EntryKind = 1

	// EntryRedispatched records a later attempt of an issued command, after a
	// takeover or an operator's resolve. It is written, and committed, before
	// that dispatch.
	EntryRedispatched EntryKind = 2

	// EntryOutcome records what became of a command.
	EntryOutcome EntryKind = 3

	// EntryIntake records the next offset of the requests partition. It is
	// written in the same transaction as the Issued records of the requests
	// it covers.
	EntryIntake EntryKind = 4

	// EntryCheckpoint records one part of a checkpoint: the role's dispatch
	// state, split over the parts of one transaction (see [CheckpointPart]
	// and [Checkpoint]). Recovery starts from the newest complete one.
	EntryCheckpoint EntryKind = 5
)

// String names the kind.
func (k EntryKind) String() string {
	switch k {
	case EntryIssued:
		return "issued"
	case EntryRedispatched:
		return "redispatched"
	case EntryOutcome:
		return "outcome"
	case EntryIntake:
		return "intake"
	case EntryCheckpoint:
		return "checkpoint"
	}
	return "EntryKind(" + strconv.Itoa(int(k)) + ")"
}

// Status is the state of a command as its outcome records tell it.
type Status int8

const (
	// StatusPending is the status of a command that is issued and has no
	// outcome yet, or whose latest attempt has none. It is never written in
	// an outcome record.
	StatusPending Status = 0

	// StatusSucceeded: the device acted and reported success.
	StatusSucceeded Status = 1

	// StatusFailed: the device reported that the action failed, or refused to
	// retry; the outcome's Reason says why.
	StatusFailed Status = 2

	// StatusExpired: the deadline passed before the command was dispatched,
	// so it never was.
	StatusExpired Status = 3

	// StatusRejected: the command was refused without acting: invalid at
	// intake, or refused by the device.
	StatusRejected Status = 4

	// StatusInDoubt: the device may or may not have acted. It is not
	// terminal: an operator resolves it, by a redispatch (a Redispatched
	// record, then a new outcome) or by a cancel (StatusCancelled).
	StatusInDoubt Status = 5

	// StatusCancelled: an operator closed an in-doubt command without
	// dispatching it again.
	StatusCancelled Status = 6
)

// String names the status.
func (s Status) String() string {
	switch s {
	case StatusPending:
		return "pending"
	case StatusSucceeded:
		return "succeeded"
	case StatusFailed:
		return "failed"
	case StatusExpired:
		return "expired"
	case StatusRejected:
		return "rejected"
	case StatusInDoubt:
		return "in-doubt"
	case StatusCancelled:
		return "cancelled"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Terminal reports whether the status closes the command for good: no
// record of the command may follow a terminal outcome.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusExpired, StatusRejected, StatusCancelled:
		return true
	}
	return false
}

// valid reports whether an outcome record may carry the status.
func (s Status) valid() bool { return s >= StatusSucceeded && s <= StatusCancelled }

// RedispatchReason says why a command is dispatched again.
type RedispatchReason int8

const (
	// RedispatchTakeover: a new leader found the command issued with no
	// outcome, and its device declared a redispatch safe.
	RedispatchTakeover RedispatchReason = 1

	// RedispatchOperator: an operator resolved an in-doubt command by
	// dispatching it again.
	RedispatchOperator RedispatchReason = 2
)

// String names the reason.
func (r RedispatchReason) String() string {
	switch r {
	case RedispatchTakeover:
		return "takeover"
	case RedispatchOperator:
		return "operator"
	}
	return "RedispatchReason(" + strconv.Itoa(int(r)) + ")"
}

func (r RedispatchReason) valid() bool { return r == RedispatchTakeover || r == RedispatchOperator }

// FirstAttempt is the attempt that an Issued record opens. Each Redispatched
// record opens the next one.
const FirstAttempt = 1

// NoAttempt is the attempt of an outcome for a command that was never issued:
// a request rejected at intake.
const NoAttempt = 0

// Issued is the body of an EntryIssued record.
type Issued struct {
	// Command is the command as the leader accepted it. Its Role is the
	// entry's role.
	Command Command
}

// Redispatched is the body of an EntryRedispatched record.
type Redispatched struct {
	// CommandID names the issued command.
	CommandID string

	// Attempt is the number of the attempt this record opens: one more than
	// the attempt before it, so at least 2.
	Attempt int

	// Reason says why the command is dispatched again.
	Reason RedispatchReason
}

// Outcome is the body of an EntryOutcome record.
type Outcome struct {
	// CommandID names the command.
	CommandID string

	// Status is what became of the command.
	Status Status

	// Reason explains a status other than success: the device error, the
	// validation fault, the operator's note. At most MaxReasonLen bytes.
	Reason string

	// Result is what the device reported, if it acted.
	Result Result

	// Attempt is the attempt the outcome closes: FirstAttempt for the
	// dispatch that followed the Issued record, the number of the latest
	// Redispatched record after one, and NoAttempt for a request rejected at
	// intake, which has no Issued record.
	Attempt int
}

// IntakePosition is the body of an EntryIntake record. It covers the request
// records at offsets FromOffset up to, not including, NextOffset of one
// partition of the requests topic, and it is written in the same transaction
// as the records that answer them (see the package doc, "The command log").
type IntakePosition struct {
	// Topic is the requests topic.
	Topic string

	// Partition is the partition of the requests topic.
	Partition int

	// FromOffset is the first request offset covered: the NextOffset of the
	// previous intake record of the same partition, or where intake started
	// when there is none.
	FromOffset int64

	// NextOffset is the offset where the next intake resumes.
	NextOffset int64
}

// BatchInfo is what a reader learns from the Kafka record batch that held an
// entry. It is not part of the encoded record.
type BatchInfo struct {
	// ProducerID and ProducerEpoch are the producer that wrote the batch.
	ProducerID    int64
	ProducerEpoch int16

	// Transactional reports whether the batch was written in a transaction.
	Transactional bool
}

// Entry is one record of the command log.
type Entry struct {
	// Offset is the record's offset in its partition. A reader sets it; it is
	// not encoded.
	Offset int64

	// Kind names the record, and which one of the bodies below is set.
	Kind EntryKind

	// Role is the role whose leader wrote the record.
	Role string

	// Token is the fencing token of the transaction that wrote the record.
	Token coordination.FencingToken

	// Term is the term of the leadership that wrote the record, from the
	// record's [coordination.TermHeader]; [coordination.NoTerm] for a record
	// that carries none, such as one written before terms existed. A reader
	// sets it; it is not encoded in the value.
	Term coordination.Term

	// Member is the member that held the role.
	Member string

	// At is when the leader wrote the record, at millisecond precision.
	At time.Time

	// Exactly one body is set, the one that Kind names.
	Issued       *Issued
	Redispatched *Redispatched
	Outcome      *Outcome
	Intake       *IntakePosition
	Checkpoint   *CheckpointPart

	// Batch is set by a reader that knows the record batch, such as
	// [ReadLog]; it is nil otherwise. It is not encoded.
	Batch *BatchInfo

	// Trace is the W3C trace context of the record's "traceparent" header:
	// the trace that the command's submission began, which a new leader
	// continues when it settles the command at a takeover. A reader of the
	// headers sets it, as [DecodeRecord] does; it is not encoded in the
	// value, and it is the zero SpanContext for a record without one.
	Trace trace.SpanContext
}

// CommandID returns the ID of the command the entry is about, or "" for an
// intake entry.
func (e Entry) CommandID() string {
	switch {
	case e.Kind == EntryIssued && e.Issued != nil:
		return e.Issued.Command.ID
	case e.Kind == EntryRedispatched && e.Redispatched != nil:
		return e.Redispatched.CommandID
	case e.Kind == EntryOutcome && e.Outcome != nil:
		return e.Outcome.CommandID
	}
	return ""
}

// LogFormatError reports a malformed record of the command log or of the
// requests topic.
type LogFormatError struct {
	// Part names the record part that failed: "entry key", "entry value",
	// "term header", or "request value".
	Part string

	reason string
	err    error
}

func newFormatError(part string, err error) *LogFormatError {
	return &LogFormatError{Part: part, reason: err.Error(), err: err}
}

// Error describes the fault and names the record part that carries it.
func (e *LogFormatError) Error() string {
	return fmt.Sprintf("dispatch: malformed %s: %s", e.Part, e.reason)
}

// Unwrap returns the fault underneath, such as an *InvalidCommandError.
func (e *LogFormatError) Unwrap() error { return e.err }

// clipText shortens s to at most limit bytes without splitting a UTF-8
// sequence, for a device error or reply that would not fit a record.
func clipText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const mark = "…"
	if limit < len(mark) {
		return ""
	}
	cut := limit - len(mark)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + mark
}
