package coordination

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// RosterEntry is one member of the roster of a role.
type RosterEntry struct {
	// Member is the member that registered.
	Member MemberID

	// Offset is the offset of the registration record of the member in the
	// partition of the role. The offset is the join sequence of the member,
	// because log compaction keeps the offset of every record it retains.
	Offset int64

	// RegisteredAt is the time the member registered, in milliseconds since
	// the Unix epoch.
	RegisteredAt int64
}

// RoleState is the state that a reader folds out of the records of one role.
type RoleState struct {
	// Roster holds the candidates of the role in registration order, which is
	// offset order.
	Roster []RosterEntry

	// Lease is the lease of the role, and nil when no member holds it.
	Lease *Lease

	// Term is the term of the leadership that wrote the lease, and [NoTerm]
	// when the role has no lease. A lease record that carries no
	// [TermHeader] is the first of its leadership, and its offset is the
	// term.
	Term Term
}

// Entry returns the roster entry of a member, and it reports whether the
// member registered.
func (s RoleState) Entry(member MemberID) (RosterEntry, bool) {
	for _, entry := range s.Roster {
		if entry.Member == member {
			return entry, true
		}
	}
	return RosterEntry{}, false
}

// Holder returns the member that the lease names, and it reports whether the
// role has a lease.
//
// The holder of an expired lease is still the holder. Ask
// [LeaseTiming.LiveAt] whether the lease is live.
func (s RoleState) Holder() (MemberID, bool) {
	if s.Lease == nil {
		return MemberID{}, false
	}
	return s.Lease.Member, true
}

// RankOf returns the challenge rank of a member, and it reports whether the
// member registered.
//
// The rank is the index of the member in the roster after the removal of the
// current holder, so the first standby takes rank 0. The holder itself keeps
// rank 0. A holder reaches the rank test only after its own lease expired, and
// it still owns the newest epoch at that point, so it reclaims the role for
// less churn than a failover costs.
func (s RoleState) RankOf(member MemberID) (int, bool) {
	holder, held := s.Holder()
	rank := 0
	for _, entry := range s.Roster {
		if entry.Member == member {
			if held && member == holder {
				return 0, true
			}
			return rank, true
		}
		if held && entry.Member == holder {
			continue
		}
		rank++
	}
	return 0, false
}

// RoleStateBuilder folds the records of one role into a [RoleState].
//
// The builder keeps the record of the highest offset for every key, which is
// what log compaction keeps. A later registration for a member replaces the
// earlier one and moves the member to the tail of the roster. A registration
// tombstone removes the member. A lease tombstone clears the lease.
//
// The builder drops a record of another role, so a caller folds a partition
// that holds several roles and needs no filter of its own.
type RoleStateBuilder struct {
	role          Role
	registrations map[MemberID]foldedRegistration
	lease         *Lease
	leaseTerm     Term
	leaseOffset   int64
	leaseSeen     bool
}

// foldedRegistration is the newest record of one registration key: an entry,
// or a tombstone at that offset.
type foldedRegistration struct {
	entry     RosterEntry
	tombstone bool
}

// NewRoleStateBuilder builds an empty fold for one role.
func NewRoleStateBuilder(role Role) *RoleStateBuilder {
	return &RoleStateBuilder{role: role, registrations: make(map[MemberID]foldedRegistration)}
}

// Role returns the role that this fold collects.
func (b *RoleStateBuilder) Role() Role {
	if b == nil {
		return Role{}
	}
	return b.role
}

