package chaos

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"testing"
	"time"
)

// TestSubmissionTargetSplitsEvenlyOverRoles proves that a role receives
// its share of the rate whatever its number of members: with three members
// in one role and two in the other, each role receives half the
// submissions, each half with both devices and both paths in equal shares,
// and every member of a role is drawn.
func TestSubmissionTargetSplitsEvenlyOverRoles(t *testing.T) {
	var members []*member
	for _, n := range []string{"a1", "a2", "a3", "b1", "b2"} {
		members = append(members, &member{name: n, role: "role-" + n[:1]})
	}
	roles := membersByRole(members)
	if len(roles) != 2 || len(roles[0]) != 3 || len(roles[1]) != 2 {
		t.Fatalf("membersByRole: %d roles", len(roles))
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	const total = 4000
	perRole := map[string]int{}
	perKind := map[string]map[int]int{} // role, n%4 (device and path)
	perMember := map[string]int{}
	for n := range total {
		m := submissionTarget(n, roles, rng.IntN)
		perRole[m.role]++
		if perKind[m.role] == nil {
			perKind[m.role] = map[int]int{}
		}
		perKind[m.role][n%4]++
		perMember[m.name]++
	}
	for role, got := range perRole {
		if got != total/2 {
			t.Errorf("role %s received %d of %d submissions, want %d", role, got, total, total/2)
		}
		for kind := range 4 {
			if perKind[role][kind] != total/8 {
				t.Errorf("role %s received %d submissions of kind %d, want %d", role, perKind[role][kind], kind, total/8)
			}
		}
	}
	for _, m := range members {
		if perMember[m.name] == 0 {
			t.Errorf("member %s received no submission", m.name)
		}
	}
}

// TestRunRefusesASettlePeriodWithinTheCommandTimeout proves that a run
// whose settle period ends before the deadline of its last command is
// refused before it starts: its liveness check would count commands that
// had no time to reach an outcome.
func TestRunRefusesASettlePeriodWithinTheCommandTimeout(t *testing.T) {
	base := Config{Brokers: []string{"127.0.0.1:1"}, KafkaScript: "k", DispatcherBin: "d", MQTT: "tcp://127.0.0.1:1",
		Dir: t.TempDir(), Duration: time.Minute, Members: 3, Rate: 1, Lease: 4 * time.Second}
	for _, c := range []struct {
		settle, timeout time.Duration
	}{
		{settle: time.Minute, timeout: time.Minute},
		{settle: 2 * time.Minute, timeout: 5 * time.Minute},
		{settle: 30 * time.Second, timeout: 0}, // DefaultCommandTimeout
	} {
		cfg := base
		cfg.Settle, cfg.CommandTimeout = c.settle, c.timeout
		_, err := Run(context.Background(), cfg)
		if !errors.Is(err, ErrSettleWithinTimeout) {
			t.Errorf("settle %v, command timeout %v: got %v, want a refusal", c.settle, c.timeout, err)
		}
	}
}
