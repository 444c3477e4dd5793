//go:build integration

package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// aheadClock is the system clock read an hour ahead. A member on it finds
// every lease expired, so it challenges at once: the test gets a successor
// while the holder still renews, without waiting for a deadline. Clock skew
// moves a failover and never its safety, which is what the test shows.
type aheadClock struct{}

func (aheadClock) NowMillis() int64 { return time.Now().Add(time.Hour).UnixMilli() }

func (aheadClock) After(extent time.Duration) <-chan time.Time { return time.After(extent) }

// TestKafkaLeadershipInvariants checks invariants I1 to I4 through
// Leadership on the real cluster: A holds the role and writes; B takes the
// role; from then on every guarded write of A fails with ErrFenced at the
// broker, A's Done closes, and DescribeLeadership from a third transport is
// authoritative for B's current token and for none of A's. Every record
// carries the token of the transaction that wrote it, which is the producer
// id and epoch of its batch, and tokens grow in log order.
func TestKafkaLeadershipInvariants(t *testing.T) {
	eachTxnVersion(t, func(t *testing.T, env kafkaEnv) {
		ctx := testCtx(t, 90*time.Second)
		role := uniqueRole(t)
		topic := kafkatest.UniqueName(t, "t")
		env.createTopic(t, topic, 1)
		bystander := env.transport(t, testLease(t))

		a, err := coordination.AcquireLeadership(ctx, env.transport(t, testLease(t)), role, member(t, "a"), leadershipOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		write := func(l *coordination.Leadership, name string) (coordination.FencingToken, error) {
			return l.Write(ctx, func(token coordination.FencingToken) ([]coordination.GuardedRecord, error) {
				return []coordination.GuardedRecord{{
					Partition: coordination.TopicPartition{Topic: topic},
					Value:     tokenValue(name, token),
				}}, nil
			})
		}
		var tokensA []coordination.FencingToken
		for range 3 {
			used, err := write(a, "a")
			if err != nil {
				t.Fatalf("A's write: %v", err)
			}
			tokensA = append(tokensA, used)
			// I3: the leadership shows the coordinator's token.
			assertAuthoritative(ctx, t, bystander, a)
			if env.bumps && !a.Token().Supersedes(used) {
				t.Fatalf("transactions v2: after a commit under %s the leadership shows %s", used, a.Token())
			}
		}
		tokensA = append(tokensA, a.Token())

		b, err := coordination.AcquireLeadership(ctx, env.transport(t, testLease(t)), role, member(t, "b"),
			leadershipOptions(t, coordination.WithClock(aheadClock{}))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Resign(context.Background()) })
		for _, old := range tokensA {
			if !b.Token().Supersedes(old) {
				t.Fatalf("I2: B's token %s does not supersede A's %s", b.Token(), old)
			}
		}

		// I1: A's next guarded write fails at the broker, and A ends.
		_, err = write(a, "a")
		if !errors.Is(err, coordination.ErrFenced) {
			// The renewal loop may have met the fence first; then the
			// leadership already ended with it.
			if !errors.Is(err, coordination.ErrNotHeld) || !errors.Is(a.Err(), coordination.ErrFenced) {
				t.Fatalf("A's write after B's acquisition = %v (A's end: %v), want ErrFenced", err, a.Err())
			}
		}
		select {
		case <-a.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("A's Done did not close after the fence")
		}
		if !errors.Is(a.Err(), coordination.ErrFenced) {
			t.Fatalf("A ended with %v, want ErrFenced", a.Err())
		}
		if _, err := write(a, "a"); err == nil {
			t.Fatal("A wrote after its leadership ended")
		}

		if _, err := write(b, "b"); err != nil {
			t.Fatalf("B's write: %v", err)
		}
		status := assertAuthoritative(ctx, t, bystander, b)
		for _, old := range append(tokensA, a.Token()) {
			if status.Authoritative(old) {
				t.Fatalf("I1: %v is authoritative for A's token %s", status, old)
			}
		}

		// I4 and I2 in the log: each record carries its batch's token, the
		// tokens grow, and no record of A follows one of B.
		records := readCommitted(t, env, topic, 0)
		var last coordination.FencingToken = coordination.NoEpoch
		seenB := false
		for _, r := range records {
			name, token := valueToken(t, r.Value)
			batch, err := coordination.NewFencingToken(r.ProducerID, r.ProducerEpoch)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case token != batch:
				t.Fatalf("I4: offset %d carries %s in a batch of %s", r.Offset, token, batch)
			case token.Compare(last) < 0:
				t.Fatalf("I2: offset %d carries %s after %s", r.Offset, token, last)
			case name == "a" && seenB:
				t.Fatalf("I1: A's record at offset %d follows B's", r.Offset)
			}
			seenB = seenB || name == "b"
			last = token
		}
		if len(records) != 4 || !seenB {
			t.Fatalf("%d records, want A's three and B's one", len(records))
		}
	})
}

