package coordination

import (
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	if role, err := NewRole("controller"); err != nil || role.String() != "controller" {
		t.Fatalf("NewRole: %v, %v", role, err)
	}
	if member, err := NewMemberID("node-1"); err != nil || member.String() != "node-1" {
		t.Fatalf("NewMemberID: %v, %v", member, err)
	}
	for _, name := range []string{strings.Repeat("x", MaxRoleLen), "é"} {
		if _, err := NewRole(name); err != nil {
			t.Errorf("NewRole(%.10q): %v", name, err)
		}
		if _, err := NewMemberID(name); err != nil {
			t.Errorf("NewMemberID(%.10q): %v", name, err)
		}
	}
	long := strings.Repeat("x", MaxRoleLen+1)
	for _, bad := range []string{"", long} {
		if _, err := NewRole(bad); err == nil {
			t.Errorf("NewRole(%.10q) accepted", bad)
		}
		if _, err := NewMemberID(bad); err == nil {
			t.Errorf("NewMemberID(%.10q) accepted", bad)
		}
	}
	if _, err := NewRole(long); err == nil || !strings.Contains(err.Error(), "250 bytes") {
		t.Errorf("the error does not name the length: %v", err)
	}
}
