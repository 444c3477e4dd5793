package ceiling

import (
	"context"
	"testing"
)

// TestProbeRefusesBadInput: a probe with no partition, no transaction, or
// that waits for a reader it does not have fails before it connects.
func TestProbeRefusesBadInput(t *testing.T) {
	for name, p := range map[string]StepsProbe{
		"no partition":       {Transactions: 1},
		"no transaction":     {Partitions: []int32{0}},
		"after read, unread": {Partitions: []int32{0}, Transactions: 1, AfterRead: true},
	} {
		if _, err := ProbeCommitSteps(context.Background(), p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
