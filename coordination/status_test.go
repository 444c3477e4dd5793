package coordination

import (
	"context"
	"errors"
	"math"
	"testing"
)

func TestDescribeRoleState(t *testing.T) {
	cluster := newMemCluster(t)
	transport := cluster.transport()
	role := mustRole(t, "controller")
	tp, _ := RoleTopicPartition(role, WithTopic("coord"), WithPartitions(4))
	cluster.mu.Lock()
	for _, r := range []StateRecord{regRecord(t, role, "node-1", 0, 5), leaseRecord(t, role, "node-1", 1, 5, 10)} {
		cluster.appendLocked(tp, r.Key, r.Value, NoEpoch, nil)
	}
	cluster.mu.Unlock()
	state, err := DescribeRoleState(context.Background(), transport, role, WithTopic("coord"), WithPartitions(4))
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Roster) != 1 || state.Lease == nil || state.Lease.Deadline != 10 {
		t.Fatalf("state %+v", state)
	}
	if state, err := DescribeRoleState(context.Background(), transport, role); err != nil || len(state.Roster) != 0 {
		t.Fatalf("default topic: %+v, %v", state, err)
	}
	if _, err := DescribeRoleState(context.Background(), nil, role); err == nil {
		t.Fatal("nil reader accepted")
	}
	if _, err := DescribeRoleState(context.Background(), transport, role, WithPartitions(0)); err == nil {
		t.Fatal("bad option accepted")
	}
	if _, err := DescribeRoleState(context.Background(), transport, Role{}); err == nil {
		t.Fatal("zero role accepted")
	}
	transport.down.Store(true)
	if _, err := DescribeRoleState(context.Background(), transport, role); !errors.Is(err, errUnreachable) {
		t.Fatalf("read error: %v", err)
	}
}

func TestDescribeLeadership(t *testing.T) {
	cluster := newMemCluster(t)
	transport := cluster.transport()
	role := mustRole(t, "controller")
	status, err := DescribeLeadership(context.Background(), transport, role)
	if err != nil || status.Held || status.Token != NoEpoch || status.String() != "role controller: no epoch" {
		t.Fatalf("untaken role: %+v, %v", status, err)
	}
	if status.Authoritative(NoEpoch) {
		t.Fatal("NoEpoch is authoritative")
	}
	token := cluster.mint(role)
	status, err = DescribeLeadership(context.Background(), transport, role)
	if err != nil || !status.Held || !status.Authoritative(token) || status.String() != "role controller: epoch "+token.String() {
		t.Fatalf("taken role: %+v, %v", status, err)
	}
	if _, err := DescribeLeadership(context.Background(), nil, role); err == nil {
		t.Fatal("nil coordinator accepted")
	}
	if _, err := DescribeLeadership(context.Background(), transport, Role{}); err == nil {
		t.Fatal("zero role accepted")
	}
	transport.down.Store(true)
	if _, err := DescribeLeadership(context.Background(), transport, role); !errors.Is(err, errUnreachable) {
		t.Fatalf("coordinator error: %v", err)
	}
}

// TestEpochRotation checks invariant I2 through the exhaustion of a producer
// epoch: the coordinator rotates to a new producer id, and the token of the
// leadership follows it and still supersedes every earlier one.
func TestEpochRotation(t *testing.T) {
	cluster := newMemCluster(t)
	cluster.bumpOnCommit = true
	role := mustRole(t, "controller")
	cluster.setEpoch(role, mustToken(t, 5000, math.MaxInt16-3))
	clock := NewManualClock(t0)
	transport := cluster.transport()
	l, err := AcquireLeadership(context.Background(), transport, role, mustMember(t, "node-1"), testOptions(clock)...)
	if err != nil {
		t.Fatal(err)
	}
	defer resign(t, l)
	seen := []FencingToken{l.Token()}
	for range 4 {
		if err := l.Renew(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !l.Token().Supersedes(seen[len(seen)-1]) {
			t.Fatalf("token %s after %v", l.Token(), seen)
		}
		seen = append(seen, l.Token())
		checkCoordinatorToken(t, transport, l)
	}
	if last := seen[len(seen)-1]; last.ProducerID() == 5000 {
		t.Fatalf("no rotation to a new producer id: %v", seen)
	}
}