// TestKafkaCrashFailover: the holder is another process, killed with
// SIGKILL. The rank 0 standby challenges within one poll interval after the
// holder's last lease deadline, never before it, and holds the role once its
// challenge completes; the rank 1 standby does not challenge: past its
// own challenge instant, the rank 0 leadership still holds and is
// authoritative.
func TestKafkaCrashFailover(t *testing.T) {
	eachTxnVersion(t, func(t *testing.T, env kafkaEnv) {
		role := uniqueRole(t)
		topic := kafkatest.UniqueName(t, "t")
		env.createTopic(t, topic, 1)
		ctx := testCtx(t, 90*time.Second)
		bystander := env.transport(t, testLease(t))
		lease := testLease(t)
		stagger := 2 * time.Second
		opts := leadershipOptions(t, coordination.WithChallengeStagger(stagger))
		poll := 200 * time.Millisecond

		holder, held := startHolder(t, env, role, topic)
		s0 := startStandby(t, env, role, "s0", opts...)
		s1 := startStandby(t, env, role, "s1", opts...)
		holder.waitFor(t, "WROTE ", 10*time.Second)

		// This process holds nothing, and it sees who holds the role: the
		// roster in registration order, the holder's lease, and a token of
		// the holder's, which under v2 has moved on from the minted one.
		eventually(t, 10*time.Second, func() error {
			state, err := coordination.DescribeRoleState(ctx, bystander, role)
			if err != nil {
				return err
			}
			var roster []string
			for _, e := range state.Roster {
				roster = append(roster, e.Member.String())
			}
			if who, ok := state.Holder(); !ok || who.String() != holderMember || !slices.Equal(roster, []string{holderMember, "s0", "s1"}) {
				return fmt.Errorf("state: holder %v (%v), roster %v", who, ok, roster)
			}
			return nil
		})
		status, err := coordination.DescribeLeadership(ctx, bystander, role)
		if err != nil {
			t.Fatal(err)
		}
		if !status.Held || status.Token.Compare(held) < 0 || (!env.bumps && status.Token != held) {
			t.Fatalf("DescribeLeadership = %v while the holder holds %s", status, held)
		}

		holder.signal(t, syscall.SIGKILL)
		killed := time.Now()
		r0 := s0.wait(t, lease.Duration()+10*time.Second)
		t.Logf("%s: s0 holds %v after the SIGKILL", env.name, r0.at.Sub(killed).Round(time.Millisecond))

		deadline := lastDeadline(t, role, holderMember)
		late := r0.at.Sub(time.UnixMilli(deadline))
		challenged := s0.challengedAt().Sub(time.UnixMilli(deadline))
		t.Logf("%s: s0 challenged %v and took the role %v after the holder's last deadline", env.name,
			challenged.Round(time.Millisecond), late.Round(time.Millisecond))
		if challenged < 0 {
			t.Fatalf("s0 challenged %v before the holder's deadline", -challenged)
		}
		// The protocol's bound is on the challenge: a standby notices the
		// expired lease on the first read after the deadline, within one poll
		// interval and that read. The challenge itself (InitProducerId, which
		// aborts the dead holder's open transaction, the read after the
		// fence, which finds the holder's lease expired, and the first lease
		// write) takes some tens of milliseconds on a quiet machine; the
		// suite's parallel tests under the race detector have stretched it
		// past a second, so its bound is a liveness check, not a timing claim.
		if bound := poll + 300*time.Millisecond; challenged > bound {
			t.Fatalf("s0 challenged %v after the deadline, above the bound of %v", challenged, bound)
		}
		if took, bound := late-challenged, 3*time.Second; took > bound {
			t.Fatalf("s0's challenge took %v, above %v", took, bound)
		}

		// Past the instant at which s1 would challenge the holder's lease,
		// and a poll later, s0 still holds: s1 did not challenge.
		challengeAt := time.UnixMilli(deadline).Add(stagger + 2*poll)
		select {
		case <-r0.l.Done():
			t.Fatalf("s0's leadership ended: %v", r0.l.Err())
		case <-time.After(time.Until(challengeAt)):
		}
		if !s1.pending() {
			t.Fatal("s1 took the role from a live leader")
		}
		// A challenge of s1 would have minted a newer epoch than s0's.
		assertAuthoritative(ctx, t, bystander, r0.l)
		if !s1.pending() {
			t.Fatal("s1 took the role from a live leader")
		}
	})
}

