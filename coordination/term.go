package coordination

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Term orders the leaderships of one role. It is the offset, in the role's
// partition of the coordination topic, of the first lease record that a
// leadership committed.
//
// The quorum mints the term as it mints the epoch: the partition leader
// assigns the offset, and a leadership's first lease commits only after its
// InitProducerId fenced every earlier holder, so each later leadership's
// first lease lands at a higher offset. Terms therefore grow with every
// change of leader and never go backwards, through epoch bumps, producer-id
// rotations and moves of the transaction coordinator alike.
//
// A [FencingToken] does not give that order. The broker fences by the
// (producer id, epoch) pair, but Kafka hands out producer ids in blocks per
// broker, so the id that the coordinator mints when an epoch runs out depends
// on which broker coordinates the role at that moment and can be lower than
// the id before it. Within one term the token may rotate like that; across
// terms the term decides.
//
// Every later lease record of the leadership, and every record of a
// [Leadership.Write], carries the term in the [TermHeader] header, because
// compaction keeps only the newest lease record of a role.
type Term int64

// NoTerm is the term of a role that no member has taken, and of a record that
// carries none. It is the zero Term and ranks below every term. No leadership
// has term 0: its first lease record follows its own registration in the
// same partition, so it never sits at offset 0.
const NoTerm Term = 0

// TermHeader is the name of the record header that carries a [Term]: eight
// bytes, big-endian, two's complement.
const TermHeader = "krabka.term"

// String writes the term in decimal, and "none" for [NoTerm].
func (t Term) String() string {
	if t <= NoTerm {
		return "none"
	}
	return strconv.FormatInt(int64(t), 10)
}

// Compare orders two terms: negative when t is older than other, zero when
// they are the same leadership, positive when t is newer.
func (t Term) Compare(other Term) int {
	switch {
	case t < other:
		return -1
	case t > other:
		return 1
	}
	return 0
}

// TermHeaderOf returns the header that carries t.
func TermHeaderOf(t Term) Header {
	return Header{Key: TermHeader, Value: binary.BigEndian.AppendUint64(nil, uint64(t))}
}

// TermFromHeaders returns the term that a record's headers carry, and
// [NoTerm] with false when they carry none. A [TermHeader] whose value is not
// eight bytes, or holds a term that is not positive, is a [*FormatError].
func TermFromHeaders(headers []Header) (Term, bool, error) {
	for _, h := range headers {
		if h.Key != TermHeader {
			continue
		}
		return decodeTerm(h.Value)
	}
	return NoTerm, false, nil
}

// decodeTerm decodes the value of a [TermHeader].
func decodeTerm(value []byte) (Term, bool, error) {
	if len(value) != 8 {
		return NoTerm, false, &FormatError{Part: "term header", reason: fmt.Sprintf("want 8 bytes, have %d", len(value))}
	}
	term := Term(binary.BigEndian.Uint64(value))
	if term <= NoTerm {
		return NoTerm, false, &FormatError{Part: "term header", reason: fmt.Sprintf("term %d is not positive", int64(term))}
	}
	return term, true, nil
}

// Authority is what one guarded write, or one dispatch to a device, runs
// under: the term of the leadership, which orders leaderships, and the token
// the broker enforced on the write, which proves the write was the holder's.
type Authority struct {
	// Term orders the leadership among every leadership of the role.
	Term Term

	// Token is the token of the transaction that committed the record behind
	// the dispatch.
	Token FencingToken
}

// Compare orders two authorities by term alone. Two authorities of one term
// belong to one leadership and compare equal whatever their tokens: within a
// leadership the token may rotate to a lower producer id, and the order of
// the leader's own records is the log's.
func (a Authority) Compare(other Authority) int { return a.Term.Compare(other.Term) }

// String writes "term T token P:E".
func (a Authority) String() string {
	return "term " + a.Term.String() + " token " + a.Token.String()
}