// Apply applies one record of the coordination partition. It drops a record
// of another role, and it reports a record that does not decode.
//
// The key carries the identity, because the key is the compaction key. The
// builder takes the member and the record kind from the key, and it takes
// neither from the value.
func (b *RoleStateBuilder) Apply(record StateRecord) error {
	if b == nil {
		return errors.New("coordination: apply to a nil RoleStateBuilder")
	}
	key, err := DecodeKey(record.Key)
	if err != nil {
		return fmt.Errorf("coordination: record at offset %d: %w", record.Offset, err)
	}
	if key.Role != b.role {
		return nil
	}
	switch key.Kind {
	case KindRegistration:
		if b.registrations == nil {
			b.registrations = make(map[MemberID]foldedRegistration)
		}
		if old, ok := b.registrations[key.Member]; ok && old.entry.Offset > record.Offset {
			return nil
		}
		if IsTombstone(record.Value) {
			b.registrations[key.Member] = foldedRegistration{entry: RosterEntry{Member: key.Member, Offset: record.Offset}, tombstone: true}
			return nil
		}
		registration, err := DecodeRegistration(record.Value)
		if err != nil {
			return fmt.Errorf("coordination: record at offset %d: %w", record.Offset, err)
		}
		b.registrations[key.Member] = foldedRegistration{entry: RosterEntry{
			Member:       key.Member,
			Offset:       record.Offset,
			RegisteredAt: registration.RegisteredAt,
		}}
	case KindLease:
		if b.leaseSeen && b.leaseOffset > record.Offset {
			return nil
		}
		var lease *Lease
		term := NoTerm
		if !IsTombstone(record.Value) {
			decoded, err := DecodeLease(record.Value)
			if err != nil {
				return fmt.Errorf("coordination: record at offset %d: %w", record.Offset, err)
			}
			carried, ok, err := TermFromHeaders(record.Headers)
			if err != nil {
				return fmt.Errorf("coordination: record at offset %d: %w", record.Offset, err)
			}
			term = Term(record.Offset)
			if ok {
				term = carried
			}
			lease = &decoded
		}
		b.lease, b.leaseTerm, b.leaseOffset, b.leaseSeen = lease, term, record.Offset, true
	}
	return nil
}

// Build returns the role state, with the roster in offset order.
func (b *RoleStateBuilder) Build() RoleState {
	if b == nil {
		return RoleState{}
	}
	state := RoleState{Term: NoTerm}
	for _, folded := range b.registrations {
		if !folded.tombstone {
			state.Roster = append(state.Roster, folded.entry)
		}
	}
	slices.SortFunc(state.Roster, func(x, y RosterEntry) int {
		switch {
		case x.Offset < y.Offset:
			return -1
		case x.Offset > y.Offset:
			return 1
		}
		return 0
	})
	if b.lease != nil {
		lease := *b.lease
		state.Lease = &lease
		state.Term = b.leaseTerm
	}
	return state
}

// BuildRoleState folds the records of one partition into the state of one
// role. It reports the first record that does not decode.
//
// The caller reads the partition of the role in offset order. The fold gives
// the same answer for another order, because it keeps the record of the
// highest offset for every key.
func BuildRoleState(role Role, records []StateRecord) (RoleState, error) {
	b := NewRoleStateBuilder(role)
	for _, record := range records {
		if err := b.Apply(record); err != nil {
			return RoleState{}, err
		}
	}
	return b.Build(), nil
}

// DescribeRoleState reads the partition of one role and folds it into the
// roster and the lease of that role. A tool that reports the state of a
// cluster calls it, and it takes no epoch.
func DescribeRoleState(ctx context.Context, reader StateReader, role Role, options ...Option) (RoleState, error) {
	if ctx == nil {
		return RoleState{}, errNilContext
	}
	if reader == nil {
		return RoleState{}, errors.New("coordination: state reader is nil")
	}
	s, err := newSettings(options)
	if err != nil {
		return RoleState{}, err
	}
	partition, err := s.topicPartition(role)
	if err != nil {
		return RoleState{}, err
	}
	records, err := reader.ReadPartition(ctx, partition)
	if err != nil {
		return RoleState{}, fmt.Errorf("coordination: read %s-%d: %w", partition.Topic, partition.Partition, err)
	}
	return BuildRoleState(role, records)
}
