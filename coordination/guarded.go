package coordination

import (
	"context"
	"errors"
	"fmt"
)

// Header is one header of a record of a guarded write.
type Header struct {
	// Key is the name of the header.
	Key string

	// Value is the value of the header.
	Value []byte
}

// GuardedRecord is one record of a guarded write. The record goes to the
// partition it names; the writer applies no partitioner of its own.
type GuardedRecord struct {
	// Partition is the partition the record goes to. A record of a role
	// pins the partition with [RolePartition].
	Partition TopicPartition

	// Key is the record key.
	Key []byte

	// Value is the record value. A nil value writes a tombstone.
	Value []byte

	// Headers are the record headers, in order.
	Headers []Header

	// Offset is the offset that the record took in its partition. The
	// writer sets it once the transaction committed, as franz-go sets the
	// offset of a produced record; a caller sets -1 before the write and
	// finds -1 after it when the writer cannot tell.
	Offset int64
}

// GuardedWriter is an optional interface of a [Transport]. It writes several
// records, possibly on several topics, in one transaction under the epoch of a
// role. [Leadership.Write] needs it; [KafkaTransport] implements it.
//
// When the transport implements it, a [Leadership] writes its own lease
// records through it too: every renewal is a guarded write of one record, so
// the token of the leadership follows the token that each commit reports, and
// [Leadership.Resign] clears the lease and the member's registration in one
// guarded write of two tombstones. Without it, the leadership writes its lease
// records with [LeaseWriter.WriteLease], and the token stays the one that
// [Coordinator.AcquireEpoch] minted.
type GuardedWriter interface {
	// WriteGuarded writes the records in one transaction of the producer that
	// minted token, and commits them. It returns the token that the
	// transaction coordinator holds for the role after the commit: the same
	// token under Kafka transactions v1, and the bumped one under v2, which
	// carries a new producer id with epoch 0 when the epoch ran out. On
	// success it sets the Offset of each record to the offset the record took.
	//
	// The implementation checks every produce result and aborts the
	// transaction on any error, so the records commit all together or not at
	// all. It returns an error that wraps [ErrFenced] when the broker rejects
	// the token, and an error that wraps [ErrOutcomeUnknown] when it cannot
	// tell whether the transaction committed. With any other error it also
	// returns the token that holds after the abort, which under v2 is bumped
	// too, so the next write of the role carries the right epoch.
	WriteGuarded(ctx context.Context, role Role, token FencingToken, records []GuardedRecord) (FencingToken, error)
}

