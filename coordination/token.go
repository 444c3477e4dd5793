package coordination

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FencingToken is the quorum-minted proof that one member holds a role.
//
// The transaction coordinator mints the pair when a member calls
// InitProducerId for the transactional id of the role. The quorum picks the
// values, the broker enforces them, and a write from an older pair fails with
// a fenced error. A holder passes the token to every guarded write.
//
// The pair is load-bearing. [FencingToken.Compare] reads the producer id first
// and the producer epoch second, so the order is lexicographic. A producer
// epoch is an int16 and it wraps. Kafka then allocates a new producer id and
// resets the epoch to zero. A comparison on the epoch alone would rank that
// fresh token below the stale one, and the old leader would keep the role.
// Never compare the epoch on its own.
type FencingToken struct {
	producerID    int64
	producerEpoch int16
}

// NoEpoch is the token of a role that no member has ever taken. Kafka writes
// -1 for "no producer", and that pair proves no leadership. NoEpoch ranks
// below every minted token, because [NewFencingToken] rejects a negative
// value. Treat NoEpoch as a constant.
var NoEpoch = FencingToken{producerID: -1, producerEpoch: -1}

// NewFencingToken builds a token from a minted producer id and producer
// epoch. It rejects a negative value in either position.
func NewFencingToken(producerID int64, producerEpoch int16) (FencingToken, error) {
	if producerID < 0 {
		return NoEpoch, fmt.Errorf("coordination: producer id %d is negative", producerID)
	}
	if producerEpoch < 0 {
		return NoEpoch, fmt.Errorf("coordination: producer epoch %d is negative", producerEpoch)
	}
	return FencingToken{producerID: producerID, producerEpoch: producerEpoch}, nil
}

// errTokenSyntax is wrapped by every error of ParseFencingToken.
var errTokenSyntax = errors.New("want producer_id:producer_epoch")

// ParseFencingToken parses the producer_id:producer_epoch form that
// [FencingToken.String] writes.
//
// The parse is strict: it accepts exactly the text that String writes for a
// minted token, so it rejects a sign, a leading zero, white space, and
// [NoEpoch]'s "-1:-1".
func ParseFencingToken(text string) (FencingToken, error) {
	id, epoch, ok := strings.Cut(text, ":")
	if !ok {
		return NoEpoch, fmt.Errorf("coordination: parse token %q: %w", text, errTokenSyntax)
	}
	producerID, err := parseCanonical(id, 63)
	if err != nil {
		return NoEpoch, fmt.Errorf("coordination: parse token %q: producer id: %w", text, err)
	}
	producerEpoch, err := parseCanonical(epoch, 15)
	if err != nil {
		return NoEpoch, fmt.Errorf("coordination: parse token %q: producer epoch: %w", text, err)
	}
	return NewFencingToken(producerID, int16(producerEpoch))
}

// parseCanonical parses a non-negative decimal in the form strconv.FormatInt
// writes: digits only, and no leading zero but for zero itself.
func parseCanonical(text string, bits int) (int64, error) {
	if text == "" {
		return 0, errTokenSyntax
	}
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, errTokenSyntax
		}
	}
	if len(text) > 1 && text[0] == '0' {
		return 0, errTokenSyntax
	}
	// A signed integer of bits+1 bits holds exactly the non-negative values
	// below 1<<bits, and the text holds digits only.
	v, err := strconv.ParseInt(text, 10, bits+1)
	if err != nil {
		return 0, fmt.Errorf("%s is out of range: %w", text, errTokenSyntax)
	}
	return v, nil
}

// ProducerID returns the producer id that the transaction coordinator minted.
func (t FencingToken) ProducerID() int64 { return t.producerID }

// ProducerEpoch returns the producer epoch that the transaction coordinator
// minted.
func (t FencingToken) ProducerEpoch() int16 { return t.producerEpoch }

// Compare orders two tokens lexicographically. It reads the producer id
// first, and it reads the producer epoch only for two tokens of one producer
// id. It returns a negative number when t ranks below other, zero for two
// equal tokens, and a positive number when t supersedes other.
//
// The producer id leads, because Kafka allocates producer ids from a
// monotonic block allocator and resets the epoch to zero at every new id. The
// pair stays monotonic where the epoch alone does not.
func (t FencingToken) Compare(other FencingToken) int {
	switch {
	case t.producerID < other.producerID:
		return -1
	case t.producerID > other.producerID:
		return 1
	case t.producerEpoch < other.producerEpoch:
		return -1
	case t.producerEpoch > other.producerEpoch:
		return 1
	}
	return 0
}

// Supersedes reports whether t ranks above other under
// [FencingToken.Compare].
func (t FencingToken) Supersedes(other FencingToken) bool { return t.Compare(other) > 0 }

// String writes the producer_id:producer_epoch form.
func (t FencingToken) String() string {
	return strconv.FormatInt(t.producerID, 10) + ":" + strconv.FormatInt(int64(t.producerEpoch), 10)
}

// MarshalText writes the form that [FencingToken.String] writes, so a token
// reads the same in JSON, YAML and logs. [NoEpoch] writes "-1:-1".
func (t FencingToken) MarshalText() ([]byte, error) {
	return []byte(t.String()), nil
}

// UnmarshalText parses the form that [FencingToken.MarshalText] writes. It
// accepts what [ParseFencingToken] accepts, and "-1:-1" for [NoEpoch].
func (t *FencingToken) UnmarshalText(text []byte) error {
	if string(text) == NoEpoch.String() {
		*t = NoEpoch
		return nil
	}
	parsed, err := ParseFencingToken(string(text))
	if err != nil {
		return err
	}
	*t = parsed
	return nil
}
