package coordination

import (
	"errors"
	"fmt"
	"time"
)

// ErrFenced reports that the broker refused a write, because another member
// holds the role now.
//
// This is the expected end of a leadership. A [LeaseWriter] wraps this error
// for broker error code 47 INVALID_PRODUCER_EPOCH and for broker error code 90
// PRODUCER_FENCED. [AcquireLeadership] and [Leadership.Renew] find it with
// errors.Is.
//
// A deposed leader learns that it lost the role from this error, and from
// nothing else. No clock takes part in the check. The epoch it held is
// superseded, so the cluster already rejects every write it makes. The caller
// stops the work of the role at once.
var ErrFenced = errors.New("fenced: another member holds the role")

// ErrNotHeld reports that a caller asked a *[Leadership] to act after the
// leadership ended.
var ErrNotHeld = errors.New("the member no longer holds the role")

// ErrOutcomeUnknown reports that a guarded write may or may not have
// committed: the commit was sent and no answer came back. The producer that
// sent it is closed, because Kafka allows no retry through an unknown
// outcome, so the leadership that owned it ends. A caller treats the records
// of that write as in doubt.
var ErrOutcomeUnknown = errors.New("the outcome of the transaction is unknown")

// OpenTransactionError reports a read that could not reach the offset it
// must pass, because the last stable offset of the partition stayed below it
// for the whole bound of the wait: a transaction that another producer began
// on the partition is still open, and read_committed shows nothing after its
// first offset, not even records that other producers committed since. A read
// that decides (who leads, what a predecessor issued, where intake resumes)
// must not act on the part it saw; the caller reads again later, when the
// transaction coordinator has ended the transaction (at the producer's
// transaction.timeout.ms at the latest).
type OpenTransactionError struct {
	// Partition is the partition read.
	Partition TopicPartition

	// StableOffset is the last stable offset when the read gave up: the
	// first offset of the open transaction.
	StableOffset int64

	// Target is the high watermark taken when the read began.
	Target int64

	// Waited is how long the read waited for the last stable offset to move.
	Waited time.Duration

	// Err is what ended the wait before its bound, such as the error of the
	// caller's context; nil when the bound passed.
	Err error

	// Producers holds the ids of the producers whose transaction was open at
	// the last stable offset, when the reader could learn them; nil
	// otherwise.
	Producers []int64

	// Records holds what the read saw before the open transaction: the last
	// record of every key up to the last stable offset, oldest first. A
	// caller that knows the open transaction is one it may ignore, such as
	// its own role's holder's, may decide on them.
	Records []StateRecord
}

// Error names the partition, the offsets and the wait.
func (e *OpenTransactionError) Error() string {
	msg := fmt.Sprintf("coordination: %s[%d]: an open transaction of another producer blocks the partition: the last stable offset stayed at %d, below the high watermark %d taken when the read began, for %s",
		e.Partition.Topic, e.Partition.Partition, e.StableOffset, e.Target, e.Waited.Round(time.Millisecond))
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Err.
func (e *OpenTransactionError) Unwrap() error { return e.Err }
