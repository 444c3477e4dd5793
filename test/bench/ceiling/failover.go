package ceiling

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// Failover describes a series of leadership changes between cmd/holder
// processes that compete for one role.
type Failover struct {
	// HolderBin is the path of the cmd/holder binary.
	HolderBin string

	// Brokers are the bootstrap addresses.
	Brokers []string

	// Role is the role the processes compete for; use a fresh one per run.
	Role string

	// Members is the number of processes; at least 2.
	Members int

	// Trials is the number of leadership changes to measure.
	Trials int

	// Graceful selects SIGTERM (the leader resigns) over SIGKILL (a crash).
	Graceful bool

	// Lease, Renew, Stagger and Poll are the timings every process uses.
	Lease, Renew, Stagger, Poll time.Duration

	// Reader reads the coordination topic, to know when every process has
	// registered. The deadline of the killed leader's last lease and the
	// successor's rank come from the partition's history, read from Brokers.
	Reader coordination.StateReader

	// Seed seeds the random delay before each signal, so that the signal
	// lands at a random phase of the renewal cycle.
	Seed uint64

	// Stderr receives the standard error of the processes; nil discards it.
	Stderr io.Writer
}

// FailoverTrial is one measured leadership change.
type FailoverTrial struct {
	// From and To are the member that was signalled and its successor.
	From, To string

	// Measured is the time from the signal to the successor's return from
	// AcquireLeadership, read on the host clock that both share.
	Measured time.Duration

	// Bound is the time the design allows a crash failover: from the
	// signal to the deadline of the last lease the dead leader wrote, plus
	// the successor's rank times the stagger, plus one poll interval. It is
	// zero for a graceful handover.
	Bound time.Duration

	// Rank is the successor's rank when the leader stopped.
	Rank int

	// Resigned is, for a graceful handover, the time from the signal to the
	// old leader's return from Resign.
	Resigned time.Duration

	// Extra counts the other standbys that also acquired the role after
	// the signal, within one stagger and one poll interval of the first:
	// each took the role from the one before with a newer epoch. The
	// stagger exists to make this rare.
	Extra int
}

// Excess returns how far a crash failover ran past its bound; negative when
// it finished inside it.
func (t FailoverTrial) Excess() time.Duration { return t.Measured - t.Bound }

// RunFailover starts the processes, lets them settle, and then, Trials
// times, signals the leader, times the successor, and restarts the signalled
// member (which registers again and so queues at the tail of the roster). It
// stops every process before it returns.
func RunFailover(ctx context.Context, cfg Failover) ([]FailoverTrial, error) {
	if cfg.Members < 2 || cfg.Trials < 1 || cfg.HolderBin == "" || cfg.Reader == nil {
		return nil, errors.New("ceiling: Failover needs Members >= 2, Trials >= 1, HolderBin and Reader")
	}
	role, err := coordination.NewRole(cfg.Role)
	if err != nil {
		return nil, err
	}
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		return nil, err
	}
	args := []string{
		"-brokers", strings.Join(cfg.Brokers, ","), "-role", cfg.Role,
		"-lease", cfg.Lease.String(), "-renew", cfg.Renew.String(),
		"-stagger", cfg.Stagger.String(), "-poll", cfg.Poll.String(),
	}
	r := &failoverRun{cfg: cfg, role: role, partition: partition, args: args, holders: map[string]*Holder{}}
	defer r.stopAll()

	// The first member takes the role alone, so the roster order is known.
	first := "m1"
	if err := r.start(first); err != nil {
		return nil, err
	}
	fctx, fcancel := context.WithTimeout(ctx, 2*time.Minute)
	_, err = r.holders[first].Next(fctx, isAcquired)
	fcancel()
	if err != nil {
		return nil, fmt.Errorf("first leader: %w", err)
	}
	leader := first
	for i := 2; i <= cfg.Members; i++ {
		if err := r.start(fmt.Sprintf("m%d", i)); err != nil {
			return nil, err
		}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6b72616b))
	var trials []FailoverTrial
	skipped := 0
	for len(trials) < cfg.Trials {
		if err := r.waitRoster(ctx); err != nil {
			return trials, err
		}
		// Land the signal at a random phase of the renewal cycle.
		select {
		case <-time.After(time.Duration(rng.Int64N(int64(cfg.Renew)))):
		case <-ctx.Done():
			return trials, ctx.Err()
		}
		// The leader is whoever the lease names now: a standby that
		// challenged at the same time as the successor of the last trial
		// may have taken the role since.
		current, err := r.holder(ctx)
		if err != nil {
			return trials, err
		}
		if current != "" {
			leader = current
		}
		trial, _, err := r.trial(ctx, leader)
		if errors.Is(err, errNoBound) && skipped < cfg.Trials {
			skipped++ // the member was restarted; run another trial instead
			continue
		}
		if err != nil {
			return trials, fmt.Errorf("trial %d: %w", len(trials)+1, err)
		}
		trials = append(trials, trial)
	}
	return trials, nil
}

