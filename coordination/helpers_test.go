package coordination

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// t0 is the instant every ManualClock of these tests starts at.
const t0 int64 = 1_700_000_000_000

func mustRole(t testing.TB, name string) Role {
	t.Helper()
	role, err := NewRole(name)
	if err != nil {
		t.Fatal(err)
	}
	return role
}

func mustMember(t testing.TB, name string) MemberID {
	t.Helper()
	member, err := NewMemberID(name)
	if err != nil {
		t.Fatal(err)
	}
	return member
}

func mustToken(t testing.TB, id int64, epoch int16) FencingToken {
	t.Helper()
	token, err := NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func mustConfig(t testing.TB, duration, renew, stagger time.Duration) LeaseConfig {
	t.Helper()
	config, err := NewLeaseConfig(duration, renew, stagger)
	if err != nil {
		t.Fatal(err)
	}
	return config
}

// testOptions are the timings of the leadership tests: a 30s lease renewed
// every 10s, a 5s stagger, a 1s poll, on the given clock.
func testOptions(clock Clock) []Option {
	return []Option{
		WithClock(clock),
		WithLeaseDuration(30 * time.Second),
		WithRenewInterval(10 * time.Second),
		WithChallengeStagger(5 * time.Second),
		WithPollInterval(time.Second),
	}
}

// regRecord and leaseRecord build log records for the fold and rule tests.
func regRecord(t testing.TB, role Role, member string, offset, registeredAt int64) StateRecord {
	t.Helper()
	m := mustMember(t, member)
	return StateRecord{
		Offset: offset,
		Key:    EncodeKey(RegistrationKey(role, m)),
		Value:  EncodeRegistration(Registration{Member: m, RegisteredAt: registeredAt}),
	}
}

func regTombstone(t testing.TB, role Role, member string, offset int64) StateRecord {
	t.Helper()
	return StateRecord{Offset: offset, Key: EncodeKey(RegistrationKey(role, mustMember(t, member)))}
}

func leaseRecord(t testing.TB, role Role, member string, offset, grantedAt, deadline int64) StateRecord {
	t.Helper()
	return StateRecord{
		Offset: offset,
		Key:    EncodeKey(LeaseKey(role)),
		Value: EncodeLease(Lease{
			Member:    mustMember(t, member),
			Token:     mustToken(t, 11, 1),
			GrantedAt: grantedAt,
			Deadline:  deadline,
		}),
	}
}

func leaseTombstone(role Role, offset int64) StateRecord {
	return StateRecord{Offset: offset, Key: EncodeKey(LeaseKey(role))}
}

// campaignResult is what a background AcquireLeadership ended with.
type campaignResult struct {
	leadership *Leadership
	err        error
}

// contender runs AcquireLeadership in a goroutine that the test owns: stop
// cancels it and waits for it.
type contender struct {
	cancel context.CancelFunc
	result chan campaignResult
}

func startContender(transport Transport, role Role, member MemberID, options ...Option) *contender {
	ctx, cancel := context.WithCancel(context.Background())
	c := &contender{cancel: cancel, result: make(chan campaignResult, 1)}
	go func() {
		l, err := AcquireLeadership(ctx, transport, role, member, options...)
		c.result <- campaignResult{leadership: l, err: err}
	}()
	return c
}

// poll reports the result if the campaign ended, without blocking.
func (c *contender) poll() (campaignResult, bool) {
	select {
	case r := <-c.result:
		c.result <- r
		return r, true
	default:
		return campaignResult{}, false
	}
}

// stop cancels the campaign, waits for it, and resigns a leadership it won.
func (c *contender) stop(t testing.TB) campaignResult {
	t.Helper()
	c.cancel()
	r := <-c.result
	c.result <- r
	if r.leadership != nil {
		_ = r.leadership.Resign(context.Background())
		<-r.leadership.Done()
	}
	return r
}

// resign ends a leadership at the end of a test. The tests that care about
// the writes of Resign check its error themselves.
func resign(t testing.TB, l *Leadership) {
	t.Helper()
	if l == nil {
		return
	}
	_ = l.Resign(context.Background())
	<-l.Done()
}

// isClosed reports whether a channel is closed, without blocking.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// recordingClock is a ManualClock that remembers the extent of every wait,
// so a test checks how long the campaign chose to wait.
type recordingClock struct {
	*ManualClock
	waits durationLog
}

func (c *recordingClock) After(extent time.Duration) <-chan time.Time {
	c.waits.add(extent)
	return c.ManualClock.After(extent)
}

func (c *recordingClock) takeWaits() []time.Duration { return c.waits.take() }

// durationLog is a list of durations that goroutines add to and a test
// takes.
type durationLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *durationLog) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
}

// take returns the durations added since the last take.
func (l *durationLog) take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.d
	l.d = nil
	return d
}

// wantLedFrom asserts that the campaign of c won, and that its first lease
// was granted at the instant at.
func wantLedFrom(t *testing.T, c *contender, at int64) {
	t.Helper()
	r, ok := c.poll()
	if !ok || r.err != nil {
		t.Fatalf("standby at %d: %t, %v", at, ok, r.err)
	}
	if got := r.leadership.Lease().GrantedAt; got != at {
		t.Fatalf("took the role at %d, want at %d", got, at)
	}
}

// txnModes runs a test under both token behaviours of Kafka: the epoch stays
// put for a producer's life (transactions v1), or every commit bumps it (v2).
var txnModes = []struct {
	name string
	bump bool
}{{"v1", false}, {"v2", true}}

// holder acquires the role for member on a fresh cluster and clock, and
// returns them all.
func holder(t *testing.T, bump bool, extra ...Option) (*memCluster, *memTransport, *ManualClock, *Leadership) {
	t.Helper()
	cluster := newMemCluster(t)
	cluster.bumpOnCommit = bump
	clock := NewManualClock(t0)
	transport := cluster.transport()
	l, err := AcquireLeadership(context.Background(), transport, mustRole(t, "controller"), mustMember(t, "node-1"), append(testOptions(clock), extra...)...)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	synctest.Wait() // the renewal goroutine waits on the clock now
	return cluster, transport, clock, l
}

// checkCoordinatorToken asserts invariant I3: the leadership shows the token
// the coordinator holds now.
func checkCoordinatorToken(t *testing.T, transport *memTransport, l *Leadership) {
	t.Helper()
	status, err := DescribeLeadership(context.Background(), transport, l.Role())
	if err != nil {
		t.Fatal(err)
	}
	if !status.Authoritative(l.Token()) {
		t.Fatalf("leadership shows %s, coordinator holds %s", l.Token(), status.Token)
	}
}
