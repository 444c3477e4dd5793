//go:build integration

package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// exhaustionHeadroom is the number of epochs that the leadership itself uses
// before its producer id runs out: the acquisition's InitProducerId, then one
// commit per renewal or write, the last of which rotates the producer id.
const exhaustionHeadroom = 24

// TestKafkaEpochExhaustionAfterCoordinatorMove drives a leadership under
// transactions v2 through the end of its producer's epochs after the role's
// transaction coordinator moved to another broker, so the coordinator rotates
// the role to a producer id from the new broker's block, lower than the one
// before. The leadership adopts the rotated token and keeps its term: it keeps
// renewing and writing, its error stays nil, the coordinator's answer is
// authoritative for its token, and the records it writes after the rotation
// commit under the new producer id with the same term. A successor that takes
// the role afterwards holds a higher term although its producer id is below
// the one the deposed leader started with, the deposed leader's write fails
// with ErrFenced, and the authority of the successor outranks the deposed
// one's. A device fence admits the leader's authority on both sides of the
// rotation, then the successor's, and refuses the deposed leader's.
//
// The test stops the coordinator's broker, so it holds the fault lock and
// restarts the broker before the successor takes the role.
//
// It runs twice: once with the renewals in transactions of their own, and
// once with WithRenewalsInWrites, as the dispatcher binary acquires its
// roles, where A writes alone and every write carries the renewal, so the
// transaction that exhausts the epoch and rotates the producer id is a
// write with the lease record in it.
func TestKafkaEpochExhaustionAfterCoordinatorMove(t *testing.T) {
	for _, mode := range []struct {
		name             string
		renewalsInWrites bool
	}{{"renewals-apart", false}, {"renewals-in-writes", true}} {
		t.Run(mode.name, func(t *testing.T) {
			epochExhaustionAfterCoordinatorMove(t, mode.renewalsInWrites)
		})
	}
}

