package member

import (
	"context"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
)

// logFollower is the optional ability of a log reader to stream the log.
type logFollower interface {
	FollowLog(ctx context.Context, partition coordination.TopicPartition, from int64) (*dispatch.LogStream, error)
}

// logBounds is the optional ability of a log reader to tell where the
// partition starts and ends.
type logBounds interface {
	Bounds(ctx context.Context, partition coordination.TopicPartition) (start, end int64, err error)
}

// recentLookback is how many records before the end of the partition the
// member starts following from: enough for DefaultRecentCommands commands
// (an Issued record, an outcome and a share of an intake record each) of
// the role and of the roles that share its partition, and few enough that
// the start does not grow with the log's history.
const recentLookback = 16 * DefaultRecentCommands

// followLog streams the role's partition of the command log into the
// member's recent commands until ctx ends, resuming after a lost stream.
// It starts recentLookback records before the end of the partition when
// the reader tells where that is, and at the partition's start otherwise.
func (m *Member) followLog(ctx context.Context, f logFollower) {
	p, err := coordination.RolePartition(m.cfg.Role, m.cfg.LogPartitions)
	if err != nil {
		m.log.Warn("cannot follow the command log", "err", err)
		return
	}
	tp := coordination.TopicPartition{Topic: m.cfg.LogTopic, Partition: p}
	next := int64(0)
	if b, ok := f.(logBounds); ok {
		if start, end, err := b.Bounds(ctx, tp); err == nil {
			next = max(end-recentLookback, start)
		}
	}
	for ctx.Err() == nil {
		stream, err := f.FollowLog(ctx, tp, next)
		if err == nil {
			for e := range stream.Entries() {
				m.applyEntry(e)
				next = e.Offset + 1
			}
			err = stream.Err()
			stream.Close()
		}
		if ctx.Err() != nil {
			return
		}
		m.log.Debug("following the command log failed; resuming", "from", next, "err", err)
		select {
		case <-time.After(m.cfg.PollInterval):
		case <-ctx.Done():
			return
		}
	}
}

// applyEntry folds one log entry of the member's role into the recent
// commands.
func (m *Member) applyEntry(e dispatch.Entry) {
	if e.Role != m.cfg.Role.String() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	id := e.CommandID()
	if id == "" {
		return
	}
	st, ok := m.recent.get(id)
	if !ok {
		st = httpapi.CommandState{ID: id, SubmittedAt: e.At}
	}
	st.Member = e.Member
	st.UpdatedAt = e.At
	switch {
	case e.Issued != nil:
		c := e.Issued.Command
		st.Device, st.Action, st.SubmittedAt = c.Device, c.Action, c.SubmittedAt
		if st.State == "" || st.State == StateUnknown {
			st.State = httpapi.StatePending
		}
	case e.Redispatched != nil:
		st.State, st.Reason, st.Detail = httpapi.StatePending, "dispatched again: "+e.Redispatched.Reason.String(), ""
	case e.Outcome != nil:
		st.State, st.Reason, st.Detail = e.Outcome.Status.String(), e.Outcome.Reason, e.Outcome.Result.Detail
	}
	m.recent.put(st)
}
