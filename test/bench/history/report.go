package history

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Markdown writes the section "Cost against history": a table with a
// column per size and a row per figure, each figure beside its ratio to
// the first column (the empty log, when the sizes start at 0).
func Markdown(w io.Writer, rows []Row, c Config, took time.Duration) error {
	var b strings.Builder
	b.WriteString("## Cost against history\n\n")
	fmt.Fprintf(&b, "Measured on %s in %s. For each column the role's partition of the command log held that many settled\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second))
	b.WriteString("commands of the role, and as many of another role sharing the partition, written by real dispatchers fed\n")
	b.WriteString("through the requests topic (a device that does nothing), which lead side by side until both are filled and\n")
	b.WriteString("then drain, as members stopped one after the other do. A minute later (the brokers are done with the fill,\n")
	b.WriteString("and the history is older than a lookup's skew margin) a `dispatcher run` process, configured by YAML, starts as\n")
	b.WriteString("the role's first member, a second one stands by, and the figures are taken on the real cluster.\n")
	b.WriteString("*Cold start* runs from the process's start (each after the last one stopped gracefully, as in a rolling\n")
	b.WriteString("restart) until `/leaderz` answers 200 (the leader recovered and takes\n")
	b.WriteString("commands), and until a command posted to its HTTP API with `?wait` comes back succeeded (published to the\n")
	b.WriteString("MQTT device, QoS 1); *failover* the same from SIGKILL of the leader to the standby, against the bound of\n")
	b.WriteString("taking the lease (lease + rank x stagger + one poll), which the log's reading comes on top of.\n")
	b.WriteString("The recovery's own time, the records it read that the member's read-ahead as a standby had not, and where\n")
	b.WriteString("its checkpoint began (the base of a delta) come from\n")
	b.WriteString("the member's log line \"recovered the role's log\": the fill and the restarts leave the role's last full\n")
	b.WriteString("checkpoint where they happen to, and the bench does not choose it. A recovery that ends while the standby\n")
	b.WriteString("still reads the checkpoint's IDs opens intake without them, and a new command waits for them; the line\n")
	b.WriteString("\"loaded the role's dedup window\" says how long after the recovery that took.\n")
	b.WriteString("`submit --wait` and `status` are whole processes, as an operator runs them; *Client.Status* is the library\n")
	b.WriteString("lookup of a fresh command, with the hint of its submission time and with none (the lookup window, 7 days).\n")
	if c.WarmUp > 0 {
		fmt.Fprintf(&b, "The sizes are measured in turn, after a pass of %s commands whose figures are dropped: brokers that just\n", count(c.WarmUp))
		b.WriteString("started answer the first size slower than the later ones, and every ratio against it would flatter them.\n")
	}
	fmt.Fprintf(&b, "Medians of %d samples. Each cell is the figure and, in brackets, its ratio to the first column.\n\n", c.Samples)

	b.WriteString("| Figure |")
	for _, r := range rows {
		fmt.Fprintf(&b, " %s commands |", count(r.Size))
	}
	b.WriteString("\n|---|")
	for range rows {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	withRatio := func(withRatio bool) func(string, func(Row) float64, func(float64) string) {
		return func(name string, value func(Row) float64, format func(float64) string) {
			fmt.Fprintf(&b, "| %s |", name)
			base := 0.0
			if len(rows) > 0 {
				base = value(rows[0])
			}
			for _, r := range rows {
				v := value(r)
				if withRatio {
					fmt.Fprintf(&b, " %s (%s) |", format(v), ratio(v, base))
				} else {
					fmt.Fprintf(&b, " %s |", format(v))
				}
			}
			b.WriteString("\n")
		}
	}
	line, bare := withRatio(true), withRatio(false)
	ms := func(d func(Row) time.Duration) func(Row) float64 {
		return func(r Row) float64 { return float64(d(r)) / float64(time.Millisecond) }
	}
	msText := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " ms" }
	mib := func(v float64) string { return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + " MiB" }
	plain := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	line("Records in the partition", func(r Row) float64 { return float64(r.LogRecords) }, plain)
	timed := func(f judgedTime) { line(f.name, ms(f.value), msText) }
	timed(leaderzTime)
	timed(coldStartTime)
	line("Recovery inside the cold start (the member's log)", ms(func(r Row) time.Duration { return r.Recovery }), msText)
	bare("Dedup window loaded behind intake, after the recovery (the member's log)", ms(func(r Row) time.Duration { return r.WindowLoad }), msText)
	line("Records the recovery read beyond the standby's read-ahead", func(r Row) float64 { return float64(r.RecoveryRecords) }, plain)
	bare("Offsets from the end back to the checkpoint it started from", func(r Row) float64 { return float64(r.CheckpointBelow) }, plain)
	line("RSS at ready", func(r Row) float64 { return float64(r.RSSReady) }, mib)
	line("Failover after SIGKILL, to `/leaderz` 200", ms(func(r Row) time.Duration { return r.FailoverLeaderz }), msText)
	line("Failover after SIGKILL, to a command carried out", ms(func(r Row) time.Duration { return r.Failover }), msText)
	line("Failover bound", ms(func(r Row) time.Duration { return r.FailoverBound }), msText)
	bare("Failover past its bound (a difference: no ratio)", ms(func(r Row) time.Duration { return r.Failover - r.FailoverBound }), msText)
	timed(submitWaitTime)
	timed(statusTime)
	timed(hintedTime)
	line("Records it read", func(r Row) float64 { return float64(r.StatusHintedRecords) }, plain)
	timed(windowTime)
	line("Records it read", func(r Row) float64 { return float64(r.StatusWindowRecords) }, plain)
	if len(rows) > 0 && rows[0].Further > 0 {
		line(fmt.Sprintf("RSS of the new leader after %s further commands", count(rows[0].Further)), func(r Row) float64 { return float64(r.RSSAfter) }, mib)
	}
	line("Time to fill", ms(func(r Row) time.Duration { return r.Fill }), msText)
	b.WriteString("\n")
	writeTargets(&b, rows)
	_, err := io.WriteString(w, b.String())
	return err
}

// judgedTime is a time of the section's table that the targets judge: one
// name and accessor serve both tables, so that they cannot drift apart.
type judgedTime struct {
	name  string
	value func(Row) time.Duration
}

// The times that the targets judge, in the order of the section's table.
var (
	leaderzTime    = judgedTime{"Cold start to `/leaderz` 200", func(r Row) time.Duration { return r.LeaderzReady }}
	coldStartTime  = judgedTime{"Cold start to the first command carried out", func(r Row) time.Duration { return r.ColdStart }}
	submitWaitTime = judgedTime{"`submit --wait`", func(r Row) time.Duration { return r.SubmitWait }}
	statusTime     = judgedTime{"`status`", func(r Row) time.Duration { return r.StatusCLI }}
	hintedTime     = judgedTime{"Client.Status, hinted", func(r Row) time.Duration { return r.StatusHinted }}
	windowTime     = judgedTime{"Client.Status, lookup window", func(r Row) time.Duration { return r.StatusWindow }}
)

// The targets of the section: at the largest size, each time within
// TimeRatioTarget of its value at the first size, each resident memory
// within RSSGrowthTarget of it, and a failover within FailoverPastTarget
// of its bound at every size.
const (
	TimeRatioTarget    = 1.5
	RSSGrowthTarget    = 50 << 20
	FailoverPastTarget = 500 * time.Millisecond
)

// writeTargets writes the figures of the largest size against the targets,
// and says by how much each missed one missed.
func writeTargets(b *strings.Builder, rows []Row) {
	if len(rows) < 2 {
		return
	}
	first, last := rows[0], rows[len(rows)-1]
	fmt.Fprintf(b, "Targets: at %s commands each time within %.1fx of its value at %s, each resident memory within +%d MiB of it,\n",
		count(last.Size), TimeRatioTarget, count(first.Size), RSSGrowthTarget>>20)
	fmt.Fprintf(b, "and a failover within its bound + %d ms at every size.\n\n", FailoverPastTarget.Milliseconds())
	b.WriteString("| Figure | Target | Measured | Met |\n|---|---|---|---|\n")
	var missed []string
	judge := func(name, target, measured string, met bool, by string) {
		yes := "yes"
		if !met {
			yes = "**no**"
			missed = append(missed, fmt.Sprintf("%s (%s, %s)", name, measured, by))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", name, target, measured, yes)
	}
	for _, f := range []judgedTime{leaderzTime, coldStartTime, submitWaitTime, statusTime, hintedTime, windowTime} {
		base, v := f.value(first), f.value(last)
		if base <= 0 {
			continue
		}
		q := float64(v) / float64(base)
		limit := time.Duration(TimeRatioTarget * float64(base))
		judge(f.name, fmt.Sprintf("<= %.1fx", TimeRatioTarget), fmt.Sprintf("%.2fx", q), q <= TimeRatioTarget,
			fmt.Sprintf("%d ms over %.1fx", (v-limit).Milliseconds(), TimeRatioTarget))
	}
	mib := func(v int64) string { return strconv.FormatFloat(float64(v)/(1<<20), 'f', 1, 64) }
	rss := []struct {
		name  string
		value func(Row) int64
	}{
		{"RSS at ready", func(r Row) int64 { return r.RSSReady }},
		{"RSS after the further commands", func(r Row) int64 { return r.RSSAfter }},
	}
	for _, f := range rss {
		base, v := f.value(first), f.value(last)
		if base <= 0 || v <= 0 {
			continue
		}
		judge(f.name, fmt.Sprintf("<= +%d MiB", RSSGrowthTarget>>20), "+"+mib(v-base)+" MiB", v-base <= RSSGrowthTarget,
			mib(v-base-RSSGrowthTarget)+" MiB over")
	}
	worst := rows[0]
	for _, r := range rows {
		if r.Failover-r.FailoverBound > worst.Failover-worst.FailoverBound {
			worst = r
		}
	}
	past := worst.Failover - worst.FailoverBound
	judge("Failover after SIGKILL past its bound, worst size", fmt.Sprintf("<= +%d ms", FailoverPastTarget.Milliseconds()),
		fmt.Sprintf("%+d ms at %s", past.Milliseconds(), count(worst.Size)), past <= FailoverPastTarget,
		fmt.Sprintf("%d ms over", (past-FailoverPastTarget).Milliseconds()))
	b.WriteString("\n")
	if len(missed) == 0 {
		return
	}
	fmt.Fprintf(b, "**Target missed** at %s commands: %s.", count(last.Size), strings.Join(missed, "; "))
	if last.WindowLoad > 0 {
		fmt.Fprintf(b, " A cold start there ends its recovery before the dedup window is in: the window loaded %d ms after the recovery (from a\n"+
			"checkpoint whose base lay %d offsets below the end), and the first command, whose ID the leader does not hold whole, waited for it.",
			last.WindowLoad.Milliseconds(), last.CheckpointBelow)
	}
	b.WriteString("\n\n")
}

// ratio writes v/base, or "-" when base is zero.
func ratio(v, base float64) string {
	if base == 0 {
		if v == 0 {
			return "1.00"
		}
		return "-"
	}
	return strconv.FormatFloat(v/base, 'f', 2, 64)
}

// count writes n with thousands separators.
func count(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