// Write runs one guarded transaction under the epoch of the role, and it
// returns the token that the records were written under.
//
// Write waits for the transaction before it, calls build with the current
// token, and passes the records to [GuardedWriter.WriteGuarded] of the
// transport. The records commit all together or not at all. build runs while
// the write slot is held, so it must not call Write, Renew, or Resign. A build
// that returns no records writes nothing. On success the leadership takes the
// token that the coordinator holds after the commit, which is a newer one when
// the coordinator bumps the epoch on every commit, so [Leadership.Token]
// stays the token of the coordinator.
//
// An error that wraps [ErrFenced] or [ErrOutcomeUnknown] ends the leadership:
// [Leadership.Err] wraps it and [Leadership.Done] closes. Any other error of
// the transport means the transaction aborted cleanly, and the leadership
// keeps holding. Write returns the token it tried with such an error, and
// [NoEpoch] with an error that came before the transport was called.
//
// Write returns an error that wraps errors.ErrUnsupported when the transport
// implements no GuardedWriter, and an error that wraps [ErrNotHeld] without a
// call to the transport after the leadership ended. A Write does not extend
// the lease; see [Leadership.ValidFor]. The one exception is a leadership
// acquired with [WithRenewalsInWrites]: when the renewal falls due within its
// lead, the Write adds the lease record to its transaction, and its commit
// renews the lease as [Leadership.Renew] would.
func (l *Leadership) Write(ctx context.Context, build func(token FencingToken) ([]GuardedRecord, error)) (FencingToken, error) {
	if build == nil {
		return NoEpoch, errors.New("coordination: guarded write with a nil build function")
	}
	if l.writeSlot == nil {
		return NoEpoch, errZeroLeadership
	}
	if l.guarded == nil {
		return NoEpoch, fmt.Errorf("coordination: guarded write to role %s: transport %T implements no GuardedWriter: %w", l.role, l.transport, errors.ErrUnsupported)
	}
	if err := l.acquireSlot(ctx); err != nil {
		return NoEpoch, fmt.Errorf("coordination: guarded write to role %s: %w", l.role, err)
	}
	defer l.releaseSlot()

	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return NoEpoch, l.notHeld("write")
	}
	token := l.token
	l.mu.Unlock()

	records, err := build(token)
	if err != nil {
		return NoEpoch, fmt.Errorf("coordination: build guarded write to role %s: %w", l.role, err)
	}
	if len(records) == 0 {
		return token, nil
	}
	term := l.Term()
	var th Header
	if term != NoTerm {
		th = TermHeaderOf(term) // one value shared by every record
	}
	for i := range records {
		records[i].Headers = withTermHeader(records[i].Headers, th)
		records[i].Offset = -1
	}
	due, fold, err := l.dueRenewal(token)
	if err != nil {
		return NoEpoch, fmt.Errorf("coordination: guarded write to role %s: renewal: %w", l.role, err)
	}
	sent := records
	if fold {
		// A copy, so the caller's slice neither grows nor shares the lease
		// record; the offsets go back to it below.
		sent = make([]GuardedRecord, len(records), len(records)+1)
		copy(sent, records)
		sent = append(sent, l.leaseRecord(due.value, withTermHeader(nil, th)))
	}
	next, err := l.guarded.WriteGuarded(ctx, l.role, token, sent)
	if fold {
		for i := range records {
			records[i].Offset = sent[i].Offset
		}
		if err == nil {
			l.renewed(due.lease, due.fresh)
		}
	}
	if err != nil {
		err = fmt.Errorf("coordination: guarded write to role %s under token %s: %w", l.role, token, err)
		if endsLeadership(err) {
			l.end(err)
			return token, err
		}
	}
	// A commit moves the epoch under transactions v2, and so does the abort
	// of a write that failed cleanly: the next write carries what it left.
	l.adoptToken(next)
	return token, err
}

// adoptToken takes the token that the transport reported after a write: the
// token that the role's transaction coordinator holds now. The leadership
// follows it wherever it goes, to a higher epoch or, when the epoch ran out,
// to a new producer id that may be lower than the old one; only the
// coordinator of the role mints it, and the transport of this leadership is
// the only one that hears it. A transport that reports [NoEpoch] leaves the
// token in place.
func (l *Leadership) adoptToken(next FencingToken) {
	if next == NoEpoch {
		return
	}
	l.mu.Lock()
	l.token = next
	l.mu.Unlock()
}

// endsLeadership reports whether a write error ends the leadership: the
// broker fenced the token, or the producer cannot tell whether it committed
// and is closed.
func endsLeadership(err error) bool {
	return errors.Is(err, ErrFenced) || errors.Is(err, ErrOutcomeUnknown)
}

// withTerm returns headers with the [TermHeader] of term, replacing one that
// is there already. A leadership of no known term adds none.
func withTerm(headers []Header, term Term) []Header {
	if term == NoTerm {
		return headers
	}
	return withTermHeader(headers, TermHeaderOf(term))
}

// withTermHeader is withTerm with the term's header built; a zero header
// (of no known term) adds none.
func withTermHeader(headers []Header, th Header) []Header {
	if th.Key == "" {
		return headers
	}
	out := make([]Header, 0, len(headers)+1)
	for _, h := range headers {
		if h.Key != TermHeader {
			out = append(out, h)
		}
	}
	return append(out, th)
}
