package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// acquire makes member the holder of role on the cluster at brokers, with
// short timings, and registers the others behind it.
func acquire(t *testing.T, brokers string, role string, holder string, others ...string) *coordination.Leadership {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := coordination.NewLeaseConfig(10*time.Second, 3*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := coordination.NewKafkaTransport(lease, strings.Split(brokers, ",")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	r, _ := coordination.NewRole(role)
	m, _ := coordination.NewMemberID(holder)
	l, err := coordination.AcquireLeadership(ctx, tr, r, m,
		coordination.WithLeaseConfig(lease), coordination.WithPollInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Resign(context.Background()) })
	tp, err := coordination.RoleTopicPartition(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range others {
		om, _ := coordination.NewMemberID(o)
		key := coordination.EncodeKey(coordination.RegistrationKey(r, om))
		val := coordination.EncodeRegistration(coordination.Registration{Member: om, RegisteredAt: time.Now().UnixMilli()})
		if err := tr.Append(ctx, tp, key, val); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func TestStatusOnFakeCluster(t *testing.T) {
	_, brokers := newFakeCluster(t)
	ctx := context.Background()
	if code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers); code != 0 {
		t.Fatalf("topics: %d\n%s%s", code, out, errOut)
	}

	// No member has ever registered for the role: not an outage, a role
	// that does not exist.
	code, _, errOut := runCLI(t, ctx, "status", "--brokers", brokers, "--role", "controller")
	if code != int(ExitUnknownRole) || !strings.HasPrefix(errOut, `dispatcher: role "controller" has never been registered`) {
		t.Fatalf("before any member: exit %d, want %d\n%s", code, ExitUnknownRole, errOut)
	}

	l := acquire(t, brokers, "controller", "node-1", "node-2", "node-3")
	// A role spelled in another case is another role; the error names the
	// one the topic holds.
	code, _, errOut = runCLI(t, ctx, "status", "--brokers", brokers, "--role", "Controller")
	if code != int(ExitUnknownRole) || !strings.Contains(errOut, "roles are case-sensitive") || !strings.Contains(errOut, `did you mean "controller"?`) {
		t.Fatalf("status --role Controller: exit %d, want %d and a suggestion\n%s", code, ExitUnknownRole, errOut)
	}
	code, out, errOut := runCLI(t, ctx, "status", "--brokers", brokers, "--role", "controller", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res StatusResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Holder != "node-1" || !res.LeaseLive || res.LeaseRemainingMS <= 0 {
		t.Errorf("holder %q live %v remaining %d", res.Holder, res.LeaseLive, res.LeaseRemainingMS)
	}
	if res.CoordinatorToken != l.Token().String() {
		t.Errorf("coordinator token %s, the holder's is %s", res.CoordinatorToken, l.Token())
	}
	if res.Term == coordination.NoTerm || res.Term != l.Term() {
		t.Errorf("term %s, the holder's is %s", res.Term, l.Term())
	}
	if !strings.Contains(out, fmt.Sprintf(`"term": %d,`, int64(l.Term()))) {
		t.Errorf("the JSON does not carry the term as a number:\n%s", out)
	}
	if res.Authority != AuthorityConfirmed && res.Authority != AuthorityAdvanced {
		t.Errorf("authority %q", res.Authority)
	}
	if len(res.Roster) != 3 {
		t.Fatalf("roster %+v", res.Roster)
	}
	wantRanks := map[string]int{"node-1": 0, "node-2": 0, "node-3": 1}
	for _, m := range res.Roster {
		if m.Rank != wantRanks[m.Member] {
			t.Errorf("%s rank %d, want %d", m.Member, m.Rank, wantRanks[m.Member])
		}
		if m.Holder != (m.Member == "node-1") {
			t.Errorf("%s holder %v", m.Member, m.Holder)
		}
	}

	// The table says the same for people.
	code, out, _ = runCLI(t, ctx, "status", "--brokers", brokers, "--role", "controller")
	if code != 0 || !strings.Contains(out, "holder:       node-1") || !strings.Contains(out, "node-3") ||
		!strings.Contains(out, "term:         "+l.Term().String()+"\n") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}

	// After a resignation no one holds a live lease.
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, ctx, "status", "--brokers", brokers, "--role", "controller")
	if code != int(ExitNoLeader) {
		t.Fatalf("after resign: exit %d\n%s", code, out)
	}
}

func TestBuildStatusAuthority(t *testing.T) {
	role, _ := coordination.NewRole("r")
	m1, _ := coordination.NewMemberID("a")
	old, _ := coordination.NewFencingToken(5, 1)
	bumped, _ := coordination.NewFencingToken(5, 2)
	rotated, _ := coordination.NewFencingToken(3, 0)
	now := time.UnixMilli(1_000_000)
	state := coordination.RoleState{
		Roster: []coordination.RosterEntry{{Member: m1, Offset: 0}},
		Lease:  &coordination.Lease{Member: m1, Token: old, GrantedAt: now.UnixMilli() - 1000, Deadline: now.UnixMilli() + 4000},
		Term:   812,
	}
	for _, c := range []struct {
		coordinator coordination.LeadershipStatus
		want        string
	}{
		{coordination.LeadershipStatus{Role: role, Token: old, Held: true}, AuthorityConfirmed},
		{coordination.LeadershipStatus{Role: role, Token: bumped, Held: true}, AuthorityAdvanced},
		// The producer id rotated to a lower one within the term.
		{coordination.LeadershipStatus{Role: role, Token: rotated, Held: true}, AuthorityAdvanced},
		{coordination.LeadershipStatus{Role: role, Token: coordination.NoEpoch}, AuthorityNone},
	} {
		got := buildStatus(role, state, c.coordinator, now)
		if got.Authority != c.want {
			t.Errorf("coordinator %v: authority %s, want %s", c.coordinator, got.Authority, c.want)
		}
		if got.Term != 812 {
			t.Errorf("term %s, want 812", got.Term)
		}
		if got.LeaseRemainingMS != 4000 || !got.LeaseLive {
			t.Errorf("remaining %d live %v", got.LeaseRemainingMS, got.LeaseLive)
		}
	}
	expired := buildStatus(role, state, coordination.LeadershipStatus{}, now.Add(5*time.Second))
	if expired.LeaseLive || expired.LeaseRemainingMS != 0 {
		t.Errorf("expired lease: live %v remaining %d", expired.LeaseLive, expired.LeaseRemainingMS)
	}
}

func TestNearRoles(t *testing.T) {
	seen := map[string]bool{"controller": true, "pump-station": true, "valves": true}
	if got := nearRoles("Controller", seen); len(got) != 1 || got[0] != "controller" {
		t.Errorf("Controller: %v", got)
	}
	if got := nearRoles("valve", seen); len(got) != 1 || got[0] != "valves" {
		t.Errorf("valve: %v", got)
	}
	if got := nearRoles("nosuchrole", seen); len(got) != 0 {
		t.Errorf("nosuchrole: %v", got)
	}
}
