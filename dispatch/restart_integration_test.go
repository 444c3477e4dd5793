//go:build integration

package dispatch_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/recorder"
)

// TestRestartUnderSameMemberWhileOldPaused pauses a leader (SIGSTOP) and
// starts a new process under the same member id, as a supervisor that
// believes the old one dead would. The new incarnation must not take the
// role before the deadline of the lease the paused one holds, however its
// own member id reads in that lease; once it leads, the paused one, resumed,
// is fenced, and no command reaches the device from both.
//
// The paused incarnation may have issued the whole first stream before it
// stopped, so that the new one finds those commands in doubt and dispatches
// none of them; a second stream, submitted once the new incarnation leads,
// is work that only it can do.
func TestRestartUnderSameMemberWhileOldPaused(t *testing.T) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	server := newRecorder(t)
	old := startIncarnation(t, c, tp, role, "old", "node-1", server, "plain", "")
	old.waitLine(t, "leading", 30*time.Second)
	client := newClient(t, c, tp)

	result := stream(t, client, role, "cmd", 120, "plain")
	waitDispatches(t, server, "20 dispatches", 30*time.Second, func(d []recorder.Dispatch) bool { return len(d) >= 20 })
	old.signal(t, syscall.SIGSTOP)
	deadline := leaseDeadline(t, c, role, "node-1")

	fresh := startIncarnation(t, c, tp, role, "new", "node-1", server, "plain", "")
	line := fresh.waitLine(t, "leading", 30*time.Second)
	leadingAt := time.Now()
	if leadingAt.Before(deadline) {
		t.Fatalf("the new incarnation led at %s, before the deadline %s of the paused incarnation's lease", leadingAt.Format(time.StampMilli), deadline.Format(time.StampMilli))
	}
	var term int64
	var token string
	if _, err := fmt.Sscanf(line, "leading term %d token %s", &term, &token); err != nil {
		t.Fatalf("the new incarnation printed %q: %v", line, err)
	}
	first := coordination.Term(term)
	t.Logf("the new incarnation led %v after the lease deadline, under term %s token %s", leadingAt.Sub(deadline), first, token)

	old.drain()
	old.signal(t, syscall.SIGCONT)
	t.Logf("old incarnation after SIGCONT: %s", old.waitLine(t, "halted", 30*time.Second))
	accepted := <-result
	later := <-stream(t, client, role, "later", 20, "plain")

	outcomes, entries := waitSettled(t, c, tp, role.String(), append(accepted, later...), 90*time.Second)
	verifyLog(t, entries)
	checkDurableBeforeDispatch(t, entries, server.Dispatches())

	// Each incarnation dispatches under the term of its own leadership.
	byOld, byNew := map[string]bool{}, map[string]bool{}
	for _, d := range server.Dispatches() {
		if !d.Accepted {
			continue
		}
		if d.Term.Compare(first) >= 0 {
			byNew[d.CommandID] = true
		} else {
			byOld[d.CommandID] = true
		}
	}
	for id := range byNew {
		if byOld[id] {
			t.Errorf("command %s was dispatched by both incarnations of node-1", id)
		}
	}
	for _, id := range later {
		if !byNew[id] || outcomes[id].Status != dispatch.StatusSucceeded {
			t.Errorf("command %s, submitted while the new incarnation led: dispatched by it %t, outcome %+v", id, byNew[id], outcomes[id])
		}
	}
	statuses := map[dispatch.Status]int{}
	for _, id := range accepted {
		statuses[outcomes[id].Status]++
	}
	t.Logf("%d+%d commands accepted; dispatched by the old incarnation %d, by the new %d; outcomes of the first stream %v", len(accepted), len(later), len(byOld), len(byNew), statuses)
}

// leaseDeadline reads the deadline of the role's lease, which must name
// member.
func leaseDeadline(t *testing.T, c cluster, role coordination.Role, member string) time.Time {
	t.Helper()
	transport, err := coordination.NewKafkaTransport(coordination.DefaultLeaseConfig(), c.brokers...)
	if err != nil {
		t.Fatal(err)
	}
	defer transport.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	state, err := coordination.DescribeRoleState(ctx, transport, role)
	if err != nil {
		t.Fatal(err)
	}
	holder, ok := state.Holder()
	if !ok || holder.String() != member {
		t.Fatalf("the lease of %s names %v (held %t), want %s", role, holder, ok, member)
	}
	return time.UnixMilli(state.Lease.Deadline)
}
