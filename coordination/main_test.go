package coordination

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: no
// goroutine of this package may outlive its leadership or a failed campaign.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
