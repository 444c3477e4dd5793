package member

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
	krabkamember "github.com/krabka-io/krabka-dispatch/member"
)

// StateUnknown is the state of a command whose leader halted before its
// outcome was recorded; the next leader's recovery records one.
const StateUnknown = "unknown"

var _ httpapi.Backend = (*Member)(nil)

// Leadership reports the member's view of the role.
func (m *Member) Leadership() httpapi.Leadership {
	st := m.rt.Status()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	view := httpapi.Leadership{
		Role:       m.cfg.Role.String(),
		Member:     m.cfg.Member.String(),
		ObservedAt: m.stateAt,
		Roster:     []httpapi.RosterMember{},
		Devices:    []httpapi.DeviceHealth{},
		State:      stateOf(st),
	}
	for _, h := range m.cfg.Registry.Health() {
		d := httpapi.DeviceHealth{Device: h.Device, Reachable: h.Err == nil, CheckedAt: h.CheckedAt}
		if h.Err != nil {
			d.Error = h.Err.Error()
		}
		view.Devices = append(view.Devices, d)
	}
	var lease *coordination.Lease
	if st.Leading() {
		view.Leader = true
		l := st.Lease
		lease = &l
		view.Term = st.Authority.Term
		view.Token = st.Authority.Token.String()
		view.ObservedAt = now
	} else if m.state.Lease != nil {
		lease = m.state.Lease
		view.Term = m.state.Term
		view.Token = lease.Token.String()
	}
	if lease != nil {
		view.Holder = lease.Member.String()
		view.HolderURL = m.cfg.Peers[view.Holder]
		deadline := time.UnixMilli(lease.Deadline).UTC()
		view.LeaseDeadline = &deadline
		if left := lease.Deadline - now.UnixMilli(); left > 0 {
			view.LeaseRemainingMS = left
		}
	}
	for _, e := range m.state.Roster {
		rank, _ := m.state.RankOf(e.Member)
		view.Roster = append(view.Roster, httpapi.RosterMember{
			Member: e.Member.String(),
			Rank:   rank,
			Holder: view.Holder != "" && e.Member.String() == view.Holder,
			URL:    m.cfg.Peers[e.Member.String()],
		})
	}
	return view
}

// stateOf tells what a member whose runtime reports st does for its role.
func stateOf(st krabkamember.Status) httpapi.MemberState {
	switch {
	case st.Phase == krabkamember.PhaseDraining || st.Phase == krabkamember.PhaseResigning:
		return httpapi.StateDraining
	case st.Phase == krabkamember.PhaseLeading && st.Recovered():
		return httpapi.StateLeading
	case st.Leading():
		return httpapi.StateRecovering
	}
	return httpapi.StateStandby
}

// notLeader builds the error of a leader-only request on this member. The
// caller holds m.mu.
func (m *Member) notLeaderLocked() error {
	e := &httpapi.NotLeaderError{Member: m.cfg.Member.String()}
	if m.state.Lease != nil && m.state.Lease.Member != m.cfg.Member && time.Now().UnixMilli() < m.state.Lease.Deadline {
		e.Leader = m.state.Lease.Member.String()
		e.LeaderURL = m.cfg.Peers[e.Leader]
	}
	return e
}

// Submit hands cmd to the dispatcher and waits up to wait for its outcome.
func (m *Member) Submit(ctx context.Context, cmd dispatch.Command, wait time.Duration) (httpapi.CommandState, error) {
	if cmd.SubmittedAt.IsZero() {
		cmd.SubmittedAt = time.Now()
	}
	// Refuse a malformed command now rather than after a 202.
	if err := m.validate(cmd); err != nil {
		return httpapi.CommandState{}, err
	}

	// A device known down refuses the command now, as the dispatcher's
	// Submit would, rather than after a 202. The check may ask the device
	// again, so it runs before the lock.
	unavailable := m.cfg.Registry.Unavailable(ctx, cmd.Device)

	m.mu.Lock()
	d := m.leader()
	if d == nil {
		err := m.notLeaderLocked()
		m.mu.Unlock()
		return httpapi.CommandState{}, err
	}
	m.mu.Unlock()
	// Refuse, before anything is written, a reused ID for another command,
	// an unknown device, and a command the device cannot carry out.
	if err := d.Check(cmd); err != nil {
		return httpapi.CommandState{}, err
	}
	m.mu.Lock()
	if m.leader() != d {
		err := m.notLeaderLocked()
		m.mu.Unlock()
		return httpapi.CommandState{}, err
	}
	if st, ok := m.recent.get(cmd.ID); ok {
		m.mu.Unlock()
		return st, nil
	}
	if unavailable != nil {
		m.mu.Unlock()
		return httpapi.CommandState{}, unavailable
	}
	m.recent.put(httpapi.CommandState{
		ID: cmd.ID, Device: cmd.Device, Action: cmd.Action, State: httpapi.StatePending,
		Member: m.cfg.Member.String(), SubmittedAt: cmd.SubmittedAt, UpdatedAt: time.Now(),
	})
	m.submits.Add(1)
	m.mu.Unlock()

	settled := make(chan httpapi.CommandState, 1)
	go func() {
		defer m.submits.Done()
		// The dispatcher returns at the latest when it halts.
		out, err := d.Submit(context.Background(), cmd)
		settled <- m.settle(cmd.ID, out, err)
	}()
	if wait <= 0 {
		st, _ := m.Command(cmd.ID)
		return st, nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case st := <-settled:
		return st, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	st, _ := m.Command(cmd.ID)
	return st, nil
}

// settle records what became of a command.
func (m *Member) settle(id string, out dispatch.Outcome, err error) httpapi.CommandState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, _ := m.recent.get(id)
	st.UpdatedAt = time.Now()
	switch {
	case err == nil:
		st.State = out.Status.String()
		st.Reason = out.Reason
		st.Detail = out.Result.Detail
	case errors.As(err, new(*dispatch.IDConflictError)):
		// A submission that raced another under the same ID: the entry
		// is the other's.
		return st
	case errors.Is(err, dispatch.ErrIntakeStopped):
		// The leader began to drain between the check above and the
		// dispatcher's Submit: nothing was recorded.
		st.State = StateUnknown
		st.Reason = "the leader stopped taking commands before this one was recorded; submit it again to the next leader"
	case errors.Is(err, dispatch.ErrHalted):
		st.State = StateUnknown
		st.Reason = "the leadership ended before the outcome was recorded; the next leader records it"
	default:
		st.State = StateUnknown
		st.Reason = err.Error()
	}
	m.recent.put(st)
	return st
}

