package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runCLI runs the command line against buffers and returns the exit code and
// both streams.
func runCLI(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(ctx, args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

// newFakeCluster starts an in-process three-broker kfake cluster, closed at
// cleanup, and returns its addresses joined by commas.
func newFakeCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, strings.Join(c.ListenAddrs(), ",")
}

func TestHelpListsExitCodes(t *testing.T) {
	code, out, _ := runCLI(t, context.Background(), "--help")
	if code != int(ExitOK) {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Exit codes:", "4  audit failed", "8  unknown role", "run", "demo", "status", "log", "submit", "resolve", "topics"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"no-such-command"},
		{"status", "-o", "xml", "--brokers", "127.0.0.1:1"},
		{"status", "--no-such-flag"},
		{"status"}, // no brokers, no role
		{"topics", "--brokers", "127.0.0.1:1", "--min-insync-replicas", "4"},
		{"status", "-c", "testdata/does-not-exist.yaml"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Setenv(EnvBrokers, "")
			code, _, errOut := runCLI(t, context.Background(), args...)
			if code != int(ExitUsage) {
				t.Fatalf("exit %d, want %d (usage); stderr:\n%s", code, ExitUsage, errOut)
			}
			if !strings.HasPrefix(errOut, "dispatcher: ") {
				t.Errorf("stderr = %q", errOut)
			}
		})
	}
}

// TestDemoCommand runs `dispatcher demo` as a user does and wants exit 0 and
// the closing line.
func TestDemoCommand(t *testing.T) {
	code, out, errOut := runCLI(t, context.Background(), "demo", "--commands", "4")
	if code != int(ExitOK) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// The four, and the one the leader sends after the forged command.
	if !strings.Contains(out, "demo complete: 5 commands succeeded") {
		t.Fatalf("no closing line:\n%s", out)
	}
}
