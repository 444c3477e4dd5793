package mqtt

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: every
// Device's connection goroutine must end at Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
