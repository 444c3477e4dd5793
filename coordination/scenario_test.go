package coordination

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestFailoverScenario plays one failover with three members on one cluster
// and one clock: the holder stops renewing, the rank-0 standby takes the role
// at the deadline and not before, the rank-1 standby waits one stagger more
// and finds the role taken, the old holder learns of its end from a fence,
// and when it competes again it lands at the tail of the roster.
func TestFailoverScenario(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { failoverScenario(t, mode.bump) })
		})
	}
}

func failoverScenario(t *testing.T, bump bool) {
	cluster := newMemCluster(t)
	cluster.bumpOnCommit = bump
	clock := NewManualClock(t0)
	role := mustRole(t, "controller")
	node1, node2, node3 := mustMember(t, "node-1"), mustMember(t, "node-2"), mustMember(t, "node-3")
	options := testOptions(clock)

	// node-1 registers first and takes the role at once.
	t1 := cluster.transport()
	first, err := AcquireLeadership(context.Background(), t1, role, node1, options...)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	deadline := first.Lease().Deadline
	if deadline != t0+30_000 {
		t.Fatalf("first lease %+v", first.Lease())
	}

	// node-2 and node-3 register behind it and wait.
	clock.Advance(time.Second)
	c2 := startContender(cluster.transport(), role, node2, options...)
	synctest.Wait()
	clock.Advance(time.Second)
	c3 := startContender(cluster.transport(), role, node3, options...)
	synctest.Wait()
	state := cluster.state(first.Partition(), role)
	for member, want := range map[MemberID]int{node1: 0, node2: 0, node3: 1} {
		if rank, ok := state.RankOf(member); !ok || rank != want {
			t.Fatalf("rank of %s: %d, %t; want %d", member, rank, ok, want)
		}
	}

	// node-1 stops renewing: it is cut off from the cluster.
	t1.down.Store(true)
	acquired := cluster.acquireCount()
	for clock.NowMillis() < deadline-1 {
		clock.Advance(min(time.Second, time.Duration(deadline-1-clock.NowMillis())*time.Millisecond))
		synctest.Wait()
		if _, ok := c2.poll(); ok {
			t.Fatalf("node-2 returned at %d, before the deadline %d", clock.NowMillis(), deadline)
		}
	}
	if cluster.acquireCount() != acquired {
		t.Fatal("a standby challenged before the deadline")
	}
	if first.Err() != nil {
		t.Fatalf("the cut-off holder ended on its own: %v", first.Err())
	}

	// At the deadline, the rank-0 standby takes the role.
	clock.Set(deadline)
	synctest.Wait()
	r2, ok := c2.poll()
	if !ok || r2.err != nil {
		t.Fatalf("node-2 at the deadline: %t, %v", ok, r2.err)
	}
	second := r2.leadership
	if second.Lease().GrantedAt != deadline {
		t.Fatalf("node-2 took the role at %d, want %d", second.Lease().GrantedAt, deadline)
	}
	if !second.Token().Supersedes(first.Token()) {
		t.Fatalf("new token %s does not supersede %s", second.Token(), first.Token())
	}
	checkCoordinatorToken(t, cluster.transport(), second)

	// The rank-1 standby waits one stagger more, and finds the role taken.
	clock.Advance(5*time.Second - time.Millisecond)
	synctest.Wait()
	clock.Advance(time.Millisecond)
	synctest.Wait()
	if _, ok := c3.poll(); ok {
		t.Fatal("node-3 returned though node-2 holds the role")
	}
	if n := cluster.acquireCount(); n != acquired+1 {
		t.Fatalf("%d epochs minted since the holder stopped, want 1", n-acquired)
	}
	if rank, _ := cluster.state(first.Partition(), role).RankOf(node3); rank != 1 {
		t.Fatalf("node-3 rank %d behind node-2", rank)
	}

	// The old holder comes back: its next Renew is fenced, and Done closes
	// with that error.
	t1.down.Store(false)
	if err := first.Renew(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("old holder's Renew: %v", err)
	}
	synctest.Wait()
	if !isClosed(first.Done()) || !errors.Is(first.Err(), ErrFenced) {
		t.Fatalf("old holder: done %t, err %v", isClosed(first.Done()), first.Err())
	}

	// It competes again and lands at the tail of the roster: no failback.
	again := startContender(t1, role, node1, options...)
	synctest.Wait()
	state = cluster.state(first.Partition(), role)
	if len(state.Roster) != 3 || state.Roster[2].Member != node1 {
		t.Fatalf("roster after node-1 competes again: %+v", state.Roster)
	}
	if rank, _ := state.RankOf(node1); rank != 1 {
		t.Fatalf("node-1 rank %d, want the last rank 1", rank)
	}
	if rank, _ := state.RankOf(node3); rank != 0 {
		t.Fatalf("node-3 rank %d, want 0", rank)
	}
	for range 60 {
		clock.Advance(time.Second)
		synctest.Wait()
	}
	if r, ok := again.poll(); ok {
		t.Fatalf("node-1 returned while node-2 holds the role: %v", r.err)
	}
	checkCoordinatorToken(t, cluster.transport(), second)
	if r := again.stop(t); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("node-1's campaign: %v", r.err)
	}

	// node-2 resigns: node-3, now first in line, takes the role within a
	// poll interval, not at the deadline.
	if err := second.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	synctest.Wait()
	r3, ok := c3.poll()
	if !ok || r3.err != nil {
		t.Fatalf("node-3 after the resignation: %t, %v", ok, r3.err)
	}
	if got := r3.leadership.Lease().GrantedAt; got != clock.NowMillis() {
		t.Fatalf("node-3 granted at %d", got)
	}
	c2.stop(t)
	c3.stop(t)
}
