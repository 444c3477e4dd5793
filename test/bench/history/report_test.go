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
	if err := Markdown(&b, rows, Config{Samples: 3, WarmUp: 100_000}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Cost against history",
		"after a pass of 100,000 commands whose figures are dropped",
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

// TestMarkdownTargets wants the largest size judged against the targets:
// a time over 1.5x of the first size's, and a resident memory more than
// 50 MiB above it, missed and by how much, a failover judged at its worst
// size, and the dedup window's load named when it held the first command.
func TestMarkdownTargets(t *testing.T) {
	rows := []Row{
		{Size: 0, LeaderzReady: 100 * time.Millisecond, ColdStart: 200 * time.Millisecond, SubmitWait: 60 * time.Millisecond,
			StatusCLI: 20 * time.Millisecond, StatusHinted: 10 * time.Millisecond, StatusWindow: 10 * time.Millisecond,
			RSSReady: 30 << 20, RSSAfter: 100 << 20, Failover: 4 * time.Second, FailoverBound: 5 * time.Second, Further: 1000},
		{Size: 1_000_000, LeaderzReady: 150 * time.Millisecond, ColdStart: 350 * time.Millisecond, SubmitWait: 60 * time.Millisecond,
			StatusCLI: 20 * time.Millisecond, StatusHinted: 10 * time.Millisecond, StatusWindow: 16 * time.Millisecond,
			RSSReady: 82 << 20, RSSAfter: 150 << 20, Failover: 5600 * time.Millisecond, FailoverBound: 5 * time.Second, Further: 1000,
			WindowLoad: 107 * time.Millisecond, CheckpointBelow: 242712},
	}
	var b bytes.Buffer
	if err := Markdown(&b, rows, Config{Samples: 3}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| Cold start to `/leaderz` 200 | <= 1.5x | 1.50x | yes |",
		"| Cold start to the first command carried out | <= 1.5x | 1.75x | **no** |",
		"| `status` | <= 1.5x | 1.00x | yes |",
		"| Client.Status, lookup window | <= 1.5x | 1.60x | **no** |",
		"| RSS at ready | <= +50 MiB | +52.0 MiB | **no** |",
		"| RSS after the further commands | <= +50 MiB | +50.0 MiB | yes |",
		"| Failover after SIGKILL past its bound, worst size | <= +500 ms | +600 ms at 1,000,000 | **no** |",
		"**Target missed** at 1,000,000 commands: Cold start to the first command carried out (1.75x, 50 ms over 1.5x); " +
			"Client.Status, lookup window (1.60x, 1 ms over 1.5x); RSS at ready (+52.0 MiB, 2.0 MiB over); " +
			"Failover after SIGKILL past its bound, worst size (+600 ms at 1,000,000, 100 ms over).",
		"the window loaded 107 ms after the recovery",
		"242712 offsets below the end",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the section lacks %q:\n%s", want, b.String())
		}
	}
}
