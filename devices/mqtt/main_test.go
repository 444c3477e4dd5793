package mqtt

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/krabka-io/krabka-dispatch/devices/fence"
)

// TestMain fails the package when a test leaves a goroutine running: every
// Device's connection goroutine must end at Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testKeys is the device key of the tests that do not test keys.
// The key is valid, so NewVerifier cannot fail.
var testKeys, _ = fence.NewVerifier(fence.Key{ID: "test", Secret: []byte("0123456789abcdef0123456789abcdef")})
