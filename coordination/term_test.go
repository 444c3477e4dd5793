package coordination

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestTermHeaderRoundTrip(t *testing.T) {
	for _, term := range []Term{1, 4096, 1<<63 - 1} {
		got, ok, err := TermFromHeaders([]Header{{Key: "other", Value: []byte("x")}, TermHeaderOf(term)})
		if err != nil || !ok || got != term {
			t.Fatalf("term %d read back as %d, %t, %v", term, got, ok, err)
		}
	}
	if got, ok, err := TermFromHeaders(nil); err != nil || ok || got != NoTerm {
		t.Fatalf("no header: %d, %t, %v", got, ok, err)
	}
	for _, value := range [][]byte{nil, {1, 2, 3}, make([]byte, 9), make([]byte, 8), {0x80, 0, 0, 0, 0, 0, 0, 1}} {
		_, _, err := TermFromHeaders([]Header{{Key: TermHeader, Value: value}})
		var format *FormatError
		if !errors.As(err, &format) || format.Part != "term header" {
			t.Fatalf("header value %x: %v, want a FormatError of the term header", value, err)
		}
	}
}

func TestAuthorityOrdersByTermAlone(t *testing.T) {
	high := mustToken(t, 4000, 12)
	low := mustToken(t, 3017, 0)
	older := Authority{Term: 10, Token: high}
	newer := Authority{Term: 250, Token: low}
	if newer.Compare(older) <= 0 || older.Compare(newer) >= 0 {
		t.Fatalf("%s against %s: the later term must rank above whatever the tokens", newer, older)
	}
	rotated := Authority{Term: 10, Token: low}
	if rotated.Compare(older) != 0 {
		t.Fatalf("%s against %s: one term is one leadership", rotated, older)
	}
	if got := newer.String(); got != "term 250 token 3017:0" {
		t.Fatalf("String() = %q", got)
	}
	if NoTerm.String() != "none" || NoTerm.Compare(1) >= 0 || Term(0) != NoTerm {
		t.Fatalf("NoTerm must rank below every term")
	}
}

// TestTermIsFirstLeaseOffset checks that the term of a leadership is the
// offset of its first lease record, that every later record of the
// leadership carries it, that a reader of the role folds the same term, and
// that the next leadership's term is higher.
func TestTermIsFirstLeaseOffset(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, transport, clock, l := holder(t, mode.bump)
				tp := l.Partition()
				var firstLease int64 = -1
				for _, r := range cluster.records(tp) {
					if k, err := DecodeKey(r.Key); err == nil && k.Kind == KindLease {
						firstLease = r.Offset
						if _, ok, _ := TermFromHeaders(r.Headers); ok {
							t.Fatalf("the first lease record carries a term header")
						}
						break
					}
				}
				if firstLease < 0 || l.Term() != Term(firstLease) {
					t.Fatalf("term %s, first lease record at %d", l.Term(), firstLease)
				}
				if err := l.Renew(context.Background()); err != nil {
					t.Fatal(err)
				}
				log := TopicPartition{Topic: "dispatch.log", Partition: 3}
				if _, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
					return []GuardedRecord{{Partition: log, Key: []byte("k"), Value: []byte("v")}}, nil
				}); err != nil {
					t.Fatal(err)
				}
				for _, r := range append(cluster.records(tp)[firstLease+1:], cluster.records(log)...) {
					if k, err := DecodeKey(r.Key); err == nil && k.Kind == KindRegistration {
						continue
					}
					term, ok, err := TermFromHeaders(r.Headers)
					if err != nil || !ok || term != l.Term() {
						t.Fatalf("record %q at %d carries term %s (%t, %v), want %s", r.Key, r.Offset, term, ok, err, l.Term())
					}
				}
				state := cluster.state(tp, l.Role())
				if state.Term != l.Term() {
					t.Fatalf("a reader folds term %s, the leadership holds %s", state.Term, l.Term())
				}
				if got := l.Authority(); got.Term != l.Term() || got.Token != l.Token() {
					t.Fatalf("Authority() = %s", got)
				}

				// node-2 takes over after the lease of node-1 ran out.
				transport.down.Store(true)
				clock.Advance(l.config.duration + 5*time.Second) // lease and one stagger of testOptions
				next, err := AcquireLeadership(context.Background(), cluster.transport(), l.Role(), mustMember(t, "node-2"), testOptions(clock)...)
				if err != nil {
					t.Fatal(err)
				}
				defer resign(t, next)
				if next.Term().Compare(l.Term()) <= 0 {
					t.Fatalf("later leadership's term %s, earlier %s", next.Term(), l.Term())
				}
				// The deposed leader's next renewal is fenced, whether its
				// own loop or this call makes it first.
				transport.down.Store(false)
				if err := l.Renew(context.Background()); !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotHeld) {
					t.Fatalf("deposed leader renews: %v", err)
				}
				<-l.Done()
				if !errors.Is(l.Err(), ErrFenced) {
					t.Fatalf("the deposed leadership ended with %v, want a fence", l.Err())
				}
			})
		})
	}
}
