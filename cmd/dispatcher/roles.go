package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/internal/config"
)

// UnknownRoleError reports a role of which the coordination topic holds no
// record: no member has ever registered for it. It is almost always a typo
// in --role or the configuration's role; roles are case-sensitive.
type UnknownRoleError struct {
	Role string
	// Topic and Partition are where the role's records would be.
	Topic     string
	Partition int
	// Suggestions are roles that the topic does hold and that look like
	// Role, nearest first.
	Suggestions []string
}

func (e *UnknownRoleError) Error() string {
	msg := fmt.Sprintf("role %q has never been registered: %s-%d holds no record of it (check --role or the config's role; roles are case-sensitive)",
		e.Role, e.Topic, e.Partition)
	if len(e.Suggestions) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", e.Suggestions[0])
	}
	return msg
}

// rolePartition is the role's partition of the coordination topic.
func rolePartition(c *config.Config, role coordination.Role) (coordination.TopicPartition, error) {
	p, err := coordination.RolePartition(role, c.Topics.CoordinationPartitions)
	if err != nil {
		return coordination.TopicPartition{}, withCode(ExitUsage, err)
	}
	return coordination.TopicPartition{Topic: c.Topics.Coordination, Partition: p}, nil
}

// readRoleState reads the role's partition of the coordination topic and
// folds it, failing with the unknown-role error when the partition holds no
// record of the role.
func readRoleState(ctx context.Context, cl coordination.StateReader, c *config.Config, role coordination.Role) (coordination.RoleState, error) {
	tp, err := rolePartition(c, role)
	if err != nil {
		return coordination.RoleState{}, err
	}
	records, err := cl.ReadPartition(ctx, tp)
	if err != nil {
		return coordination.RoleState{}, unavailable(ctx, fmt.Errorf("read %s-%d: %w", tp.Topic, tp.Partition, err))
	}
	if !holdsRole(records, role) {
		return coordination.RoleState{}, unknownRole(ctx, cl, c, role, tp, records)
	}
	return coordination.BuildRoleState(role, records)
}

// holdsRole reports whether any of records, read from a partition of the
// coordination topic, belongs to role.
func holdsRole(records []coordination.StateRecord, role coordination.Role) bool {
	for _, r := range records {
		if k, err := coordination.DecodeKey(r.Key); err == nil && k.Role == role {
			return true
		}
	}
	return false
}

// unknownRole builds the error for a role that its partition, already read
// as records, holds nothing of. It reads the topic's other partitions for
// roles that look like it; a read that fails or runs out of ctx leaves the
// suggestion out, not the error.
func unknownRole(ctx context.Context, r coordination.StateReader, c *config.Config, role coordination.Role, tp coordination.TopicPartition, records []coordination.StateRecord) error {
	seen := map[string]bool{}
	collect := func(records []coordination.StateRecord) {
		for _, rec := range records {
			if k, err := coordination.DecodeKey(rec.Key); err == nil {
				seen[k.Role.String()] = true
			}
		}
	}
	collect(records)
	for p := range c.Topics.CoordinationPartitions {
		if p == tp.Partition || ctx.Err() != nil {
			continue
		}
		if recs, err := r.ReadPartition(ctx, coordination.TopicPartition{Topic: tp.Topic, Partition: p}); err == nil {
			collect(recs)
		}
	}
	delete(seen, role.String())
	return withCode(ExitUnknownRole, &UnknownRoleError{Role: role.String(), Topic: tp.Topic, Partition: tp.Partition,
		Suggestions: nearRoles(role.String(), seen)})
}

// nearRoles returns the roles of seen that differ from role in case alone
// or by at most two edits, nearest first.
func nearRoles(role string, seen map[string]bool) []string {
	type near struct {
		role string
		dist int
	}
	var out []near
	for s := range seen {
		d := editDistance(strings.ToLower(role), strings.ToLower(s))
		if d <= 2 {
			out = append(out, near{s, d})
		}
	}
	slices.SortFunc(out, func(a, b near) int {
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.role, b.role)
	})
	roles := make([]string, len(out))
	for i, n := range out {
		roles[i] = n.role
	}
	return roles
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
