package coordination

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func names(roster []RosterEntry) []string {
	var out []string
	for _, e := range roster {
		out = append(out, e.Member.String())
	}
	return out
}

func TestRanks(t *testing.T) {
	role := mustRole(t, "controller")
	base := []StateRecord{
		regRecord(t, role, "node-1", 0, 0),
		regRecord(t, role, "node-2", 1, 0),
		regRecord(t, role, "node-3", 2, 0),
	}
	tests := []struct {
		name    string
		records []StateRecord
		ranks   map[string]int
	}{
		{"no holder: roster index", base, map[string]int{"node-1": 0, "node-2": 1, "node-3": 2}},
		{"first is holder", append(base, leaseRecord(t, role, "node-1", 3, 0, 30_000)), map[string]int{"node-1": 0, "node-2": 0, "node-3": 1}},
		{"middle is holder", append(base, leaseRecord(t, role, "node-2", 3, 0, 30_000)), map[string]int{"node-1": 0, "node-2": 0, "node-3": 1}},
		{"last is holder", append(base, leaseRecord(t, role, "node-3", 3, 0, 30_000)), map[string]int{"node-1": 0, "node-2": 1, "node-3": 0}},
		{"holder not registered", append(base, leaseRecord(t, role, "node-9", 3, 0, 30_000)), map[string]int{"node-1": 0, "node-2": 1, "node-3": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, err := BuildRoleState(role, tt.records)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.ranks {
				if rank, ok := state.RankOf(mustMember(t, name)); !ok || rank != want {
					t.Errorf("rank of %s = %d, %t; want %d", name, rank, ok, want)
				}
			}
			if _, ok := state.RankOf(mustMember(t, "stranger")); ok {
				t.Error("an unregistered member has a rank")
			}
		})
	}
}

