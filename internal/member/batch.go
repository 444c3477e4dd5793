package member

import (
	"context"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
)

// SubmitBatch hands cmds to the dispatcher as one batch
// ([dispatch.Dispatcher.SubmitBatch]) and waits up to wait for their
// outcomes. Each command is checked and refused as [Member.Submit] checks
// one, before anything is written: its refusal is its result's Err, and the
// other commands go on. A command this member already took is answered with
// its state and not submitted again.
func (m *Member) SubmitBatch(ctx context.Context, cmds []dispatch.Command, wait time.Duration) ([]httpapi.BatchResult, error) {
	results := make([]httpapi.BatchResult, len(cmds))
	now := time.Now()
	// The devices' availability is asked once per device, before the lock,
	// since asking may reach the device.
	unavailable := map[string]error{}
	for i := range cmds {
		if cmds[i].SubmittedAt.IsZero() {
			cmds[i].SubmittedAt = now
		}
		if err := m.validate(cmds[i]); err != nil {
			results[i].Err = err
			continue
		}
		if _, asked := unavailable[cmds[i].Device]; !asked {
			unavailable[cmds[i].Device] = m.cfg.Registry.Unavailable(ctx, cmds[i].Device)
		}
	}

	m.mu.Lock()
	d := m.leader()
	if d == nil {
		err := m.notLeaderLocked()
		m.mu.Unlock()
		return nil, err
	}
	m.mu.Unlock()
	for i, cmd := range cmds {
		if results[i].Err == nil {
			results[i].Err = d.Check(cmd)
		}
	}

	m.mu.Lock()
	if m.leader() != d {
		err := m.notLeaderLocked()
		m.mu.Unlock()
		return nil, err
	}
	var batch []dispatch.Command
	taken := map[string]dispatch.Command{} // the commands of batch, by ID
	for i, cmd := range cmds {
		if results[i].Err != nil {
			continue
		}
		if prev, ok := taken[cmd.ID]; ok {
			// The same command twice in one batch is taken once; another
			// command under a taken ID is refused as a later submission
			// of it would be.
			if diff := cmd.Differences(prev); len(diff) > 0 {
				results[i].Err = &dispatch.IDConflictError{ID: cmd.ID, Differs: diff}
			}
			continue
		}
		if st, ok := m.recent.get(cmd.ID); ok {
			results[i].State = st
			continue
		}
		if err := unavailable[cmd.Device]; err != nil {
			results[i].Err = err
			continue
		}
		m.recent.put(httpapi.CommandState{
			ID: cmd.ID, Device: cmd.Device, Action: cmd.Action, State: httpapi.StatePending,
			Member: m.cfg.Member.String(), SubmittedAt: cmd.SubmittedAt, UpdatedAt: time.Now(),
		})
		taken[cmd.ID] = cmd
		batch = append(batch, cmd)
	}
	if len(batch) == 0 {
		m.mu.Unlock()
		return results, nil
	}
	m.submits.Add(1)
	m.mu.Unlock()

	settled := make(chan struct{})
	go func() {
		defer m.submits.Done()
		defer close(settled)
		// The dispatcher returns at the latest when it halts.
		for j, r := range d.SubmitBatch(context.Background(), batch) {
			m.settle(batch[j].ID, r.Outcome, r.Err)
		}
	}()
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-settled:
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	for i, cmd := range cmds {
		if results[i].Err == nil && results[i].State.ID == "" {
			results[i].State, _ = m.Command(cmd.ID)
		}
	}
	return results, nil
}

// validate refuses a malformed command, as the dispatcher would, before a
// submission is answered.
func (m *Member) validate(cmd dispatch.Command) error {
	probe := cmd
	probe.Role = m.cfg.Role.String()
	if probe.Deadline.IsZero() {
		probe.Deadline = probe.SubmittedAt.Add(dispatch.DefaultCommandTimeout)
	}
	return probe.Validate()
}