func epochExhaustionAfterCoordinatorMove(t *testing.T, renewalsInWrites bool) {
	kafkatest.LockFaults(t)
	brokers := kafkatest.Brokers(t)
	ctx := testCtx(t, 6*time.Minute)
	lease, err := coordination.NewLeaseConfig(6*time.Second, 2*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	options := func(extra ...coordination.Option) []coordination.Option {
		return append([]coordination.Option{
			coordination.WithLeaseConfig(lease),
			coordination.WithPollInterval(200 * time.Millisecond),
		}, extra...)
	}
	transport := func() *coordination.KafkaTransport {
		tr, err := coordination.NewKafkaTransport(lease, brokers...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		return tr
	}
	role := uniqueRole(t)
	topic := kafkatest.UniqueName(t, "t")
	kafkatest.CreateTopic(t, brokers, topic, 1, nil)

	// The broker that coordinates the role mints its first producer id from
	// a block above the other brokers' blocks, and the epoch of that id is
	// pushed to a few bumps short of exhaustion before any member runs. The
	// preferred leaders go back in place first, so no leader rebalance
	// after an earlier restart moves the coordinator during the test.
	kafkatest.ElectPreferredLeaders(t, brokers, "__transaction_state")
	first := kafkatest.TxnCoordinator(t, brokers, role.String())
	block := kafkatest.RaiseProducerIDBlock(t, brokers, first)
	start := time.Now()
	pushed := kafkatest.BumpEpoch(t, brokers, role.String(), kafkatest.ExhaustedEpoch-exhaustionHeadroom)
	t.Logf("the epoch of %s reached %s at broker %d in %v", role, pushed, first, time.Since(start).Round(time.Millisecond))
	if now := kafkatest.TxnCoordinator(t, brokers, role.String()); now != first || pushed.ProducerID < block {
		t.Fatalf("the coordinator of %s moved from broker %d to %d, or minted producer id %d below broker %d's block of %d", role, first, now, pushed.ProducerID, first, block)
	}

	// Every other broker still hands out ids below the role's: a broker
	// restarted in the meantime would hold a fresh block above it.
	for n := 1; n <= kafkatest.NumBrokers; n++ {
		if n == first {
			continue
		}
		if id := kafkatest.MintProducerID(t, brokers, n); id >= pushed.ProducerID {
			t.Fatalf("broker %d hands out producer id %d, above the role's %d: was it restarted during the test?", n, id, pushed.ProducerID)
		}
	}

	// Move the coordinator: stop its broker, and wait until another broker
	// coordinates the role and has loaded its state.
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		kafkatest.RestartBroker(t, first)
		kafkatest.WaitInSync(t, brokers, coordination.StateTopic, "__transaction_state", topic)
	}
	t.Cleanup(restart)
	kafkatest.KillBroker(t, first)
	killed := time.Now()
	moved := kafkatest.WaitTxnCoordinatorMoved(t, brokers, role.String(), first)
	t.Logf("killed broker %d; broker %d coordinates %s after %v", first, moved, role, time.Since(killed).Round(time.Millisecond))

	var aOptions []coordination.Option
	if renewalsInWrites {
		// A lead a millisecond under the renew interval: every write that
		// starts a millisecond or more after the last renewal carries the
		// next one, and the renewal loop has none left to write.
		aOptions = append(aOptions, coordination.WithRenewalsInWrites(lease.RenewInterval()-time.Millisecond))
	}
	a, err := coordination.AcquireLeadership(ctx, transport(), role, member(t, "a"), options(aOptions...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Resign(context.Background()) })
	acquired := a.Token()
	if acquired.ProducerID() != pushed.ProducerID || acquired.ProducerEpoch() <= pushed.Epoch {
		t.Fatalf("A acquired %s after the epoch was pushed to %s; want one of its later epochs", acquired, pushed)
	}
	term := a.Term()
	t.Logf("A holds term %s with token %s", term, acquired)
	// A device fence sees A's commands on both sides of the rotation and
	// then the successor's.
	device, err := fence.Open(filepath.Join(t.TempDir(), "fence.json"))
	if err != nil {
		t.Fatal(err)
	}
	const valve = "valve-1"
	firstAuthority := a.Authority()
	if err := device.Admit(valve, firstAuthority); err != nil {
		t.Fatalf("the fence refuses A's first authority %s: %v", firstAuthority, err)
	}

	records := 0
	write := func(l *coordination.Leadership, name string) (coordination.FencingToken, error) {
		return l.Write(ctx, func(token coordination.FencingToken) ([]coordination.GuardedRecord, error) {
			return []coordination.GuardedRecord{{
				Partition: coordination.TopicPartition{Topic: topic},
				Value:     tokenValue(name, token),
			}}, nil
		})
	}
	// check asserts that A still holds its term and that its token is the
	// one the coordinator holds.
	check := func(when string) {
		t.Helper()
		if err := a.Err(); err != nil {
			t.Fatalf("%s: A's leadership ended: %v", when, err)
		}
		if got := a.Term(); got != term {
			t.Fatalf("%s: A's term moved from %s to %s", when, term, got)
		}
	}

	// commit renews or writes, in turn; with the renewals in writes it
	// writes, and the write renews.
	commit := func(i int) error {
		if i%2 == 0 && !renewalsInWrites {
			return a.Renew(ctx)
		}
		_, err := write(a, "a")
		records++
		return err
	}

	// Commit in a tight loop until the coordinator rotates the producer id.
	var before, after coordination.FencingToken
	rotationStart := time.Now()
	for i := 0; ; i++ {
		if i > 2*exhaustionHeadroom {
			t.Fatalf("no rotation after %d commits from %s; A holds %s", i, acquired, a.Token())
		}
		before = a.Token()
		if err := commit(i); err != nil {
			t.Fatalf("commit %d under %s: %v", i, before, err)
		}
		check(fmt.Sprintf("after commit %d", i))
		if after = a.Token(); after.ProducerID() != before.ProducerID() {
			break
		}
	}
	t.Logf("rotation: A's token moved from %s to %s (%v after the acquisition at %s)", before, after, time.Since(rotationStart).Round(time.Millisecond), acquired)
	if after.ProducerID() >= before.ProducerID() || after.ProducerEpoch() != 0 {
		t.Fatalf("the rotation from %s went to %s; want a lower producer id at epoch 0, which broker %d's older block gives", before, after, moved)
	}
	assertAuthoritative(ctx, t, transport(), a)
	if err := device.Admit(valve, a.Authority()); err != nil {
		t.Fatalf("the fence refuses A's authority %s after the rotation to a lower producer id: %v", a.Authority(), err)
	}

	if renewalsInWrites {
		assertRotationCarriedRenewal(ctx, t, brokers, transport(), a, before)
	}

	// Past the rotation A keeps renewing and writing under the new
	// producer id, in the same term.
	for i := range 6 {
		if err := commit(i); err != nil {
			t.Fatalf("commit %d after the rotation to %s: %v", i, after, err)
		}
		check(fmt.Sprintf("commit %d after the rotation", i))
		if a.Token().ProducerID() != after.ProducerID() {
			t.Fatalf("A's token moved from %s to %s after the rotation", after, a.Token())
		}
	}
	assertAuthoritative(ctx, t, transport(), a)
	deposedAuthority := a.Authority()

	// The records A wrote on both sides of the rotation committed under their
	// batch's token and carry A's term.
	var rotatedRecords int
	for _, r := range readCommitted(t, kafkaEnv{brokers: brokers}, topic, 0) {
		name, token := valueToken(t, r.Value)
		batch, err := coordination.NewFencingToken(r.ProducerID, r.ProducerEpoch)
		if err != nil {
			t.Fatal(err)
		}
		if name != "a" || token != batch {
			t.Fatalf("offset %d: %s wrote under %s in a batch of %s", r.Offset, name, token, batch)
		}
		if got := recordTerm(t, r); got != term {
			t.Fatalf("offset %d carries term %s, A holds %s", r.Offset, got, term)
		}
		if batch.ProducerID() == after.ProducerID() {
			rotatedRecords++
		}
	}
	if rotatedRecords == 0 {
		t.Fatalf("none of A's %d records committed under the rotated producer id %d", records, after.ProducerID())
	}

	// Bring the stopped broker back before the successor, so the cluster
	// is whole again; the role's coordinator stays where it moved.
	restart()

	// B takes the role while A still renews: on a clock an hour ahead, A's
	// lease looks expired, so B challenges at once.
	b, err := coordination.AcquireLeadership(ctx, transport(), role, member(t, "b"), options(coordination.WithClock(aheadClock{}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Resign(context.Background()) })
	t.Logf("B holds term %s with token %s; A started at %s in term %s", b.Term(), b.Token(), acquired, term)
	if b.Term().Compare(term) <= 0 {
		t.Fatalf("B's term %s does not follow A's %s", b.Term(), term)
	}
	if b.Token().Compare(acquired) >= 0 {
		t.Fatalf("B's token %s is not below A's first token %s; the test wants a successor whose producer id is lower", b.Token(), acquired)
	}

	// A's next write fails at the broker.
	if _, err := write(a, "a"); !errors.Is(err, coordination.ErrFenced) {
		// The renewal loop may have met the fence first; then the
		// leadership already ended with it.
		if !errors.Is(err, coordination.ErrNotHeld) || !errors.Is(a.Err(), coordination.ErrFenced) {
			t.Fatalf("A's write after B's acquisition = %v (A's end: %v), want ErrFenced", err, a.Err())
		}
	}
	if _, err := write(b, "b"); err != nil {
		t.Fatalf("B's write: %v", err)
	}
	assertAuthoritative(ctx, t, transport(), b)

	// The authority of the successor outranks the deposed leader's, although
	// the deposed leader's token has the higher producer id.
	successor := b.Authority()
	if successor.Compare(deposedAuthority) <= 0 || deposedAuthority.Compare(successor) >= 0 {
		t.Fatalf("authority %s does not outrank %s", successor, deposedAuthority)
	}
	if err := device.Admit(valve, successor); err != nil {
		t.Fatalf("the fence refuses the successor's authority %s: %v", successor, err)
	}
	// The deposed leader is refused by its term, with its last token and
	// with its first, whose producer id is above the successor's.
	for _, old := range []coordination.Authority{deposedAuthority, firstAuthority} {
		err = device.Admit(valve, old)
		var stale *fence.StaleTermError
		if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStaleTerm) {
			t.Fatalf("the fence answers the deposed authority %s with %v, want a StaleTermError", old, err)
		}
		t.Logf("after the successor's %s the fence refuses %s: %v", successor, old, err)
	}
}

// assertRotationCarriedRenewal asserts that the write under exhausted, the
// token whose epoch ran out, carried a's renewal: the lease that a holds is
// the one that write committed, as the role's state partition shows in a
// batch of exhausted's producer id and epoch, and a bystander reads it.
func assertRotationCarriedRenewal(ctx context.Context, t *testing.T, brokers []string, bystander *coordination.KafkaTransport, a *coordination.Leadership, exhausted coordination.FencingToken) {
	t.Helper()
	held := a.Lease()
	if held.Token != exhausted {
		t.Fatalf("A holds a lease under %s after the rotating write under %s; want the renewal that write carried", held.Token, exhausted)
	}
	carried := committedLeases(t, kafkaEnv{brokers: brokers}, a.Role(), held)
	for _, r := range carried {
		if r.ProducerID != exhausted.ProducerID() || r.ProducerEpoch != exhausted.ProducerEpoch() {
			t.Fatalf("A's lease %+v committed in a batch of %d:%d, not of the rotating write's %s", held, r.ProducerID, r.ProducerEpoch, exhausted)
		}
	}
	if len(carried) != 1 {
		t.Fatalf("%d lease records of the role equal A's lease %+v, want 1", len(carried), held)
	}
	awaitBystanderLease(ctx, t, bystander, a.Role(), held)
	t.Logf("the rotating write under %s carried the renewal granted at %d", exhausted, held.GrantedAt)
}

// recordTerm returns the term that a committed record's headers carry.
func recordTerm(t *testing.T, r *kgo.Record) coordination.Term {
	t.Helper()
	headers := make([]coordination.Header, len(r.Headers))
	for i, h := range r.Headers {
		headers[i] = coordination.Header{Key: h.Key, Value: h.Value}
	}
	term, ok, err := coordination.TermFromHeaders(headers)
	if err != nil || !ok {
		t.Fatalf("offset %d: term header: %v (present %v)", r.Offset, err, ok)
	}
	return term
}