// lastDeadline returns the latest deadline among the committed leases of
// member in the partition of role.
func lastDeadline(t *testing.T, role coordination.Role, name string) int64 {
	t.Helper()
	deadline := int64(-1)
	for _, r := range allRecords(t, role) {
		k, err := coordination.DecodeKey(r.Key)
		if err != nil || k.Kind != coordination.KindLease || coordination.IsTombstone(r.Value) {
			continue
		}
		l, err := coordination.DecodeLease(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if l.Member.String() == name {
			deadline = max(deadline, l.Deadline)
		}
	}
	if deadline < 0 {
		t.Fatalf("no lease of %s in the partition", name)
	}
	return deadline
}

// allRecords reads every committed record of the partition of role, every
// version of every key, with a plain consumer. It reads up to the high
// watermark at the time of the call, and waits for the commit markers of the
// records below it, so a commit that returned before the call shows.
func allRecords(t *testing.T, role coordination.Role) []coordination.StateRecord {
	t.Helper()
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	env := realEnvs(t)[0]
	var out []coordination.StateRecord
	for _, r := range readCommitted(t, env, partition.Topic, int32(partition.Partition)) {
		k, err := coordination.DecodeKey(r.Key)
		if err != nil || k.Role != role {
			continue
		}
		out = append(out, coordination.StateRecord{Offset: r.Offset, Key: r.Key, Value: r.Value})
	}
	return out
}

// TestKafkaPauseFailover: the holder process is stopped with SIGSTOP past
// its deadline, a standby takes the role and writes, then SIGCONT. The old
// holder's next guarded write is refused with ErrFenced and its leadership
// ends; no record of it lands after the new holder's first lease, neither on
// the coordination partition nor on the topic both write to.
func TestKafkaPauseFailover(t *testing.T) {
	eachTxnVersion(t, func(t *testing.T, env kafkaEnv) {
		role := uniqueRole(t)
		topic := kafkatest.UniqueName(t, "t")
		env.createTopic(t, topic, 1)
		ctx := testCtx(t, 90*time.Second)
		lease := testLease(t)

		holder, held := startHolder(t, env, role, topic)
		s0 := startStandby(t, env, role, "s0", leadershipOptions(t)...)
		holder.waitFor(t, "WROTE ", 10*time.Second)

		holder.signal(t, syscall.SIGSTOP)
		r0 := s0.wait(t, lease.Duration()+10*time.Second)
		if !r0.l.Token().Supersedes(held) {
			t.Fatalf("s0's token %s does not supersede the holder's %s", r0.l.Token(), held)
		}
		if _, err := r0.l.Write(ctx, func(token coordination.FencingToken) ([]coordination.GuardedRecord, error) {
			return []coordination.GuardedRecord{{Partition: coordination.TopicPartition{Topic: topic}, Value: tokenValue("s0", token)}}, nil
		}); err != nil {
			t.Fatalf("s0's write: %v", err)
		}

		// Drain what the holder said before it stopped.
		for len(holder.lines) > 0 {
			<-holder.lines
		}
		holder.signal(t, syscall.SIGCONT)
		// The holder's first guarded write after waking is a renewal or one
		// of its writes, whichever its scheduler runs first; the broker
		// refuses it, and the leadership ends with ErrFenced. A write of the
		// holder that failed after that fails without a request, because the
		// leadership ended; none succeeds.
		woke := holder.linesUntil(t, "DONE ", 20*time.Second)
		if done := woke[len(woke)-1]; !strings.HasPrefix(done, "DONE fenced=true") {
			t.Fatalf("the holder ended with %q, want a fence", done)
		}
		refused := false
		for _, line := range woke[:len(woke)-1] {
			switch {
			case strings.HasPrefix(line, "WROTE ") && !refused:
				// A write that committed before SIGSTOP may report only
				// now; the log check below proves it landed before s0's.
				t.Logf("the holder reported a write after waking: %q", line)
			case strings.HasPrefix(line, "WRITEERR fenced=true"), strings.HasPrefix(line, "WRITEERR fenced=false ended=true"):
				refused = true
			default:
				t.Fatalf("the holder said %q after waking; want its writes refused by the fence", line)
			}
		}

		// The holder wrote nothing after s0's first record or lease.
		records := readCommitted(t, env, topic, 0)
		firstS0 := slices.IndexFunc(records, func(r *kgo.Record) bool {
			name, _ := valueToken(t, r.Value)
			return name == "s0"
		})
		if firstS0 < 0 {
			t.Fatal("s0's record is missing")
		}
		for _, r := range records[firstS0:] {
			if name, token := valueToken(t, r.Value); name == holderMember {
				t.Fatalf("the holder's record under %s landed at offset %d, after s0's first at %d", token, r.Offset, records[firstS0].Offset)
			}
		}
		assertNoLeaseAfter(t, role, allRecords(t, role), holderMember, "s0")
		if !r0.l.Token().Supersedes(held) || r0.l.Err() != nil {
			t.Fatalf("s0 after the holder woke: token %s, end %v", r0.l.Token(), r0.l.Err())
		}
		assertAuthoritative(ctx, t, env.transport(t, testLease(t)), r0.l)
	})
}

// TestKafkaResignHandover: the first standby holds the role soon after
// Resign returns, because it long-polls the partition instead of sleeping a
// poll interval. The test hands the role back and forth between two members
// five times and logs every handover.
//
// The members poll every 4 s. A standby that slept its poll interval would
// hand over up to 4 s after the Resign: about 4 s here, since the test
// resigns just after the standby begins to wait (measured with the long poll
// turned off). The test asserts a median of at most 1 s. A single handover is a chain of a dozen requests to three JVMs: about
// 50 ms on an idle two-core machine, and medians up to 600 ms were seen while
// other packages' tests loaded both cores. So the median separates the two
// designs without failing on a loaded machine.
func TestKafkaResignHandover(t *testing.T) {
	const (
		poll  = 4 * time.Second
		bound = time.Second
	)
	for _, env := range realEnvs(t) {
		t.Run(env.name, func(t *testing.T) {
			ctx := testCtx(t, 90*time.Second)
			role := uniqueRole(t)
			members := []*coordination.KafkaTransport{
				env.transport(t, coordination.DefaultLeaseConfig()),
				env.transport(t, coordination.DefaultLeaseConfig()),
			}
			names := []string{"m0", "m1"}
			holder, err := coordination.AcquireLeadership(ctx, members[0], role, member(t, names[0]), coordination.WithPollInterval(poll))
			if err != nil {
				t.Fatal(err)
			}
			var handovers []time.Duration
			for i := 1; i <= 5; i++ {
				next := i % 2
				type result struct {
					l   *coordination.Leadership
					err error
					at  time.Time
				}
				won := make(chan result, 1)
				go func() {
					l, err := coordination.AcquireLeadership(ctx, members[next], role, member(t, names[next]), coordination.WithPollInterval(poll))
					won <- result{l, err, time.Now()}
				}()
				// The standby registers, reads, and then waits; a Resign
				// before that wait is seen by its read.
				eventually(t, 20*time.Second, func() error {
					state, err := coordination.DescribeRoleState(ctx, members[1-next], role)
					if err != nil {
						return err
					}
					if _, ok := state.Entry(member(t, names[next])); !ok {
						return fmt.Errorf("%s is not in the roster yet", names[next])
					}
					return nil
				})
				if err := holder.Resign(ctx); err != nil {
					t.Fatalf("resign: %v", err)
				}
				resigned := time.Now()
				r := <-won
				if r.err != nil {
					t.Fatalf("standby: %v", r.err)
				}
				handover := r.at.Sub(resigned)
				handovers = append(handovers, handover)
				t.Logf("%s: handover %d from %s to %s took %v", env.name, i, names[1-next], names[next], handover.Round(time.Millisecond))
				holder = r.l
			}
			t.Cleanup(func() { _ = holder.Resign(context.Background()) })
			sorted := slices.Clone(handovers)
			slices.Sort(sorted)
			median := sorted[len(sorted)/2]
			t.Logf("%s: median handover %v, slowest %v", env.name, median.Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond))
			if median > bound {
				t.Errorf("median handover %v of %v is above the bound of %v", median, handovers, bound)
			}
		})
	}
}

