package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/internal/config"
)

// TestCoordinationOptionsCarryRenewals checks what coordinationOptions asks
// of a leadership: the lease timings of the file, and lease renewals carried
// by the command writes from a quarter of the renew interval before the
// renew instant. The file's lease renews every second, so a write 260 ms
// before the instant leaves the lease alone, and one 240 ms before renews it.
func TestCoordinationOptionsCarryRenewals(t *testing.T) {
	_, brokers := newFakeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers); code != 0 {
		t.Fatalf("topics: %d\n%s%s", code, out, errOut)
	}
	cfg, err := config.Load(writeConfig(t, brokers, "node-1", "tcp://127.0.0.1:1883", ""))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := coordination.NewLeaseConfig(cfg.Lease.Duration, cfg.Lease.RenewInterval, cfg.Lease.ChallengeStagger)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := coordination.NewKafkaTransport(lease, strings.Split(brokers, ",")...)
	if err != nil {
		t.Fatal(err)
	}
	defer transport.Close()
	role, err := coordination.NewRole(cfg.Role)
	if err != nil {
		t.Fatal(err)
	}
	member, err := coordination.NewMemberID(cfg.Member)
	if err != nil {
		t.Fatal(err)
	}
	const t0 = 1_700_000_000_000
	clock := coordination.NewManualClock(t0)
	l, err := coordination.AcquireLeadership(ctx, transport, role, member, append(coordinationOptions(cfg), coordination.WithClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Resign(context.Background()) }()
	if got := l.Lease(); got.GrantedAt != t0 || got.Deadline != t0+cfg.Lease.Duration.Milliseconds() {
		t.Fatalf("the grant %+v does not follow the file's lease of %v from %d", got, cfg.Lease.Duration, int64(t0))
	}

	logTopic := coordination.TopicPartition{Topic: cfg.Topics.Log}
	write := func() {
		t.Helper()
		if _, err := l.Write(ctx, func(coordination.FencingToken) ([]coordination.GuardedRecord, error) {
			return []coordination.GuardedRecord{{Partition: logTopic, Key: []byte("k"), Value: []byte("v")}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	lead := cfg.Lease.RenewInterval / 4
	clock.Advance(cfg.Lease.RenewInterval - lead - 10*time.Millisecond)
	write()
	if got := l.Lease().GrantedAt; got != t0 {
		t.Fatalf("a write %v before the renew instant renewed the lease (granted at %d); the lead is a quarter of the renew interval, %v",
			lead+10*time.Millisecond, got, lead)
	}
	clock.Advance(20 * time.Millisecond)
	write()
	want := t0 + (cfg.Lease.RenewInterval - lead + 10*time.Millisecond).Milliseconds()
	if got := l.Lease().GrantedAt; got != want {
		t.Fatalf("a write %v before the renew instant left the lease granted at %d, want %d: it carries no renewal",
			lead-10*time.Millisecond, got, want)
	}
}
