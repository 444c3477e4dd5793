package coordination

import "fmt"

const (
	// MaxRoleLen is the maximum length of a [Role], in bytes.
	MaxRoleLen = 249

	// MaxMemberIDLen is the maximum length of a [MemberID], in bytes.
	MaxMemberIDLen = 249
)

// Role is the validated name of one coordination role, such as the name of
// an active controller.
//
// A role becomes a Kafka transactional.id. The transaction coordinator mints
// one producer epoch for that id, so the role names the fenced group of
// members that compete for the same leadership.
//
// [NewRole] is the only way to build a role with a name, so a non-zero Role
// value is proof that the name is well formed.
type Role struct {
	name string
}

// NewRole parses a role name. It rejects an empty name and a name longer than
// [MaxRoleLen] bytes.
func NewRole(name string) (Role, error) {
	if err := checkName("role", name, MaxRoleLen); err != nil {
		return Role{}, err
	}
	return Role{name: name}, nil
}

// String returns the role name.
func (r Role) String() string { return r.name }

// MemberID is the validated identity of one member that competes for a role.
//
// A member picks its own id and keeps that id across a reconnect, so the
// succession order survives a short network failure.
//
// [NewMemberID] is the only way to build a member id with a name, so a
// non-zero MemberID value is proof that the id is well formed. The zero value
// names no member, and a lease key carries it.
type MemberID struct {
	name string
}

// NewMemberID parses a member id. It rejects an empty id and an id longer
// than [MaxMemberIDLen] bytes.
func NewMemberID(name string) (MemberID, error) {
	if err := checkName("member id", name, MaxMemberIDLen); err != nil {
		return MemberID{}, err
	}
	return MemberID{name: name}, nil
}

// String returns the member id.
func (m MemberID) String() string { return m.name }

// checkName applies the length bounds that both names share.
func checkName(what, name string, limit int) error {
	if name == "" {
		return fmt.Errorf("coordination: %s is empty", what)
	}
	if len(name) > limit {
		return fmt.Errorf("coordination: %s %.32q... is %d bytes, above the limit of %d", what, name, len(name), limit)
	}
	return nil
}