// failoverRun is the state of one RunFailover.
type failoverRun struct {
	cfg       Failover
	role      coordination.Role
	partition coordination.TopicPartition
	args      []string
	holders   map[string]*Holder
	regOffset map[string]int64 // the registration offset each live process must pass
}

func isAcquired(ev HolderEvent) bool { return ev.Ev == EventAcquired }

func (r *failoverRun) start(member string) error {
	h, err := StartHolder(r.cfg.HolderBin, member, r.cfg.Stderr, r.args...)
	if err != nil {
		return err
	}
	r.holders[member] = h
	return nil
}

func (r *failoverRun) stopAll() {
	for _, h := range r.holders {
		_, _ = h.Kill()
		_ = h.Wait(context.Background())
	}
}

// waitRoster waits until every process has a registration in the log newer
// than its last restart, so that each trial starts with a full roster.
func (r *failoverRun) waitRoster(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		state, err := r.read(ctx)
		if err == nil {
			full := true
			for member := range r.holders {
				id, _ := coordination.NewMemberID(member)
				entry, ok := state.Entry(id)
				// A process not restarted yet must merely be registered:
				// its first registration may sit at offset 0.
				after, restarted := r.regOffset[member]
				if !restarted {
					after = -1
				}
				full = full && ok && entry.Offset > after
			}
			if full {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the roster of %s did not fill in a minute (last error %v)", r.role, err)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// holder returns the member the role's lease names, if it is live and one
// of the running processes, waiting up to a minute for one.
func (r *failoverRun) holder(ctx context.Context) (string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		state, err := r.read(ctx)
		if err == nil && state.Lease != nil && state.Lease.Deadline > time.Now().UnixMilli() {
			if _, ok := r.holders[state.Lease.Member.String()]; ok {
				return state.Lease.Member.String(), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no live lease on %s for a minute (last error %v)", r.role, err)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// read folds the role's records.
func (r *failoverRun) read(ctx context.Context) (coordination.RoleState, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	records, err := r.cfg.Reader.ReadPartition(rctx, r.partition)
	if err != nil {
		return coordination.RoleState{}, err
	}
	return coordination.BuildRoleState(r.role, records)
}

// trial signals the leader and times its successor.
func (r *failoverRun) trial(ctx context.Context, leader string) (FailoverTrial, string, error) {
	old := r.holders[leader]
	type won struct {
		member string
		ev     HolderEvent
	}
	wins := make(chan won, len(r.holders))
	tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var signalled time.Time
	var err error
	if r.cfg.Graceful {
		signalled, err = old.Terminate()
	} else {
		signalled, err = old.Kill()
	}
	if err != nil {
		return FailoverTrial{}, "", err
	}
	// Only an acquisition after the signal counts; an earlier one (a
	// standby that took the role in the churn of the last trial) is stale.
	after := func(ev HolderEvent) bool { return ev.Ev == EventAcquired && ev.At >= signalled.UnixNano() }
	for member, h := range r.holders {
		if member == leader {
			continue
		}
		go func() {
			if ev, err := h.Next(tctx, after); err == nil {
				wins <- won{member, ev}
			}
		}()
	}
	var w won
	select {
	case w = <-wins:
	case <-tctx.Done():
		return FailoverTrial{}, "", fmt.Errorf("no successor took %s after %s left: %w", r.role, leader, tctx.Err())
	}
	// A second standby that challenged at the same time takes the role
	// from the first (a new epoch fences the first); count such extra
	// acquisitions for one stagger and one poll interval more.
	extra := 0
	churn := time.After(r.cfg.Stagger + r.cfg.Poll)
counting:
	for {
		select {
		case <-wins:
			extra++
		case <-churn:
			break counting
		}
	}
	cancel() // release the other watchers
	trial := FailoverTrial{From: leader, To: w.member, Measured: w.ev.Time().Sub(signalled), Extra: extra}
	if r.cfg.Graceful {
		if ev, ok := old.Last(EventResigned); ok {
			trial.Resigned = ev.Time().Sub(signalled)
		}
	}
	// Reap the old process; a resigning one exits by itself.
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	_ = old.Wait(wctx)
	wcancel()

	// Restart the member; it must register again before the next trial.
	state, err := r.read(ctx)
	if err != nil {
		return FailoverTrial{}, "", err
	}
	if r.regOffset == nil {
		r.regOffset = map[string]int64{}
	}
	id, _ := coordination.NewMemberID(leader)
	if entry, ok := state.Entry(id); ok {
		r.regOffset[leader] = entry.Offset
	}
	if err := r.start(leader); err != nil {
		return FailoverTrial{}, "", err
	}
	if !r.cfg.Graceful {
		deadline, rank, err := r.lastLease(ctx, leader, w.member)
		if err != nil {
			return FailoverTrial{}, "", fmt.Errorf("%w: %w", errNoBound, err)
		}
		trial.Rank = rank
		trial.Bound = time.UnixMilli(deadline).Sub(signalled) +
			time.Duration(rank)*r.cfg.Stagger + r.cfg.Poll
	}
	return trial, w.member, nil
}

// errNoBound reports a crash trial whose bound the log cannot give: the
// successor's first lease is not after the dead leader's last one, because
// the successor began its challenge before the kill, in the churn of the
// trial before. Such a trial is dropped and another one runs.
var errNoBound = errors.New("ceiling: no bound for this trial")

// lastLease finds, in the log, the deadline of the last lease that the dead
// leader committed and the successor's rank in the roster as it stood when
// the successor's next lease after it was written.
func (r *failoverRun) lastLease(ctx context.Context, dead, successor string) (int64, int, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	records, err := readHistory(rctx, r.cfg.Brokers, r.partition)
	cancel()
	if err != nil {
		return 0, 0, err
	}
	deadID, _ := coordination.NewMemberID(dead)
	succID, _ := coordination.NewMemberID(successor)
	// The offset of the dead leader's last lease.
	lastDead := int64(-1)
	var deadline int64
	for _, rec := range records {
		if lease, ok := r.leaseOf(rec); ok && lease.Member == deadID {
			lastDead, deadline = rec.Offset, lease.Deadline
		}
	}
	if lastDead < 0 {
		return 0, 0, fmt.Errorf("no lease of %s in the log", dead)
	}
	b := coordination.NewRoleStateBuilder(r.role)
	for _, rec := range records {
		if lease, ok := r.leaseOf(rec); ok && lease.Member == succID && rec.Offset > lastDead {
			rank, _ := b.Build().RankOf(succID)
			return deadline, rank, nil
		}
		if err := b.Apply(rec); err != nil {
			return 0, 0, err
		}
	}
	return 0, 0, fmt.Errorf("no lease of %s after the last one of %s", successor, dead)
}

// leaseOf decodes a lease record of the run's role.
func (r *failoverRun) leaseOf(rec coordination.StateRecord) (coordination.Lease, bool) {
	key, err := coordination.DecodeKey(rec.Key)
	if err != nil || key.Role != r.role || key.Kind != coordination.KindLease || coordination.IsTombstone(rec.Value) {
		return coordination.Lease{}, false
	}
	lease, err := coordination.DecodeLease(rec.Value)
	return lease, err == nil
}