// TestKafkaBrokerLossDuringRenewal: one broker is killed with SIGKILL while
// two leaderships renew, one under each transaction version; both survive on
// the two brokers left, renew, and write, and both stay authoritative. The
// killed broker is the leader of the v2 role's partition. It is restarted at
// the end, and the test waits until it is back in sync. The v1 leadership
// may end instead, by franz-go's one fatal answer to a lost coordinator
// (see below and docs/OPERATIONS.md); the role is then taken again and must
// write and stay authoritative with the broker still down.
func TestKafkaBrokerLossDuringRenewal(t *testing.T) {
	// No test of another package may use the cluster while a broker is down.
	kafkatest.LockFaults(t)
	lease, err := coordination.NewLeaseConfig(10*time.Second, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 3*time.Minute)
	envs := realEnvs(t)
	type held struct {
		env  kafkaEnv
		role coordination.Role
		l    *coordination.Leadership
	}
	topic := kafkatest.UniqueName(t, "t")
	envs[0].createTopic(t, topic, 3)
	var all []held
	for _, env := range envs {
		role := uniqueRole(t)
		l, err := coordination.AcquireLeadership(ctx, env.transport(t, lease), role, member(t, "m"),
			coordination.WithLeaseConfig(lease), coordination.WithPollInterval(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Resign(context.Background()) })
		all = append(all, held{env, role, l})
	}

	partition, err := coordination.RoleTopicPartition(all[0].role)
	if err != nil {
		t.Fatal(err)
	}
	adm := kafkatest.Admin(t, envs[0].brokers)
	m, err := adm.Metadata(ctx, partition.Topic)
	if err != nil {
		t.Fatal(err)
	}
	victim := int(m.Topics[partition.Topic].Partitions[int32(partition.Partition)].Leader)
	if victim < 1 || victim > kafkatest.NumBrokers {
		t.Fatalf("leader of %v is broker %d", partition, victim)
	}
	t.Cleanup(func() {
		kafkatest.RestartBroker(t, victim)
		kafkatest.WaitInSync(t, envs[0].brokers, coordination.StateTopic, "__transaction_state")
	})

	before := make([]coordination.Lease, len(all))
	for i, h := range all {
		before[i] = h.l.Lease()
	}
	kafkatest.KillBroker(t, victim)
	killed := time.Now()
	t.Logf("killed broker %d, the leader of %s[%d]", victim, partition.Topic, partition.Partition)

	// Both leaderships renew on the brokers left: a renewal granted after
	// the kill commits, and Done stays open. Under transactions v1 alone,
	// franz-go (1.22) may lose the producer instead: an AddPartitionsToTxn
	// whose coordinator's broker has left the metadata fails with its
	// "unknown broker", which it takes as fatal for the producer id, and
	// the abort finds nothing to end. The transport then ends the
	// leadership with ErrOutcomeUnknown; the role must be taken again, with
	// the broker still down.
	for i := range all {
		h := &all[i]
		lost := false
		eventually(t, lease.Duration(), func() error {
			select {
			case <-h.l.Done():
				if err := h.l.Err(); h.env.name != "v1" || !errors.Is(err, coordination.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "unknown broker") {
					t.Fatalf("%s: the leadership ended: %v", h.env.name, err)
				}
				lost = true
				return nil
			default:
			}
			if got := h.l.Lease(); got.GrantedAt <= killed.UnixMilli() {
				return fmt.Errorf("%s: no renewal since the kill; last granted at %d", h.env.name, got.GrantedAt)
			}
			return nil
		})
		if lost {
			t.Logf("%s: franz-go lost the producer to the broker's loss (%v); taking the role again", h.env.name, h.l.Err())
			l, err := coordination.AcquireLeadership(ctx, h.env.transport(t, lease), h.role, member(t, "m"),
				coordination.WithLeaseConfig(lease), coordination.WithPollInterval(200*time.Millisecond))
			if err != nil {
				t.Fatalf("%s: take the role again with broker %d down: %v", h.env.name, victim, err)
			}
			t.Cleanup(func() { _ = l.Resign(context.Background()) })
			h.l = l
			t.Logf("%s: taken again %v after the kill", h.env.name, time.Since(killed).Round(time.Millisecond))
			continue
		}
		t.Logf("%s: renewed %v after the kill", h.env.name, time.UnixMilli(h.l.Lease().GrantedAt).Sub(killed).Round(time.Millisecond))
	}
	for i, h := range all {
		if !h.l.Lease().Token.Supersedes(before[i].Token) && h.l.Lease().Token != before[i].Token {
			t.Fatalf("%s: the lease token went back", h.env.name)
		}
		if _, err := h.l.Write(ctx, func(token coordination.FencingToken) ([]coordination.GuardedRecord, error) {
			var records []coordination.GuardedRecord
			for p := range 3 {
				records = append(records, coordination.GuardedRecord{Partition: coordination.TopicPartition{Topic: topic, Partition: p}, Value: tokenValue("m", token)})
			}
			return records, nil
		}); err != nil {
			t.Fatalf("%s: a guarded write with a broker down: %v", h.env.name, err)
		}
		assertAuthoritative(ctx, t, h.env.transport(t, lease), h.l)
	}
}
