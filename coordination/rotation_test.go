package coordination

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// TestRotationToLowerProducerID drives a leadership through the exhaustion of
// its producer's epoch under transactions v2, where the coordinator rotates
// the role to a producer id below the old one, as Kafka's does after the
// role's coordinator moved to a broker with an older block of ids. The
// leadership adopts the lower token and keeps its term: it renews and writes
// on, its error stays nil, the coordinator's answer is authoritative for its
// token, and every record it wrote carries its term. A successor that takes
// the role after the holder was cut off holds a higher term, although its
// producer id is far below the holder's first one, and the deposed holder's
// next write fails with ErrFenced.
func TestRotationToLowerProducerID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		cluster := newMemCluster(t)
		cluster.bumpOnCommit = true
		role := mustRole(t, "controller")
		cluster.setEpoch(role, mustToken(t, 5000, math.MaxInt16-5))
		const lower = 7
		cluster.rotateNextTo(lower)
		clock := NewManualClock(t0)
		transport := cluster.transport()
		topic := TopicPartition{Topic: "commands"}

		a, err := AcquireLeadership(ctx, transport, role, mustMember(t, "node-1"), testOptions(clock)...)
		if err != nil {
			t.Fatal(err)
		}
		defer resign(t, a)
		synctest.Wait()
		first, term := a.Token(), a.Term()
		if term == NoTerm {
			t.Fatal("the leadership holds no term")
		}
		write := func(l *Leadership) error {
			_, err := l.Write(ctx, func(FencingToken) ([]GuardedRecord, error) {
				return []GuardedRecord{{Partition: topic, Value: []byte(l.Member().String())}}, nil
			})
			return err
		}
		holds := func(when string) {
			t.Helper()
			if err := a.Err(); err != nil {
				t.Fatalf("%s: the leadership ended: %v", when, err)
			}
			if got := a.Term(); got != term {
				t.Fatalf("%s: the term moved from %s to %s", when, term, got)
			}
			checkCoordinatorToken(t, transport, a)
		}

		// Renew and write until the producer id changes.
		var before FencingToken
		for i := 0; a.Token().ProducerID() == first.ProducerID(); i++ {
			if i > 8 {
				t.Fatalf("no rotation after %d commits from %s", i, first)
			}
			before = a.Token()
			if i%2 == 0 {
				err = a.Renew(ctx)
			} else {
				err = write(a)
			}
			if err != nil {
				t.Fatalf("commit %d under %s: %v", i, before, err)
			}
			holds("before the rotation")
		}
		if got := a.Token(); got != mustToken(t, lower, 0) {
			t.Fatalf("the rotation from %s went to %s, want %d:0", before, got, lower)
		}

		// Past the rotation the leadership renews and writes under the lower
		// producer id.
		for i := range 4 {
			if i%2 == 0 {
				err = a.Renew(ctx)
			} else {
				err = write(a)
			}
			if err != nil {
				t.Fatalf("commit %d after the rotation, under %s: %v", i, a.Token(), err)
			}
			holds("after the rotation")
			if a.Token().ProducerID() != lower {
				t.Fatalf("the token left producer id %d: %s", lower, a.Token())
			}
		}
		records := cluster.records(topic)
		if len(records) == 0 || records[len(records)-1].token.ProducerID() != lower {
			t.Fatalf("no write committed under producer id %d: %v", lower, records)
		}
		for _, r := range records {
			if got, ok, err := TermFromHeaders(r.headers); err != nil || !ok || got != term {
				t.Fatalf("offset %d carries term %s (present %v, %v), want %s", r.Offset, got, ok, err, term)
			}
		}
		deposed := a.Authority()

		// Cut the holder off and let its lease run out; a second member
		// takes the role.
		transport.down.Store(true)
		type result struct {
			l   *Leadership
			err error
		}
		acquired := make(chan result, 1)
		go func() {
			l, err := AcquireLeadership(ctx, cluster.transport(), role, mustMember(t, "node-2"), testOptions(clock)...)
			acquired <- result{l, err}
		}()
		var r result
		for waited := time.Duration(0); r.l == nil && r.err == nil; waited += time.Second {
			if waited > time.Minute {
				t.Fatal("the second member did not take the role within a minute")
			}
			clock.Advance(time.Second)
			synctest.Wait()
			select {
			case r = <-acquired:
			default:
			}
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		b := r.l
		defer resign(t, b)
		successor := b.Authority()
		if successor.Token.ProducerID() >= first.ProducerID() {
			t.Fatalf("the successor's token %s is not below the holder's first %s", successor.Token, first)
		}
		if b.Term().Compare(term) <= 0 || successor.Compare(deposed) <= 0 || deposed.Compare(successor) >= 0 {
			t.Fatalf("the successor's authority %s does not outrank the holder's %s", successor, deposed)
		}

		// The holder comes back and writes: the broker fences it.
		transport.down.Store(false)
		if err := write(a); !errors.Is(err, ErrFenced) {
			t.Fatalf("the deposed holder's write: %v, want ErrFenced", err)
		}
		if err := write(b); err != nil {
			t.Fatalf("the successor's write: %v", err)
		}
	})
}
