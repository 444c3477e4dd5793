package coordination

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestWrite(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, transport, _, l := holder(t, mode.bump)
				defer resign(t, l)
				commands := TopicPartition{Topic: "dispatch.log", Partition: 12}

				for i := range 3 {
					before := l.Token()
					var built FencingToken
					written, err := l.Write(context.Background(), func(token FencingToken) ([]GuardedRecord, error) {
						built = token
						return []GuardedRecord{
							{Partition: commands, Key: []byte("cmd"), Value: []byte{byte(i)}, Headers: []Header{{Key: "token", Value: []byte(token.String())}}},
							{Partition: commands, Key: []byte("pos"), Value: []byte{byte(i)}},
						}, nil
					})
					if err != nil {
						t.Fatalf("write %d: %v", i, err)
					}
					if built != before || written != before {
						t.Fatalf("write %d: built under %s, returned %s, token before %s", i, built, written, before)
					}
					checkCoordinatorToken(t, transport, l)
					if mode.bump != l.Token().Supersedes(written) {
						t.Fatalf("write %d: token %s after a commit under %s", i, l.Token(), written)
					}
				}
				records := cluster.records(commands)
				if len(records) != 6 {
					t.Fatalf("%d records committed, want 6", len(records))
				}
				for _, r := range records {
					if r.Key[0] == 'c' && string(r.headers[0].Value) != r.token.String() {
						t.Fatalf("record at %d carries %s, written under %s", r.Offset, r.headers[0].Value, r.token)
					}
				}
				// A Write proves authority, and it does not extend the lease.
				if l.Lease().GrantedAt != t0 {
					t.Fatalf("a Write moved the lease: %+v", l.Lease())
				}
				// The renewal after Writes runs under the newest token.
				if err := l.Renew(context.Background()); err != nil {
					t.Fatal(err)
				}
				checkCoordinatorToken(t, transport, l)
			})
		})
	}
}

func TestWriteErrors(t *testing.T) {
	oneRecord := func(tp TopicPartition) func(FencingToken) ([]GuardedRecord, error) {
		return func(FencingToken) ([]GuardedRecord, error) {
			return []GuardedRecord{{Partition: tp, Key: []byte("k"), Value: []byte("v")}}, nil
		}
	}
	t.Run("build error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, transport, _, l := holder(t, false)
			defer resign(t, l)
			boom := errors.New("boom")
			token, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) { return nil, boom })
			if !errors.Is(err, boom) || token != NoEpoch {
				t.Fatalf("Write with a failing build: %s, %v", token, err)
			}
			if transport.callCount("WriteGuarded") != 1 || l.Err() != nil {
				t.Fatal("a failing build reached the transport or ended the leadership")
			}
		})
	})
	t.Run("no records", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, transport, _, l := holder(t, true)
			defer resign(t, l)
			before := l.Token()
			token, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) { return nil, nil })
			if err != nil || token != before || l.Token() != before {
				t.Fatalf("empty Write: %s, %v", token, err)
			}
			if transport.callCount("WriteGuarded") != 1 {
				t.Fatal("an empty Write reached the transport")
			}
		})
	})
	t.Run("nil build", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, _, _, l := holder(t, false)
			defer resign(t, l)
			if _, err := l.Write(context.Background(), nil); err == nil {
				t.Fatal("Write with a nil build succeeded")
			}
		})
	})
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, _, _, l := holder(t, false)
			defer resign(t, l)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := l.Write(ctx, oneRecord(l.Partition())); !errors.Is(err, context.Canceled) {
				t.Fatalf("Write with a cancelled context: %v", err)
			}
		})
	})
	for _, tt := range []struct {
		name  string
		err   error
		apply bool
		ends  bool
	}{
		{"clean abort", errors.New("produce failed, aborted"), false, false},
		{"fenced", fmt.Errorf("produce: %w", ErrFenced), false, true},
		{"outcome unknown", fmt.Errorf("end txn: %w", ErrOutcomeUnknown), true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, transport, _, l := holder(t, false)
				defer resign(t, l)
				before := l.Token()
				transport.setFault(func(context.Context, string) (error, bool) { return tt.err, tt.apply })
				token, err := l.Write(context.Background(), oneRecord(TopicPartition{Topic: "dispatch.log"}))
				transport.setFault(nil)
				if !errors.Is(err, tt.err) || token != before {
					t.Fatalf("Write: %s, %v", token, err)
				}
				synctest.Wait()
				if tt.ends != isClosed(l.Done()) || tt.ends != (l.Err() != nil) {
					t.Fatalf("after %v: done %t, err %v", tt.err, isClosed(l.Done()), l.Err())
				}
				if tt.ends && !errors.Is(l.Err(), tt.err) {
					t.Fatalf("Err %v does not wrap %v", l.Err(), tt.err)
				}
			})
		})
	}
}

