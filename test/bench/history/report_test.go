package history

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestMarkdownRatios wants every figure beside its ratio to the first
// column, and sizes written as a person reads them.
func TestMarkdownRatios(t *testing.T) {
	rows := []Row{
		{Size: 0, ColdStart: 100 * time.Millisecond, RSSReady: 20 << 20, Failover: 4 * time.Second, FailoverBound: 5 * time.Second, Further: 1000, RSSAfter: 30 << 20},
		{Size: 100_000, LogRecords: 400_000, ColdStart: 2500 * time.Millisecond, Recovery: 60 * time.Millisecond, CheckpointBelow: 16000, RSSReady: 80 << 20, Failover: 6 * time.Second, FailoverBound: 5 * time.Second, Further: 1000, RSSAfter: 90 << 20},
	}
	var b bytes.Buffer
	if err := Markdown(&b, rows, Config{Samples: 3}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Cost against history",
		"| Figure | 0 commands | 100,000 commands |",
		"| Cold start to the first command carried out | 100 ms (1.00) | 2500 ms (25.00) |",
		"| RSS at ready | 20.0 MiB (1.00) | 80.0 MiB (4.00) |",
		"| Recovery inside the cold start (the member's log) | 0 ms (1.00) | 60 ms (-) |",
		"| Offsets from the end back to the checkpoint it started from | 0 | 16000 |",
		"| Failover past its bound (a difference: no ratio) | -1000 ms | 1000 ms |",
		"| Records in the partition | 0 (1.00) | 400000 (-) |",
		"| RSS of the new leader after 1,000 further commands | 30.0 MiB (1.00) | 90.0 MiB (3.00) |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the section lacks %q:\n%s", want, b.String())
		}
	}
}