// Command returns what the member knows of one command: its own record of
// a submission, or the dispatcher's outcome while it leads.
func (m *Member) Command(id string) (httpapi.CommandState, bool) {
	d := m.rt.Dispatcher()
	m.mu.Lock()
	st, ok := m.recent.get(id)
	m.mu.Unlock()
	if d != nil {
		if out, found := d.Lookup(id); found {
			if !ok {
				st = httpapi.CommandState{ID: id, Member: m.cfg.Member.String()}
			}
			st.State = out.Status.String()
			if out.Reason != "" {
				st.Reason = out.Reason
			}
			if out.Result.Detail != "" {
				st.Detail = out.Result.Detail
			}
			return st, true
		}
	}
	return st, ok
}

// Recent returns up to limit commands submitted through this member, newest
// first.
func (m *Member) Recent(limit int) []httpapi.CommandState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recent.list(limit)
}

// Resolve settles a command in doubt.
func (m *Member) Resolve(ctx context.Context, id string, action dispatch.ResolveAction) (httpapi.CommandState, error) {
	m.mu.Lock()
	d := m.leader()
	if d == nil {
		err := m.notLeaderLocked()
		m.mu.Unlock()
		return httpapi.CommandState{}, err
	}
	m.mu.Unlock()
	out, err := d.Resolve(ctx, id, action)
	if err != nil {
		return httpapi.CommandState{}, err
	}
	m.mu.Lock()
	st, ok := m.recent.get(id)
	if !ok {
		st = httpapi.CommandState{ID: id, Member: m.cfg.Member.String()}
	}
	st.State, st.Reason, st.Detail, st.UpdatedAt = out.Status.String(), out.Reason, out.Result.Detail, time.Now()
	m.recent.put(st)
	m.mu.Unlock()
	return st, nil
}

// Ready reports whether the member takes part in the role: it leads and its
// dispatcher finished reading the role's log, or it stands by and its last
// read of the role's state succeeded. With ReadyRequiresDevices, it also
// demands a finished round of health checks in which every device passed.
func (m *Member) Ready() error {
	st := m.rt.Status()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case st.Leading() && !st.Recovered():
		return errors.New("leading, and still reading the role's log")
	case st.Leading():
	case m.stateErr != nil:
		return fmt.Errorf("reading the role's state: %w", m.stateErr)
	case m.stateAt.IsZero():
		return errors.New("the role's state was not read yet")
	}
	if !m.cfg.ReadyRequiresDevices {
		return nil
	}
	if !m.healthChecked {
		return errors.New("the devices' health was not checked yet")
	}
	var down []error
	for _, h := range m.cfg.Registry.Health() {
		if h.Err != nil {
			down = append(down, fmt.Errorf("device %s is unreachable: %w", h.Device, h.Err))
		}
	}
	return errors.Join(down...)
}

// recent remembers the last commands, by ID, in submission order.
type recent struct {
	limit int
	order []string
	byID  map[string]httpapi.CommandState
}

func newRecent(limit int) *recent {
	return &recent{limit: limit, byID: make(map[string]httpapi.CommandState)}
}

func (r *recent) get(id string) (httpapi.CommandState, bool) {
	st, ok := r.byID[id]
	return st, ok
}

func (r *recent) put(st httpapi.CommandState) {
	if _, ok := r.byID[st.ID]; !ok {
		r.order = append(r.order, st.ID)
		if len(r.order) > r.limit {
			delete(r.byID, r.order[0])
			r.order = r.order[1:]
		}
	}
	r.byID[st.ID] = st
}

func (r *recent) list(limit int) []httpapi.CommandState {
	out := make([]httpapi.CommandState, 0, min(limit, len(r.order)))
	for i := len(r.order) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, r.byID[r.order[i]])
	}
	return out
}