// TestRenewalWaitsForWrite checks that a renewal and a Write never run at
// once: the role has one transactional producer.
func TestRenewalWaitsForWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, transport, clock, l := holder(t, true)
		defer resign(t, l)

		release := make(chan struct{})
		building := make(chan struct{})
		written := make(chan error, 1)
		go func() {
			_, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
				close(building)
				<-release
				return []GuardedRecord{{Partition: TopicPartition{Topic: "dispatch.log"}, Value: []byte("v")}}, nil
			})
			written <- err
		}()
		<-building
		clock.Advance(10 * time.Second) // the renewal is due now
		synctest.Wait()
		if n := transport.callCount("WriteGuarded"); n != 1 {
			t.Fatalf("a renewal ran during a Write: %d guarded writes", n)
		}
		close(release)
		if err := <-written; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := transport.callCount("WriteGuarded"); n != 3 {
			t.Fatalf("%d guarded writes, want the grant, the Write, and the renewal after it", n)
		}
		if l.Lease().GrantedAt != t0+10_000 {
			t.Fatalf("lease %+v", l.Lease())
		}
		checkCoordinatorToken(t, transport, l)
	})
}

// TestWriteAfterSuccessor checks invariant I1 through Write: once a successor
// minted its epoch, no guarded write of the earlier holder commits, under
// either transaction version.
func TestWriteAfterSuccessor(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, _, _, l := holder(t, mode.bump)
				commands := TopicPartition{Topic: "dispatch.log", Partition: 12}
				write := func() error {
					_, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
						return []GuardedRecord{{Partition: commands, Value: []byte("cmd")}}, nil
					})
					return err
				}
				if err := write(); err != nil {
					t.Fatal(err)
				}
				if _, err := cluster.transport().AcquireEpoch(context.Background(), l.Role()); err != nil {
					t.Fatal(err)
				}
				if err := write(); !errors.Is(err, ErrFenced) {
					t.Fatalf("Write after a successor: %v", err)
				}
				synctest.Wait()
				if !isClosed(l.Done()) || !errors.Is(l.Err(), ErrFenced) {
					t.Fatalf("done %t, err %v", isClosed(l.Done()), l.Err())
				}
				if n := len(cluster.records(commands)); n != 1 {
					t.Fatalf("%d records committed, want only the one before the successor", n)
				}
			})
		})
	}
}

// TestFailedWriteAdoptsAbortToken checks that a write or a renewal that fails
// and is aborted leaves the leadership on the token the abort left: under
// transactions v2 an abort bumps the epoch like a commit, and a leadership
// that kept the old token would fence itself on its next write.
func TestFailedWriteAdoptsAbortToken(t *testing.T) {
	transient := errors.New("not enough replicas")
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, transport, _, l := holder(t, mode.bump)
				defer resign(t, l)
				tp := TopicPartition{Topic: "dispatch.log", Partition: 3}
				fail := func(ctx context.Context, op string) (error, bool) {
					if op == "WriteGuarded" {
						return transient, false
					}
					return nil, true
				}

				transport.setFault(fail)
				before := l.Token()
				if _, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
					return []GuardedRecord{{Partition: tp, Key: []byte("k"), Value: []byte("v")}}, nil
				}); !errors.Is(err, transient) {
					t.Fatalf("Write: %v, want %v", err, transient)
				}
				if err := l.Renew(context.Background()); !errors.Is(err, transient) {
					t.Fatalf("Renew: %v, want %v", err, transient)
				}
				transport.setFault(nil)
				if l.Err() != nil {
					t.Fatalf("a clean failure ended the leadership: %v", l.Err())
				}
				checkCoordinatorToken(t, transport, l)
				if mode.bump != l.Token().Supersedes(before) {
					t.Fatalf("token %s after two aborts under %s", l.Token(), before)
				}

				if _, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
					return []GuardedRecord{{Partition: tp, Key: []byte("k"), Value: []byte("v")}}, nil
				}); err != nil {
					t.Fatalf("Write after the aborts: %v", err)
				}
				checkCoordinatorToken(t, transport, l)
			})
		})
	}
}
