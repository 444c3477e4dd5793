package coordination

import "errors"

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
