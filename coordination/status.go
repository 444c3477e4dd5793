package coordination

import (
	"context"
	"errors"
	"fmt"
)

// LeadershipStatus reports the token that the transaction coordinator holds
// for one role. [DescribeLeadership] builds it.
type LeadershipStatus struct {
	// Role is the role that the status describes.
	Role Role

	// Token is the token that the transaction coordinator holds now. It is
	// [NoEpoch] when no member has ever taken the role.
	Token FencingToken

	// Held reports whether a member has taken the role.
	Held bool
}

// Authoritative reports whether the token is the token that the coordinator
// holds now. A third party checks the authority of a writer with this one
// question, and it joins no group.
func (s LeadershipStatus) Authoritative(token FencingToken) bool {
	return s.Held && token != NoEpoch && token == s.Token
}

// String describes the status.
func (s LeadershipStatus) String() string {
	if !s.Held {
		return "role " + s.Role.String() + ": no epoch"
	}
	return "role " + s.Role.String() + ": epoch " + s.Token.String()
}

// DescribeLeadership reports which token holds a role now.
//
// The call reaches the transaction coordinator only. It reads no topic, it
// joins no group, and it takes no epoch, so any process makes it. This is the
// third-party check of the authority of a writer.
func DescribeLeadership(ctx context.Context, coordinator Coordinator, role Role) (LeadershipStatus, error) {
	if ctx == nil {
		return LeadershipStatus{}, errNilContext
	}
	if coordinator == nil {
		return LeadershipStatus{}, errors.New("coordination: coordinator is nil")
	}
	if role.name == "" {
		return LeadershipStatus{}, errors.New("coordination: role is empty")
	}
	token, held, err := coordinator.DescribeEpoch(ctx, role)
	if err != nil {
		return LeadershipStatus{}, fmt.Errorf("coordination: describe epoch of role %s: %w", role, err)
	}
	if !held {
		token = NoEpoch
	}
	return LeadershipStatus{Role: role, Token: token, Held: held}, nil
}
