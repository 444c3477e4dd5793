package dispatch

import (
	"context"
	"errors"
	"testing"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tokenOnly is a device that knows only the token.
type tokenOnly struct{ got coordination.FencingToken }

func (d *tokenOnly) Dispatch(_ context.Context, _ Command, token coordination.FencingToken) (Result, error) {
	d.got = token
	return Result{}, nil
}

// termAware receives the whole authority.
type termAware struct {
	tokenOnly
	got coordination.Authority
}

func (d *termAware) DispatchUnder(_ context.Context, _ Command, authority coordination.Authority) (Result, error) {
	d.got = authority
	return Result{}, nil
}

func TestDispatchUnderPrefersTheAuthority(t *testing.T) {
	authority := coordination.Authority{Term: 812, Token: fakeToken(t, 3, 9)}
	plain := &tokenOnly{}
	if _, err := dispatchUnder(context.Background(), plain, sampleCommand(), authority); err != nil || plain.got != authority.Token {
		t.Fatalf("a token-only device got %s, %v", plain.got, err)
	}
	aware := &termAware{}
	if _, err := dispatchUnder(context.Background(), aware, sampleCommand(), authority); err != nil || aware.got != authority {
		t.Fatalf("an AuthorityDevice got %s, %v", aware.got, err)
	}
	if aware.tokenOnly.got != (coordination.FencingToken{}) {
		t.Fatalf("Dispatch was called beside DispatchUnder")
	}
}

func TestDecodeRecordReadsTheTerm(t *testing.T) {
	e := Entry{Kind: EntryIssued, Role: "plant-a", Token: fakeToken(t, 4001, 7), Member: "node-1", At: at, Issued: &Issued{Command: sampleCommand()}}
	e.Issued.Command.Role = ""
	key, value, err := EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	header := coordination.TermHeaderOf(4242)
	rec := &kgo.Record{Key: key, Value: value, Offset: 17, Headers: []kgo.RecordHeader{{Key: header.Key, Value: header.Value}}}
	got, err := DecodeRecord(rec)
	if err != nil || got.Term != 4242 || got.Offset != 17 {
		t.Fatalf("DecodeRecord: term %s, offset %d, %v", got.Term, got.Offset, err)
	}
	rec.Headers = nil
	if got, err := DecodeRecord(rec); err != nil || got.Term != coordination.NoTerm {
		t.Fatalf("a record without a term header: term %s, %v", got.Term, err)
	}
	rec.Headers = []kgo.RecordHeader{{Key: coordination.TermHeader, Value: []byte{1}}}
	var format *LogFormatError
	if _, err := DecodeRecord(rec); !errors.As(err, &format) || format.Part != "term header" {
		t.Fatalf("a malformed term header: %v", err)
	}
}
