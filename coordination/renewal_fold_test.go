package coordination

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestWriteCarriesDueRenewal checks WithRenewalsInWrites: a Write that starts
// within the lead of the renew instant commits the lease record in its own
// transaction and renews the lease, and the loop then writes no renewal of
// its own until the renew instant of that lease.
func TestWriteCarriesDueRenewal(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, transport, clock, l := holder(t, mode.bump, WithRenewalsInWrites(2*time.Second))
				defer resign(t, l)
				commands := TopicPartition{Topic: "dispatch.log", Partition: 3}
				write := func() (FencingToken, []GuardedRecord) {
					t.Helper()
					var records []GuardedRecord
					token, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
						records = []GuardedRecord{{Partition: commands, Key: []byte("cmd"), Value: []byte("v")}}
						return records, nil
					})
					if err != nil {
						t.Fatal(err)
					}
					return token, records
				}
				leaseWrites := func() int {
					n := 0
					for _, r := range cluster.records(l.Partition()) {
						if key, err := DecodeKey(r.Key); err == nil && key.Kind == KindLease {
							n++
						}
					}
					return n
				}

				// The renewal is due at 10 s; at 7 s it lies past the lead.
				clock.Advance(7 * time.Second)
				write()
				if got := l.Lease().GrantedAt; got != t0 || leaseWrites() != 1 {
					t.Fatalf("a Write 3 s before the renew instant renewed: granted at %d, %d lease records", got, leaseWrites())
				}

				// At 8 s it lies within the lead: the Write carries it.
				clock.Advance(time.Second)
				written, records := write()
				if len(records) != 1 || records[0].Offset != 1 {
					t.Fatalf("the caller's records after a carried renewal: %+v", records)
				}
				if got := l.Lease(); got.GrantedAt != t0+8_000 || got.Deadline != t0+38_000 || got.Token != written {
					t.Fatalf("lease after a Write within the lead: %+v, written under %s", got, written)
				}
				if got := l.ValidFor(); got != 30*time.Second {
					t.Fatalf("ValidFor %v after a carried renewal, want 30s", got)
				}
				state := cluster.records(l.Partition())
				last := state[len(state)-1]
				lease, err := DecodeLease(last.Value)
				if err != nil {
					t.Fatal(err)
				}
				data := cluster.records(commands)[1]
				if last.txn != data.txn || last.token != written || lease != l.Lease() {
					t.Fatalf("lease record %+v (txn %d, token %s) beside the Write's record (txn %d)", lease, last.txn, last.token, data.txn)
				}
				if len(last.headers) != 1 || last.headers[0].Key != TermHeader {
					t.Fatalf("carried lease record headers %+v, want the term", last.headers)
				}
				checkCoordinatorToken(t, transport, l)

				// The loop wakes at the old renew instant and finds the lease
				// renewed: no transaction of its own.
				calls := transport.callCount("WriteGuarded")
				clock.Advance(2 * time.Second)
				synctest.Wait()
				if n := transport.callCount("WriteGuarded"); n != calls {
					t.Fatalf("the loop renewed a lease a Write had renewed: %d guarded writes, want %d", n, calls)
				}
				// At the new renew instant, with no Write, the loop renews.
				clock.Advance(8 * time.Second)
				synctest.Wait()
				if got := l.Lease().GrantedAt; got != t0+18_000 || transport.callCount("WriteGuarded") != calls+1 {
					t.Fatalf("no renewal by the loop at the new renew instant: %+v", l.Lease())
				}
				checkCoordinatorToken(t, transport, l)
			})
		})
	}
}

// TestFailedWriteCarriesNoRenewal checks that a carried renewal that did not
// commit leaves the lease alone, so the loop renews at its instant.
func TestFailedWriteCarriesNoRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, transport, clock, l := holder(t, false, WithRenewalsInWrites(2*time.Second))
		defer resign(t, l)
		clock.Advance(9 * time.Second)
		transient := errors.New("not enough replicas")
		transport.setFault(func(ctx context.Context, op string) (error, bool) {
			if op == "WriteGuarded" {
				return transient, false
			}
			return nil, true
		})
		_, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
			return []GuardedRecord{{Partition: TopicPartition{Topic: "dispatch.log"}, Value: []byte("v")}}, nil
		})
		transport.setFault(nil)
		if !errors.Is(err, transient) || l.Err() != nil {
			t.Fatalf("Write over a failing transport: %v, leadership %v", err, l.Err())
		}
		if got := l.Lease().GrantedAt; got != t0 {
			t.Fatalf("a Write that failed renewed the lease: granted at %d", got)
		}
		clock.Advance(time.Second)
		synctest.Wait()
		if got := l.Lease().GrantedAt; got != t0+10_000 {
			t.Fatalf("the loop did not renew after the failed Write: granted at %d", got)
		}
	})
}

func TestRenewalLeadOption(t *testing.T) {
	for _, tc := range []struct {
		lead time.Duration
		want string
	}{
		{-time.Millisecond, "renewal lead -1ms is negative"},
		{10 * time.Second, "renewal lead 10s is not below the renew interval 10s"},
	} {
		_, err := newSettings([]Option{WithRenewInterval(10 * time.Second), WithRenewalsInWrites(tc.lead)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("lead %v: %v, want %q", tc.lead, err, tc.want)
		}
	}
	s, err := newSettings([]Option{WithRenewalsInWrites(0)})
	if err != nil || s.renewalLead != 0 {
		t.Fatalf("lead 0: %v, %v", s, err)
	}
}