func TestRoleStateFold(t *testing.T) {
	role := mustRole(t, "controller")
	other := mustRole(t, "scheduler")
	records := []StateRecord{
		regRecord(t, role, "node-1", 0, 100),
		regRecord(t, role, "node-2", 1, 200),
		regRecord(t, other, "node-1", 2, 300),
		leaseRecord(t, role, "node-1", 3, 400, 30_400),
		regRecord(t, role, "node-3", 4, 500),
		regRecord(t, role, "node-1", 5, 600), // re-registration: to the tail
		regTombstone(t, role, "node-2", 6),   // node-2 leaves
		leaseRecord(t, other, "node-9", 7, 0, 1),
	}
	state, err := BuildRoleState(role, records)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(state.Roster); !reflect.DeepEqual(got, []string{"node-3", "node-1"}) {
		t.Fatalf("roster %v", got)
	}
	entry, ok := state.Entry(mustMember(t, "node-1"))
	if !ok || entry.Offset != 5 || entry.RegisteredAt != 600 {
		t.Fatalf("entry of node-1 %+v", entry)
	}
	if _, ok := state.Entry(mustMember(t, "node-2")); ok {
		t.Fatal("a tombstoned member is in the roster")
	}
	holder, ok := state.Holder()
	if !ok || holder.String() != "node-1" || state.Lease.GrantedAt != 400 {
		t.Fatalf("holder %s, lease %+v", holder, state.Lease)
	}

	// A lease tombstone clears the lease; a later lease sets it again.
	cleared, err := BuildRoleState(role, append(records, leaseTombstone(role, 8)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cleared.Holder(); ok || cleared.Lease != nil {
		t.Fatalf("lease after a tombstone %+v", cleared.Lease)
	}
	again, err := BuildRoleState(role, append(records, leaseTombstone(role, 8), leaseRecord(t, role, "node-3", 9, 1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if holder, _ := again.Holder(); holder.String() != "node-3" {
		t.Fatalf("holder after a new lease %s", holder)
	}

	// The other role folds its own records.
	otherState, err := BuildRoleState(other, records)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(otherState.Roster); !reflect.DeepEqual(got, []string{"node-1"}) || otherState.Lease.Member.String() != "node-9" {
		t.Fatalf("other role %v, %+v", got, otherState.Lease)
	}
}

// TestFoldIgnoresOrder: the fold keeps the record of the highest offset for
// every key, so any order of the same records gives the same state.
func TestFoldIgnoresOrder(t *testing.T) {
	role := mustRole(t, "controller")
	records := []StateRecord{
		regRecord(t, role, "node-1", 0, 100),
		regRecord(t, role, "node-2", 1, 200),
		leaseRecord(t, role, "node-1", 2, 0, 30_000),
		regRecord(t, role, "node-3", 3, 300),
		regTombstone(t, role, "node-2", 4),
		regRecord(t, role, "node-1", 5, 500),
		leaseTombstone(role, 6),
		leaseRecord(t, role, "node-3", 7, 1, 31_000),
		regRecord(t, role, "node-2", 8, 800),
		regTombstone(t, role, "node-3", 9),
		leaseTombstone(role, 10),
	}
	for n := 1; n <= len(records); n++ {
		prefix := records[:n]
		want, err := BuildRoleState(role, prefix)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		for range 50 {
			shuffled := append([]StateRecord(nil), prefix...)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			got, err := BuildRoleState(role, shuffled)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%d records in another order gave\n%+v\nwant\n%+v", n, got, want)
			}
		}
	}
}

func TestFoldReportsBadRecords(t *testing.T) {
	role := mustRole(t, "controller")
	good := regRecord(t, role, "node-1", 0, 0)
	for name, bad := range map[string]StateRecord{
		"key":          {Offset: 3, Key: []byte{1, 2, 3}, Value: good.Value},
		"registration": {Offset: 3, Key: good.Key, Value: []byte{0, 0, 0}},
		"lease":        {Offset: 3, Key: EncodeKey(LeaseKey(role)), Value: good.Value},
	} {
		_, err := BuildRoleState(role, []StateRecord{good, bad})
		var format *FormatError
		if !errors.As(err, &format) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A value that does not decode is dropped with its record when the key
	// belongs to another role.
	otherKey := EncodeKey(RegistrationKey(mustRole(t, "other"), mustMember(t, "x")))
	if _, err := BuildRoleState(role, []StateRecord{{Key: otherKey, Value: []byte{9}}}); err != nil {
		t.Fatalf("a record of another role was decoded: %v", err)
	}
}

func TestRoleStateBuilder(t *testing.T) {
	role := mustRole(t, "controller")
	b := NewRoleStateBuilder(role)
	if b.Role() != role {
		t.Fatal("Role")
	}
	if err := b.Apply(regRecord(t, role, "node-1", 4, 0)); err != nil {
		t.Fatal(err)
	}
	state := b.Build()
	state.Roster[0].Offset = 99 // the state is the caller's copy
	if b.Build().Roster[0].Offset != 4 {
		t.Fatal("Build shares its roster")
	}

	var zero RoleStateBuilder
	if err := zero.Apply(regRecord(t, Role{}, "node-1", 0, 0)); err == nil {
		t.Fatal("a record of the zero role decoded")
	}
	var nilBuilder *RoleStateBuilder
	if nilBuilder.Apply(regRecord(t, role, "node-1", 0, 0)) == nil || nilBuilder.Role() != (Role{}) || nilBuilder.Build().Lease != nil {
		t.Fatal("nil builder")
	}
	zeroRole := RoleStateBuilder{role: role}
	if err := zeroRole.Apply(regRecord(t, role, "node-1", 0, 0)); err != nil || len(zeroRole.Build().Roster) != 1 {
		t.Fatalf("builder without a map: %v", err)
	}
}

func TestEvaluateRules(t *testing.T) {
	role := mustRole(t, "controller")
	config := mustConfig(t, 30*time.Second, 10*time.Second, 5*time.Second)
	roster := []StateRecord{
		regRecord(t, role, "node-1", 0, 1_000),
		regRecord(t, role, "node-2", 1, 2_000),
		regRecord(t, role, "node-3", 2, 3_000),
	}
	withLease := append(roster[:3:3], leaseRecord(t, role, "node-1", 3, 10_000, 40_000))
	tests := []struct {
		name    string
		records []StateRecord
		member  string
		now     int64
		want    Decision
	}{
		{"rule 1: not registered", withLease, "node-9", 0, Decision{Action: ActionNotRegistered}},
		{"rule 1 before rule 2: deregistered holder", withLease[1:4:4], "node-1", 20_000, Decision{Action: ActionNotRegistered}},
		{"rule 2: live holder", withLease, "node-1", 39_999, Decision{Action: ActionHold}},
		{"rule 2 ends at the deadline", withLease, "node-1", 40_000, Decision{Action: ActionChallenge}},
		{"rank 0 waits for the deadline", withLease, "node-2", 39_999, Decision{Action: ActionWait, WaitUntil: 40_000}},
		{"rank 0 challenges at the deadline", withLease, "node-2", 40_000, Decision{Action: ActionChallenge}},
		{"rank 1 waits one stagger more", withLease, "node-3", 40_000, Decision{Action: ActionWait, WaitUntil: 45_000}},
		{"rank 1 challenges after one stagger", withLease, "node-3", 45_000, Decision{Action: ActionChallenge}},
		{"no lease: rank 0 anchors on its registration", roster, "node-1", 1_000, Decision{Action: ActionChallenge}},
		{"no lease: rank 1 anchors on its own registration", roster, "node-2", 2_000, Decision{Action: ActionWait, WaitUntil: 7_000}},
		{"no lease: rank 2 at its instant", roster, "node-3", 13_000, Decision{Action: ActionChallenge}},
		{"no lease: the anchor does not move with now", roster, "node-3", 12_999, Decision{Action: ActionWait, WaitUntil: 13_000}},
		{"lease tombstone: no lease", append(withLease, leaseTombstone(role, 4)), "node-2", 2_000, Decision{Action: ActionWait, WaitUntil: 7_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, err := BuildRoleState(role, tt.records)
			if err != nil {
				t.Fatal(err)
			}
			if got := Evaluate(state, mustMember(t, tt.member), tt.now, config); got != tt.want {
				t.Fatalf("Evaluate = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestExpiredHolderReclaims: the member of an expired lease keeps rank 0, so
// it reclaims its own role at its own deadline, ahead of every standby.
func TestExpiredHolderReclaims(t *testing.T) {
	role := mustRole(t, "controller")
	config := DefaultLeaseConfig()
	state, err := BuildRoleState(role, []StateRecord{
		regRecord(t, role, "node-1", 0, 0),
		regRecord(t, role, "node-2", 1, 0),
		leaseRecord(t, role, "node-2", 2, 0, 30_000),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := Evaluate(state, mustMember(t, "node-2"), 30_000, config); got.Action != ActionChallenge {
		t.Fatalf("expired holder at its deadline: %+v", got)
	}
	if rank, _ := state.RankOf(mustMember(t, "node-2")); rank != 0 {
		t.Fatalf("expired holder rank %d", rank)
	}
}

// TestWaitUntilIsEarliestChange checks, for every state of a small log and
// every member, that the answer is the same up to WaitUntil and changes at
// WaitUntil.
func TestWaitUntilIsEarliestChange(t *testing.T) {
	role := mustRole(t, "controller")
	config := mustConfig(t, 30*time.Second, 10*time.Second, 5*time.Second)
	records := []StateRecord{
		regRecord(t, role, "node-1", 0, 1_000),
		regRecord(t, role, "node-2", 1, 2_000),
		regRecord(t, role, "node-3", 2, 3_000),
		leaseRecord(t, role, "node-2", 3, 5_000, 35_000),
		regRecord(t, role, "node-4", 4, 6_000),
	}
	for n := 1; n <= len(records); n++ {
		state, err := BuildRoleState(role, records[:n])
		if err != nil {
			t.Fatal(err)
		}
		for _, entry := range state.Roster {
			for _, now := range []int64{0, 2_500, 20_000, 34_999, 40_000} {
				d := Evaluate(state, entry.Member, now, config)
				if d.Action != ActionWait {
					if d.WaitUntil != 0 {
						t.Fatalf("%s: %s carries WaitUntil %d", entry.Member, d.Action, d.WaitUntil)
					}
					continue
				}
				if d.WaitUntil <= now {
					t.Fatalf("%s at %d: wait until %d", entry.Member, now, d.WaitUntil)
				}
				if before := Evaluate(state, entry.Member, d.WaitUntil-1, config); before != d {
					t.Fatalf("%s: answer changed before WaitUntil: %+v vs %+v", entry.Member, before, d)
				}
				if at := Evaluate(state, entry.Member, d.WaitUntil, config); at.Action == ActionWait {
					t.Fatalf("%s: answer unchanged at WaitUntil %d", entry.Member, d.WaitUntil)
				}
			}
		}
	}
}

func TestEvaluateHugeRank(t *testing.T) {
	role := mustRole(t, "controller")
	config := mustConfig(t, time.Minute, time.Second, time.Duration(math.MaxInt64/2))
	state, err := BuildRoleState(role, []StateRecord{
		regRecord(t, role, "node-1", 0, 0),
		regRecord(t, role, "node-2", 1, 0),
		regRecord(t, role, "node-3", 2, math.MaxInt64-5),
	})
	if err != nil {
		t.Fatal(err)
	}
	d := Evaluate(state, mustMember(t, "node-3"), 0, config)
	if d.Action != ActionWait || d.WaitUntil != math.MaxInt64 {
		t.Fatalf("huge anchor wrapped: %+v", d)
	}
}

func TestActionString(t *testing.T) {
	for action, want := range map[Action]string{
		ActionNotRegistered: "not registered",
		ActionHold:          "hold",
		ActionChallenge:     "challenge",
		ActionWait:          "wait",
		Action(9):           "Action(9)",
	} {
		if got := action.String(); got != want {
			t.Errorf("%d: %q, want %q", action, got, want)
		}
	}
}
