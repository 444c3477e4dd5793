package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
)

// Targets of issue "Measured": the figures the report judges.
const (
	targetE2ERatio      = 0.9 // end-to-end at least this share of the fair ceiling at a batch of 100
	targetE2ERatioOther = 0.8 // and this share at the other batch sizes
	targetE2EBatch      = 100
	targetHandoverP99   = 150 * time.Millisecond
	targetOutcomeP99    = 2.0                    // submit-to-outcome-committed p99 at most this times the raw commit p99
	targetBacklogRate   = 20000                  // commands/s one role drains with a no-op device
	targetFailoverSlack = 500 * time.Millisecond // crash failover never past its bound plus this
)

// report collects the results of one run and writes them.
type report struct {
	machine ceiling.Machine
	opts    options
	started time.Time
	failed  []string
	// extraTopics are topics a section created beside newTopic's, deleted
	// at the end too.
	extraTopics []string

	crash    []ceiling.FailoverTrial
	handover []ceiling.FailoverTrial
	e2e      []ceiling.E2EResult
	latency  *latencyResult
	backlog  *ceiling.BacklogResult
	mqtt     *deviceResult
	modbus   *deviceResult
	mem      *memResult
	roles    []ceiling.RolesResult
}

func (r *report) write() error {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.machine
	w("# Performance\n\n")
	w("Measured by `make bench` (`scripts/bench.sh`, the tool in `test/bench/ceiling/cmd/benchreport`) on %s UTC, in %s.\n",
		m.Date.Format("2006-01-02 15:04"), time.Since(r.started).Round(time.Second))
	w("Every figure is judged against a ceiling or a bound measured in the same run on the same machine, so the ratios\n")
	w("travel better than the absolute numbers.\n\n")
	w("**Machine.** %d CPUs (nproc) %s, %.1f GiB memory, Linux %s, %s. The three Kafka 4.1.1 brokers\n",
		m.CPUs, paren(m.CPUModel), float64(m.MemoryBytes)/(1<<30), m.Kernel, m.GoVersion)
	w("(`scripts/services/10-kafka.sh`, KRaft, each broker also a controller, 512 MiB heaps), Mosquitto and the\n")
	w("measured processes all share these CPUs, over loopback. A production cluster spreads the brokers over machines and\n")
	w("disks; here every transaction commit waits for three replicas on one host, so absolute latencies are those of a\n")
	w("busy laptop, not of a cluster.\n\n")
	if len(r.failed) > 0 {
		w("**Sections that failed in this run** (their figures are missing below):\n\n")
		for _, f := range r.failed {
			w("- %s\n", f)
		}
		w("\n")
	}
	r.writeSummary(w)
	// A section whose plot fails keeps its table; the failure is listed at
	// the end and fails the run.
	var plotErrs []error
	plotted := func(err error) {
		if err != nil {
			plotErrs = append(plotErrs, err)
		}
	}
	plotted(r.writeE2E(w))
	r.writeLatency(w)
	r.writeBacklog(w)
	plotted(r.writeMQTT(w))
	plotted(r.writeModbus(w))
	plotted(r.writeFailover(w))
	plotted(r.writeHandover(w))
	r.writeMemory(w)
	plotted(r.writeRoles(w))
	if len(plotErrs) > 0 {
		w("**Plots that failed in this run:** %v\n\n", errors.Join(plotErrs...))
	}
	r.writeHistory(w)
	w("## How to reproduce\n\n")
	w("`make bench` starts the cluster and Mosquitto when they are not running, builds the tool and `cmd/holder`, and\n")
	w("rewrites this file and `docs/img/`. `scripts/bench.sh -quick` runs every section with fewer trials and shorter\n")
	w("windows; `scripts/bench.sh -only failover,handover` runs some sections. The flags of this run: point %s, warm-up %s,\n",
		r.opts.point, r.opts.warmup)
	w("%d repetitions, batches %v, %d latency clients, a backlog of %d, %d crash and %d handover trials, roles %v observed %s each,\n",
		r.opts.reps, r.opts.batches, r.opts.clients, r.opts.backlog, r.opts.failoverTrials, r.opts.handoverTrials, r.opts.roles, r.opts.rolesWindow)
	w("%d pending commands, seed %d", r.opts.pending, r.opts.seed)
	if r.opts.warmCluster {
		w(", after an unmeasured warm-up of the cluster (the end-to-end comparison with one repetition, and %d handovers)", r.opts.warmHandovers())
	}
	if r.opts.commitGap >= 0 {
		w(", end-to-end commit gap %s", r.opts.commitGap)
	}
	if r.opts.commitLinger >= 0 {
		w(", end-to-end commit linger %s", r.opts.commitLinger)
	}
	if r.opts.checkpointInterval > 0 {
		w(", end-to-end checkpoint interval %d", r.opts.checkpointInterval)
	}
	if r.opts.submit != ceiling.SubmitBatched {
		w(", end-to-end submits %s", r.opts.submit)
	}
	w(".\n")
	if err := os.WriteFile(r.opts.out, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return errors.Join(plotErrs...)
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// writeSummary states each target and whether it was met.
func (r *report) writeSummary(w func(string, ...any)) {
	w("## Summary\n\n| Figure | Target | Measured | Met |\n|---|---|---|---|\n")
	for _, p := range r.e2e {
		target := e2eTarget(p.Batch)
		w("| End-to-end commands/s at a batch of %d, share of the fair ceiling (median of %d repetitions) | >= %.1f | %.2f (%.2f-%.2f) | %s |\n",
			p.Batch, len(p.Reps), target, p.Ratio, p.RatioMin, p.RatioMax, yes(p.Ratio >= target))
	}
	if l := r.latency; l != nil {
		for _, x := range []struct {
			name string
			res  ceiling.LatencyResult
		}{{"HTTP API", l.http}, {"requests topic", l.topic}} {
			ratio := ceiling.Ratio(float64(x.res.ToOutcome.P99), float64(l.raw.P99))
			w("| Submit (%s) to outcome committed p99, against the raw commit p99 | <= %.0fx | %s ms, %.2fx of %s ms | %s |\n",
				x.name, targetOutcomeP99, ceiling.Millis(x.res.ToOutcome.P99), ratio, ceiling.Millis(l.raw.P99), yes(ratio <= targetOutcomeP99))
		}
	}
	if b := r.backlog; b != nil {
		w("| One role draining a backlog of %d with a no-op device | >= %d cmd/s | %.0f cmd/s | %s |\n", b.Commands, targetBacklogRate, b.Rate(), yes(b.Rate() >= targetBacklogRate))
	}
	if len(r.handover) > 0 {
		s := ceiling.Summarize(measured(r.handover), 0)
		w("| Graceful handover p99 (%d trials) | <= %s | %s ms | %s |\n", len(r.handover), targetHandoverP99, ceiling.Millis(s.P99), yes(s.P99 <= targetHandoverP99))
	}
	if len(r.crash) > 0 {
		worst := worstExcess(r.crash)
		w("| Crash failover, worst time past its bound (%d trials) | <= +%s | %+.0f ms | %s |\n",
			len(r.crash), targetFailoverSlack, ms(worst), yes(worst <= targetFailoverSlack))
	}
	w("\n")
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func measured(trials []ceiling.FailoverTrial) []time.Duration {
	out := make([]time.Duration, len(trials))
	for i, t := range trials {
		out[i] = t.Measured
	}
	return out
}

func worstExcess(trials []ceiling.FailoverTrial) time.Duration {
	worst := trials[0].Excess()
	for _, t := range trials {
		worst = max(worst, t.Excess())
	}
	return worst
}

// e2eTarget is the share of the ceiling the dispatcher must reach at a
// batch size.
func e2eTarget(batch int) float64 {
	if batch == targetE2EBatch {
		return targetE2ERatio
	}
	return targetE2ERatioOther
}

func (r *report) writeE2E(w func(string, ...any)) error {
	if len(r.e2e) == 0 {
		return nil
	}
	w("## End-to-end dispatch against the fair ceiling\n\n")
	if r.opts.submit == ceiling.SubmitEach {
		w("The dispatcher leads a fresh role with a no-op device. Each round submits a batch of commands at once, each\n")
		w("with a `Dispatcher.Submit` call of its own from a goroutine of its own, as independent clients do, and waits\n")
		w("until the device has been driven for every one; a latency runs from the start of\n")
	} else {
		w("The dispatcher leads a fresh role with a no-op device. Each round submits a batch of commands at once, with one\n")
		w("`Dispatcher.SubmitBatch` call, as a client that holds the batch does (`-submit each` gives every command a\n")
		w("`Submit` call of its own instead), and waits until the device has been driven for every one; a latency runs from the start of\n")
	}
	w("the round to the device's return, so it covers group commit (the Issued records committed under the token, acks=all,\n")
	w("min.insync.replicas 2) and the dispatch. The outcome records commit in the background, in the transactions of\n")
	w("later rounds. The dispatcher reads its log with `KafkaLogReader`, as the binary does, so it holds each settled command\n")
	interval := dispatch.DefaultCheckpointInterval
	if r.opts.checkpointInterval > 0 {
		interval = r.opts.checkpointInterval
	}
	w("as a compact ID and writes a checkpoint every %d records of the role, first in the transaction of the next batch.\n\n", interval)
	w("The **ceiling** is franz-go with the client options the coordination transport gives a role's producer\n")
	w("(`ceiling.ProducerOptions`: its retry backoff of 100 ms doubling to 1 s, metadata min age, acks=all, idempotence,\n")
	w("manual partitioner, the lease as transaction timeout), writing the records the dispatcher writes for a command, its\n")
	w("Issued and its Outcome record with their headers, encoded by `dispatch.EncodeEntry` before the timed loop, a batch\n")
	w("of commands per transaction, committing and reading the token after the commit as `WriteGuarded` does, and,\n")
	w("as it does, asking the coordinator after each commit until the commit is complete there before the next\n")
	w("transaction begins (a transaction begun sooner is held by its partition leader; see \"Commit latency and the\n")
	w("brokers\" in OPERATIONS.md). The ceiling sweeps a pause after each commit (%s) and takes the best.\n\n", durations(r.e2e[0].Pauses))
	w("Both sides warm up (%s each), then run %d alternating repetitions (dispatcher first, then ceiling first) of %s per\n", r.opts.warmup, r.opts.reps, r.opts.point)
	w("side and pause. Rates and ratio are medians over the repetitions, with the lowest and highest beside them; the ratio\n")
	w("of each repetition is the dispatcher's rate over that repetition's best ceiling. Latencies pool every repetition.\n")
	w("The last three columns read the dispatcher's transactions through a wrapper of `Leadership.Write`: the records\n")
	w("of one (Issued, Outcome and intake records, and the parts of a checkpoint), the mean time of one (the wait for the role's write\n")
	w("slot, produce, commit), the share of the dispatcher side's time that a transaction was in flight, and how often\n")
	w("a client saw CONCURRENT_TRANSACTIONS (counted from franz-go's debug log on both sides; each would cost a retry\n")
	w("backoff, 100 ms for a produce with the transport's options). Since Kafka 4.0 the partition leader retries a\n")
	w("produce that meets it on the server side (KAFKA-18654), so the clients rarely see one: the cost of beginning a\n")
	w("transaction before the coordinator completed the previous one shows instead as a slower commit.\n\n")
	w("| Batch | Dispatch cmd/s (min-max) | Ceiling cmd/s (min-max) | Ratio (min-max) | Target | Best pause | Dispatch p50 / p99 / p999 ms | Ceiling commit p50 / p99 / p999 ms | Samples | Dispatcher transactions per round | Records per transaction | Mean transaction ms | Share of time in transactions | CONCURRENT_TRANSACTIONS per transaction |\n|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|\n")
	var disp, raw, ratio, dp50, rp50, dp99, rp99, xs []float64
	for _, p := range r.e2e {
		w("| %d | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %.2f (%.2f-%.2f) | %.1f | %s | %s / %s / %s | %s / %s / %s | %d | %.1f | %.0f | %s | %.2f | %.2f |\n", p.Batch,
			p.DispatchRate, p.DispatchSpread[0], p.DispatchSpread[1], p.CeilingRate, p.CeilSpread[0], p.CeilSpread[1],
			p.Ratio, p.RatioMin, p.RatioMax, e2eTarget(p.Batch), p.BestPause(),
			ceiling.Millis(p.Dispatch.P50), ceiling.Millis(p.Dispatch.P99), ceiling.Millis(p.Dispatch.P999),
			ceiling.Millis(p.Ceiling.P50), ceiling.Millis(p.Ceiling.P99), ceiling.Millis(p.Ceiling.P999), p.Dispatch.Count, p.TxnsPerRound,
			ceiling.Ratio(float64(p.Writes.Records), float64(p.Writes.Writes)), ceiling.Millis(p.MeanWrite()), p.WriteShare(),
			ceiling.Ratio(float64(p.DispatchRetries), float64(p.Writes.Writes)))
		disp, raw, ratio = append(disp, p.DispatchRate), append(raw, p.CeilingRate), append(ratio, p.Ratio)
		dp50, rp50 = append(dp50, ms(p.Dispatch.P50)), append(rp50, ms(p.Ceiling.P50))
		dp99, rp99 = append(dp99, ms(p.Dispatch.P99)), append(rp99, ms(p.Ceiling.P99))
		xs = append(xs, float64(p.Batch))
	}
	w("\nA quantile finer than the sample count resolves (p999 of fewer than 1000 samples) equals the maximum.\n\n")
	w("What the dispatcher's transactions carried, per round of a batch (read through `dispatch.WithOnCommitted`): a round\n")
	w("whose Issued records took more than one transaction did not gather its burst of submits into one, and a\n")
	w("transaction of outcomes alone held back the Issued records that queued while it was in flight. Under sustained\n")
	w("load the outcomes of one round ride with the Issued records of the next: one transaction a round. The last\n")
	w("column is the median time from the first to the last device act of a round, while its outcomes queue.\n")
	w("The CPU columns are the CPU time of the bench's own process (both sides run in it, in turn; the brokers are\n")
	w("not counted) while each side ran, per command it carried: the dispatcher's submit, commit, dispatch and\n")
	w("outcome, against the ceiling's produce and commit of the same records.\n\n")
	w("| Batch | Rounds | Transactions with Issued records per round | Transactions of outcomes alone per round | First to last act of a round, ms | CPU per command, dispatcher side, µs | CPU per command, ceiling side, µs |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.e2e {
		dcpu, ccpu := p.CPUPerCommand()
		w("| %d | %d | %.2f | %.2f | %s | %.1f | %.1f |\n", p.Batch, p.Rounds,
			ceiling.Ratio(float64(p.Mix.Issuing), float64(p.Rounds)), ceiling.Ratio(float64(p.Mix.OutcomesOnly), float64(p.Rounds)), ceiling.Millis(p.Drive),
			micros(dcpu), micros(ccpu))
	}
	w("\n")
	w("Where a round's time goes, in the order it happens, as medians over the rounds (ms; the medians of the phases need not\n")
	w("add up to the median round). The client builds the round's commands; from its submit call to the start of the\n")
	w("transaction that carries their Issued records the dispatcher accepts and queues them (and encodes a checkpoint\n")
	w("when one is due); the transaction runs through `Leadership.Write`; its effects are applied (until the\n")
	w("dispatcher reports it to `dispatch.WithOnCommitted`, or the round's last act if that comes first); the device acts;\n")
	w("and the client sees the last act. Only the transaction has a counterpart in the ceiling's round.\n\n")
	w("| Batch | Client builds the commands | Submit to transaction | Transaction | Effects applied | To the last act | Back to the client | Outside the transaction |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.e2e {
		ph := p.Phases
		w("| %d | %s | %s | %s | %s | %s | %s | %s |\n", p.Batch, ceiling.Millis(ph.Prepare), ceiling.Millis(ph.ToWrite),
			ceiling.Millis(ph.Write), ceiling.Millis(ph.Effects), ceiling.Millis(ph.Acts), ceiling.Millis(ph.Back), ceiling.Millis(ph.Outside()))
	}
	w("\n")
	w("The ceiling at each pause: median rate over the repetitions (commands/s), and CONCURRENT_TRANSACTIONS answers per\n")
	w("transaction:\n\n| Batch |")
	for _, p := range r.e2e[0].Pauses {
		w(" pause %s |", p)
	}
	w("\n|---:|%s\n", strings.Repeat("---:|", len(r.e2e[0].Pauses)))
	for _, p := range r.e2e {
		w("| %d |", p.Batch)
		for i := range p.Pauses {
			var rates []float64
			for _, rep := range p.Reps {
				rates = append(rates, rep.Ceiling[i].Rate)
			}
			w(" %.0f / %.2f |", ceiling.Median(rates), ceiling.Ratio(float64(p.CeilingRetries[i]), float64(p.CeilingTxns[i])))
		}
		w("\n")
	}
	w("\n")
	for _, p := range r.e2e {
		if t := e2eTarget(p.Batch); p.Ratio < t {
			w("**Target missed** at a batch of %d: %.2f of the ceiling, %.2f short of %.1f. ", p.Batch, p.Ratio, t-p.Ratio, t)
			// Each round waits for the last, so what a round spends outside
			// the dispatcher's transactions adds to it whole.
			roundAt := func(rate float64) time.Duration { return time.Duration(float64(p.Batch) / rate * float64(time.Second)) }
			round := roundAt(p.DispatchRate)
			inTxn := time.Duration(p.WriteShare() * float64(round))
			w("A round took %s ms, %s ms of it in the dispatcher's transactions (%s ms each on average, against the ceiling's\n", ceiling.Millis(round), ceiling.Millis(inTxn), ceiling.Millis(p.MeanWrite()))
			w("round of %s ms with its pause) and %s ms outside them, none of which overlaps a transaction of its round:",
				ceiling.Millis(roundAt(p.CeilingRate)), ceiling.Millis(round-inTxn))
			ph := p.Phases
			w(" in the median round, %s ms from the submit call to the transaction, %s ms until its effects were applied,\n", ceiling.Millis(ph.ToWrite), ceiling.Millis(ph.Effects))
			w("%s ms more to the last device act (%s ms from the first to the last), %s ms back to the client and %s ms\n", ceiling.Millis(ph.Acts), ceiling.Millis(p.Drive), ceiling.Millis(ph.Back), ceiling.Millis(ph.Prepare))
			w("building the next round's commands.")
			if dcpu, ccpu := p.CPUPerCommand(); dcpu > 0 {
				// On two cores shared with three brokers, the dispatcher's
				// own CPU is the first thing a round outside its
				// transactions is made of.
				w(" The dispatcher side used %.1f µs of CPU per command, %s ms a round, against the ceiling's %.1f µs.",
					micros(dcpu), ceiling.Millis(dcpu*time.Duration(p.Batch)), micros(ccpu))
			}
			if all, cps := p.BytesPerRound(); all > 0 {
				// A transaction's time grows with its bytes: name what the
				// dispatcher's carried beyond the ceiling's records.
				w(" Its transactions carried %.0f KB a round, %.0f KB of it the parts of checkpoints, where the\n", all/1024, cps/1024)
				w("ceiling's carry %.0f KB for the same commands.", float64(p.CeilingBytesPerCommand)*float64(p.Batch)/1024)
			}
			w("\n")
		}
	}
	w("\n")
	file, link := r.opts.imgPath("e2e-throughput.png")
	if err := ceiling.LinePlot(file, "Commands per second by batch size", "batch size", "commands/s", xs,
		[]ceiling.Series{{Name: "dispatcher (no-op device)", Values: disp}, {Name: "fair ceiling", Values: raw}}, true, true); err != nil {
		return err
	}
	w("![End-to-end throughput](%s)\n\n", link)
	file, link = r.opts.imgPath("e2e-latency.png")
	if err := ceiling.LinePlot(file, "Latency by batch size", "batch size", "ms", xs,
		[]ceiling.Series{{Name: "dispatcher p50", Values: dp50}, {Name: "dispatcher p99", Values: dp99},
			{Name: "ceiling commit p50", Values: rp50}, {Name: "ceiling commit p99", Values: rp99}}, true, true); err != nil {
		return err
	}
	w("![End-to-end latency](%s)\n\n", link)
	file, link = r.opts.imgPath("e2e-ratio.png")
	targets := make([]float64, len(xs))
	for i, p := range r.e2e {
		targets[i] = e2eTarget(p.Batch)
	}
	if err := ceiling.LinePlot(file, "Dispatcher throughput as a share of the fair ceiling", "batch size", "dispatch / ceiling", xs,
		[]ceiling.Series{{Name: "ratio (median)", Values: ratio}, {Name: "target", Values: targets}}, true, false); err != nil {
		return err
	}
	w("![End-to-end ratio](%s)\n\n", link)
	return nil
}

// durations lists durations for prose.
func durations(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.String())
	}
	return strings.Join(parts, ", ")
}

func (r *report) writeMQTT(w func(string, ...any)) error {
	if r.mqtt == nil {
		return nil
	}
	w("## Dispatch through MQTT against raw publish\n\n")
	w("The same Mosquitto (`scripts/services/20-mosquitto.sh`), QoS 1, one message at a time as a device lane sends them.\n")
	w("%s `devices/mqtt` alone is `Device.Dispatch` in a loop (envelope, signature, publish, PUBACK).\n", r.mqtt.note)
	r.writeDeviceIntro(w)
	return r.writeDevice(w, r.mqtt, "mqtt.png", "MQTT dispatch against raw publish", [][2]int{{1, 0}})
}

func (r *report) writeModbus(w func(string, ...any)) error {
	if r.modbus == nil {
		return nil
	}
	w("## Dispatch through Modbus against raw register writes\n\n")
	w("A loopback Modbus TCP server (`internal/modbussim`, the tests' simulator) with three units: one unfenced, two that\n")
	w("keep the highest term written to their fence registers and refuse a lower one. %s `devices/modbus` alone is\n", r.modbus.note)
	w("`Device.Dispatch` (unfenced) or `DispatchUnder` (fenced: fence registers, then the command) in a loop.\n")
	r.writeDeviceIntro(w)
	return r.writeDevice(w, r.modbus, "modbus.png", "Modbus dispatch against raw writes", [][2]int{{1, 0}, {3, 2}})
}

// writeDeviceIntro says how the device sections run.
func (r *report) writeDeviceIntro(w func(string, ...any)) {
	w("The dispatcher row runs the whole path, batches of %d submitted at once as in the end-to-end section; its latency\n", deviceBatch)
	w("includes the commit of the batch and the wait behind the commands ahead of it in the device lane. The paths run\n")
	w("in %d interleaved repetitions of %s each, each repetition starting with the next path; rates are medians, and a\n", r.opts.reps, r.opts.point)
	w("share is the median over the repetitions of the path's rate over its ceiling's in the same repetition.\n\n")
}

// writeDevice writes the table and the plot of a device section; pairs
// name (side, its ceiling) by index.
func (r *report) writeDevice(w func(string, ...any), d *deviceResult, img, title string, pairs [][2]int) error {
	ceilingOf := map[int]int{}
	for _, p := range pairs {
		ceilingOf[p[0]] = p[1]
	}
	w("| Path | msgs/s (min-max) | Share of its ceiling | p50 ms | p99 ms | p999 ms |\n|---|---:|---:|---:|---:|---:|\n")
	var names []string
	var rates []float64
	for i, s := range d.sides {
		lo, hi := s.RateSpread()
		share := "ceiling"
		if c, ok := ceilingOf[i]; ok {
			share = fmt.Sprintf("%.2f", s.RatioTo(d.sides[c]))
		} else if i == len(d.sides)-1 {
			share = "-"
		}
		w("| %s | %.0f (%.0f-%.0f) | %s | %s | %s | %s |\n", s.Name, s.Rate, lo, hi, share,
			ceiling.Millis(s.Pooled.P50), ceiling.Millis(s.Pooled.P99), ceiling.Millis(s.Pooled.P999))
		names = append(names, fmt.Sprintf("%d", i+1))
		rates = append(rates, s.Rate)
	}
	w("\n")
	file, link := r.opts.imgPath(img)
	if err := ceiling.BarPlot(file, title+" (paths in table order)", "messages/s", names,
		[]ceiling.Series{{Name: "messages/s", Values: rates}}); err != nil {
		return err
	}
	w("![%s](%s)\n\n", title, link)
	return nil
}

func (r *report) writeFailover(w func(string, ...any)) error {
	if len(r.crash) == 0 {
		return nil
	}
	t := r.opts.failoverTimings
	w("## Crash failover\n\n")
	w("Three `cmd/holder` processes compete for one role (lease %s, renew %s, stagger %s, poll %s). Each trial waits a\n", t.lease, t.renew, t.stagger, t.poll)
	w("random part of a renew interval, sends SIGKILL to the leader process, and times the instant a successor returns\n")
	w("from `AcquireLeadership` (its first lease committed), on the host clock the processes share; the killed member\n")
	w("is then restarted and registers again at the tail of the roster. The bound of each trial is read from the log:\n")
	w("from the kill to the deadline of the last lease the dead leader committed, plus the successor's rank times the\n")
	w("stagger, plus one poll interval (one read of the coordination partition). The target is never past the bound by\n")
	w("more than %s; the slack pays for InitProducerId, the read after it, and the first lease write.\n\n", targetFailoverSlack)
	s := ceiling.Summarize(measured(r.crash), 0)
	worst := worstExcess(r.crash)
	within := 0
	for _, tr := range r.crash {
		if tr.Excess() <= targetFailoverSlack {
			within++
		}
	}
	w("%d trials: failover p50 %s ms, p99 %s ms, max %s ms; time past the bound: worst %+.0f ms; %d of %d trials within bound + %s.\n\n",
		len(r.crash), ceiling.Millis(s.P50), ceiling.Millis(s.P99), ceiling.Millis(s.Max), ms(worst), within, len(r.crash), targetFailoverSlack)
	if worst > targetFailoverSlack {
		w("**Target missed** by %.0f ms in the worst trial; the trial table shows which trials ran over.\n\n", ms(worst-targetFailoverSlack))
	}
	if n := churned(r.crash); n > 0 {
		w("In %d of %d trials a second standby also acquired the role within a stagger of the first.\n\n", n, len(r.crash))
	}
	w("| Trial | Killed | Successor | Rank | Measured ms | Bound ms | Measured / bound | Past bound ms |\n|---:|---|---|---:|---:|---:|---:|---:|\n")
	var xs, meas, bound []float64
	for i, tr := range r.crash {
		w("| %d | %s | %s | %d | %.0f | %.0f | %.2f | %+.0f |\n", i+1, tr.From, tr.To, tr.Rank, ms(tr.Measured), ms(tr.Bound),
			ceiling.Ratio(float64(tr.Measured), float64(tr.Bound)), ms(tr.Excess()))
		xs = append(xs, float64(i+1))
		meas, bound = append(meas, ms(tr.Measured)), append(bound, ms(tr.Bound))
	}
	w("\n")
	file, link := r.opts.imgPath("failover.png")
	if err := ceiling.LinePlot(file, "Crash failover: measured against bound", "trial", "ms", xs,
		[]ceiling.Series{{Name: "measured", Values: meas}, {Name: "bound", Values: bound}}, false, false); err != nil {
		return err
	}
	w("![Crash failover](%s)\n\n", link)
	return nil
}

func (r *report) writeHandover(w func(string, ...any)) error {
	if len(r.handover) == 0 {
		return nil
	}
	w("## Graceful handover\n\n")
	w("The same three processes and timings; each trial sends SIGTERM to the leader, which calls `Resign` (the lease\n")
	w("tombstone) and exits, and times the instant a successor returns from `AcquireLeadership`. The standbys long-poll the\n")
	w("coordination partition (`KafkaTransport.WaitPartition`), so they see the tombstone without waiting out a poll\n")
	w("interval, and the first in line keeps the role's transactional client connected (`KafkaTransport.PrepareEpoch`), so\n")
	w("its challenge opens no connection. Target: p99 at most %s.\n\n", targetHandoverP99)
	s := ceiling.Summarize(measured(r.handover), 0)
	var resigned []time.Duration
	for _, t := range r.handover {
		if t.Resigned > 0 {
			resigned = append(resigned, t.Resigned)
		}
	}
	rs := ceiling.Summarize(resigned, 0)
	w("| Trials | p50 ms | p99 ms | max ms | p99 / target | Resign returned, p50 ms | Trials where a second standby also took the role |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	w("| %d | %s | %s | %s | %.2f | %s | %d |\n\n", len(r.handover), ceiling.Millis(s.P50), ceiling.Millis(s.P99), ceiling.Millis(s.Max),
		ceiling.Ratio(float64(s.P99), float64(targetHandoverP99)), ceiling.Millis(rs.P50), churned(r.handover))
	if n := churned(r.handover); n > 0 {
		w("In %d of %d handovers a second standby also acquired the role right after the first (a newer epoch, which\n", n, len(r.handover))
		w("fences the first). After a resignation the lease is a tombstone, so the succession rules anchor each standby's\n")
		w("challenge on its own registration instant, and a rank-n standby that registered more than n staggers ago\n")
		w("challenges at once: the stagger does not separate the standbys after a graceful handover. This costs an epoch and\n")
		w("a short second handover, not safety (the newer epoch fences the older at the broker).\n\n")
	}
	if s.P99 > targetHandoverP99 {
		w("**Target missed** by %.0f ms at p99. The handover is the tombstone commit, the standby's next fetch, its\n", ms(s.P99-targetHandoverP99))
		w("InitProducerId and its first lease commit: two replicated transaction commits, and between them the wait for the\n")
		w("coordinator to complete the first (its InitProducerId meets CONCURRENT_TRANSACTIONS until then, and retries\n")
		w("every %s), on brokers that share two cores with everything else.\n\n", coordination.DefaultKafkaConcurrentTransactionsBackoff)
	}
	sorted := slices.Clone(measured(r.handover))
	slices.Sort(sorted)
	var xs, ys []float64
	for i, d := range sorted {
		xs = append(xs, float64(i+1)/float64(len(sorted)))
		ys = append(ys, ms(d))
	}
	file, link := r.opts.imgPath("handover.png")
	if err := ceiling.LinePlot(file, "Graceful handover (sorted trials)", "fraction of trials", "ms", xs,
		[]ceiling.Series{{Name: "handover", Values: ys}, {Name: "target", Values: constant(len(xs), ms(targetHandoverP99))}}, false, false); err != nil {
		return err
	}
	w("![Graceful handover](%s)\n\n", link)
	return nil
}

// churned counts the trials in which more than one standby acquired the role.
func churned(trials []ceiling.FailoverTrial) int {
	n := 0
	for _, t := range trials {
		if t.Extra > 0 {
			n++
		}
	}
	return n
}

func constant(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func (r *report) writeMemory(w func(string, ...any)) {
	if r.mem == nil {
		return
	}
	m := r.mem
	w("## Memory per pending command\n\n")
	w("A dispatcher reads %d commands from its requests topic while its device blocks on the first, so every other one is\n", m.n)
	w("issued and waits in the device's lane. The figure is the live heap after a collection, before and after, divided by\n")
	w("the count; the floor it is compared with is the size of the command's encoded Issued record (key and value).\n\n")
	w("| Pending commands | Heap per command, bytes | Issued record, bytes | Ratio |\n|---:|---:|---:|---:|\n")
	w("| %d | %.0f | %d | %.1f |\n\n", m.n, m.perCommand, m.recordBytes, ceiling.Ratio(m.perCommand, float64(m.recordBytes)))
}

func (r *report) writeRoles(w func(string, ...any)) error {
	if len(r.roles) == 0 {
		return nil
	}
	w("## Roles held by one process, each with a dispatcher\n\n")
	w("One `cmd/holder` process takes N roles with the default timings (lease %s, renew %s) and runs, for every role it\n",
		coordination.DefaultLeaseDuration, coordination.DefaultRenewInterval)
	w("holds, a real `dispatch.Dispatcher` with a no-op device, its own request source reading the role's partition of a\n")
	w("shared requests topic, and the process's one log reader (log and requests topics of %d partitions, as a\n", rolesPartitions)
	w("deployment shares them). It is observed for %s once it holds them all. CPU, memory, threads, file descriptors and\n", r.opts.rolesWindow)
	w("sockets come from /proc of the process, goroutines from the process itself; requests are counted by a franz-go\n")
	w("broker-write hook on every client of the transport and cross-checked by the TCP data segments ss(8) counts to the\n")
	w("brokers (the hook does not see the request sources' fetches; the segments do).\n\n")
	w("| Roles | Acquired in s | CPU, cores | RSS MiB | Sockets | Sockets per role | FDs | Goroutines | Goroutines per role | Threads | Transport requests/s | TCP segments/s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var xs, cpu, rss, sockets, gor []float64
	for _, x := range r.roles {
		w("| %d | %.1f | %.3f | %.1f | %d | %.1f | %d | %d | %.1f | %d | %.1f | %.1f |\n", x.Roles, x.Acquire.Seconds(), x.CPU, float64(x.RSS)/(1<<20),
			x.Sockets, ceiling.Ratio(float64(x.Sockets), float64(x.Roles)), x.FDs, x.Goroutines, ceiling.Ratio(float64(x.Goroutines), float64(x.Roles)),
			x.Threads, x.RequestsPerSec, x.SegmentsPerSec)
		xs = append(xs, float64(x.Roles))
		cpu, rss = append(cpu, x.CPU*1000), append(rss, float64(x.RSS)/(1<<20))
		sockets, gor = append(sockets, float64(x.Sockets)), append(gor, float64(x.Goroutines))
	}
	w("\n")
	if len(r.roles) >= 2 {
		a, b := r.roles[0], r.roles[len(r.roles)-1]
		perRole := ceiling.Ratio(float64(b.Sockets-a.Sockets), float64(b.Roles-a.Roles))
		if perRole > 0 {
			w("Each further role costs %.1f sockets (from %d to %d roles): every role has a transactional producer and a request\n", perRole, a.Roles, b.Roles)
			w("source of its own, each a franz-go client with its own connections, so open files bound the roles of a process.\n")
			if b.MaxFiles > 0 {
				w("Under this process's limit of %d open files the bound is near %.0f roles; under 1024 (a usual default soft\n", b.MaxFiles,
					ceiling.Ratio(float64(b.MaxFiles)-float64(a.FDs), perRole)+float64(a.Roles))
				w("limit), near %.0f.\n\n", ceiling.Ratio(1024-float64(a.FDs), perRole)+float64(a.Roles))
			} else {
				w("The process has no limit of open files; under 1024 (a usual default soft limit) the bound would be near %.0f roles.\n\n",
					ceiling.Ratio(1024-float64(a.FDs), perRole)+float64(a.Roles))
			}
		}
	}
	file, link := r.opts.imgPath("roles.png")
	if err := ceiling.LinePlot(file, "One process holding N roles, each with a dispatcher", "roles", "value", xs,
		[]ceiling.Series{{Name: "CPU (millicores)", Values: cpu}, {Name: "RSS (MiB)", Values: rss}, {Name: "sockets", Values: sockets}, {Name: "goroutines", Values: gor}}, true, true); err != nil {
		return err
	}
	w("![Roles](%s)\n\n", link)
	return nil
}

func (r *report) writeLatency(w func(string, ...any)) {
	l := r.latency
	if l == nil {
		return
	}
	w("## Latency end to end\n\n")
	w("A real member (`internal/member`, the runtime of `dispatcher run`) leads a fresh role with a no-op device, serves\n")
	w("its HTTP API on loopback and reads its requests topic. %d clients each submit a command, wait until the device\n", l.clients)
	w("acted on it and its Outcome record arrived at a read_committed consumer of the log partition (the instant any\n")
	w("reader of the log learns the outcome committed), and submit the next: by `POST /v1/commands` (answered 202 at once),\n")
	w("or by producing the request to the requests topic (acks=all). A latency starts just before the submit; \"accepted\"\n")
	w("ends when the API answered or the broker acknowledged the request record. In alternation with\n")
	w("them, the ceiling's raw producer commits transactions of %d commands (the load of the clients) at its best pause\n", l.rawBatch)
	w("(%s), while a reader fetches its partition as the clients' watcher fetches the log's; its latency is one\n", l.rawPause)
	w("transaction, begin to commit. Submit to outcome committed takes at least two commits\n")
	w("(the Issued record, then the Outcome record), hence the target of at most %.0f times the raw commit p99.\n\n", targetOutcomeP99)
	w("| Path | Samples | Accepted p50 / p99 ms | To device p50 / p99 / p999 ms | To outcome committed p50 / p99 / p999 ms | Outcome p99 / raw commit p99 |\n|---|---:|---|---|---|---:|\n")
	for _, x := range []struct {
		name string
		res  ceiling.LatencyResult
	}{{"HTTP API", l.http}, {"requests topic", l.topic}} {
		w("| %s | %d | %s / %s | %s / %s / %s | %s / %s / %s | %.2f |\n", x.name, x.res.ToOutcome.Count,
			ceiling.Millis(x.res.ToAccepted.P50), ceiling.Millis(x.res.ToAccepted.P99),
			ceiling.Millis(x.res.ToDevice.P50), ceiling.Millis(x.res.ToDevice.P99), ceiling.Millis(x.res.ToDevice.P999),
			ceiling.Millis(x.res.ToOutcome.P50), ceiling.Millis(x.res.ToOutcome.P99), ceiling.Millis(x.res.ToOutcome.P999),
			ceiling.Ratio(float64(x.res.ToOutcome.P99), float64(l.raw.P99)))
	}
	w("| raw commit (ceiling) | %d | | | %s / %s / %s (one commit) | 1.00 |\n", l.raw.Count/max(1, l.rawBatch),
		ceiling.Millis(l.raw.P50), ceiling.Millis(l.raw.P99), ceiling.Millis(l.raw.P999))
	w("| the raw commit's produce (begin to every record acknowledged) | %d | | | %s / %s / %s | |\n", l.rawSteps.Produce.Count,
		ceiling.Millis(l.rawSteps.Produce.P50), ceiling.Millis(l.rawSteps.Produce.P99), ceiling.Millis(l.rawSteps.Produce.P999))
	w("| the raw commit's EndTxn | %d | | | %s / %s / %s | |\n", l.rawSteps.End.Count,
		ceiling.Millis(l.rawSteps.End.P50), ceiling.Millis(l.rawSteps.End.P99), ceiling.Millis(l.rawSteps.End.P999))
	w("| raw commit until a read_committed reader read it | %d | | | %s / %s / %s (one commit, read) | %.2f |\n", l.rawSeen.Count/max(1, l.rawBatch),
		ceiling.Millis(l.rawSeen.P50), ceiling.Millis(l.rawSeen.P99), ceiling.Millis(l.rawSeen.P999), ceiling.Ratio(float64(l.rawSeen.P99), float64(l.raw.P99)))
	w("| the same clients on a raw producer, greedy commits (outcome read) | %d | | | %s / %s / %s | %.2f |\n", l.rawLoop.Count,
		ceiling.Millis(l.rawLoop.P50), ceiling.Millis(l.rawLoop.P99), ceiling.Millis(l.rawLoop.P999), ceiling.Ratio(float64(l.rawLoop.P99), float64(l.raw.P99)))
	w("| requests topic read alone (produce, then `KafkaRequestSource` returns it) | %d | | %s / %s / %s | | |\n\n", l.intakeRead.Count,
		ceiling.Millis(l.intakeRead.P50), ceiling.Millis(l.intakeRead.P99), ceiling.Millis(l.intakeRead.P999))
	l.writeCommitSteps(w)
	w("A path's latency ends when a reader of the log has read the outcome, which the raw commit's does not: its end is\n")
	w("the return of the producer's commit, before the commit markers are written and a read_committed fetch returns\n")
	w("them. The raw commit until a reader read it (a producer of its own, one transaction after another, each waiting\n")
	w("for its last Outcome record at a read_committed consumer, as the clients do) ends where the paths end. Against\n")
	w("its p99 the outcome p99 is %.2fx through the HTTP API and %.2fx through the requests topic.\n\n",
		ceiling.Ratio(float64(l.http.ToOutcome.P99), float64(l.rawSeen.P99)), ceiling.Ratio(float64(l.topic.ToOutcome.P99), float64(l.rawSeen.P99)))
	w("The same clients on a raw producer that commits greedily (all that is queued, at the raw commit's pause, each\n")
	w("transaction's Outcome records in the next one, a device that acts at once) show what the dispatcher's commit\n")
	w("scheduling buys: it has no commit gap, no linger, and no outcome that waits to ride. A role has one producer, so\n")
	w("either way a command waits for the transaction in flight when it came, then its own, then its outcome's. Its p99\n")
	w("is %.2fx the raw commit p99; against it the outcome p99 is %.2fx through the HTTP API and %.2fx through the\n",
		ceiling.Ratio(float64(l.rawLoop.P99), float64(l.raw.P99)), ceiling.Ratio(float64(l.http.ToOutcome.P99), float64(l.rawLoop.P99)),
		ceiling.Ratio(float64(l.topic.ToOutcome.P99), float64(l.rawLoop.P99)))
	w("requests topic, which adds the request's produce and read.\n\n")
	for _, x := range []struct {
		name    string
		res     ceiling.LatencyResult
		produce bool // the path produces the request, acks=all, before the commits
	}{{"the HTTP API", l.http, false}, {"the requests topic", l.topic, true}} {
		ratio := ceiling.Ratio(float64(x.res.ToOutcome.P99), float64(l.raw.P99))
		if ratio <= targetOutcomeP99 {
			continue
		}
		w("**Target missed** through %s: outcome committed p99 is %.2f times the raw commit p99 (target %.0f), %.2f over; the same\n", x.name, ratio, targetOutcomeP99, ratio-targetOutcomeP99)
		w("clients on the greedy raw producer reach %.2f times.", ceiling.Ratio(float64(l.rawLoop.P99), float64(l.raw.P99)))
		if x.produce {
			// The target counts two commits; this path makes a third
			// replicated write first, which the API's answer does not.
			sum := 2*l.raw.P99 + x.res.ToAccepted.P99
			w(" The path makes a third replicated write before the two commits that the target counts: the request's\n")
			w("produce, whose p99 (its \"accepted\") is %s ms. Its outcome p99 is %s ms over the HTTP API's, and two raw commit\n",
				ceiling.Millis(x.res.ToAccepted.P99), ceiling.Millis(x.res.ToOutcome.P99-l.http.ToOutcome.P99))
			within := "within"
			if x.res.ToOutcome.P99 > sum {
				within = "over"
			}
			w("p99s and the produce's p99 add to %s ms, %.2f times the raw commit p99, which the path's p99 is %s.",
				ceiling.Millis(sum), ceiling.Ratio(float64(sum), float64(l.raw.P99)), within)
		}
		w("\n\n")
	}
}

// writeCommitSteps says what the raw commit's time is made of: its produce
// and its EndTxn, beside the brokers' retry backoff, which a produce that
// the partition leader held waits out.
func (l *latencyResult) writeCommitSteps(w func(string, ...any)) {
	if l.rawSteps.Produce.Count == 0 {
		return
	}
	produce := l.rawSteps.Produce.P50
	w("Of the raw commit's p50 of %s ms, its produce took %s ms and its EndTxn %s ms (p50s).\n", ceiling.Millis(l.raw.P50),
		ceiling.Millis(produce), ceiling.Millis(l.rawSteps.End.P50))
	backoff, err := strconv.Atoi(l.retryBackoff)
	if err != nil {
		w("The brokers did not report their `%s`.\n\n", retryBackoffSetting)
		return
	}
	held := time.Duration(backoff) * time.Millisecond
	w("The brokers' `%s` is %d ms: ", retryBackoffSetting, backoff)
	if produce >= held {
		w("a produce that takes longer met a partition leader that held\n")
		w("its transaction and checked it again after that backoff (Kafka 4, transactions version 2; see \"Commit latency and\n")
		w("the brokers\" in OPERATIONS.md), and in this run that wait is most of the raw commit.")
	} else {
		w("in this run most of the raw commit's produces took less, so most\n")
		w("of its transactions were not held by the partition leader (see \"Commit latency and the brokers\" in OPERATIONS.md).")
	}
	// The dispatcher's transactions meet the hold by the same rule, in their
	// own partition; the API's time to the device holds one Issued commit.
	dev := l.http.ToDevice.P50
	if dev >= held {
		w(" The dispatcher's\nIssued commits were mostly held too: the HTTP API's to-device p50, which holds one, is %s ms.\n\n", ceiling.Millis(dev))
		return
	}
	w(" The dispatcher's\nIssued commits were mostly not held: the HTTP API's to-device p50, which holds one, is %s ms.\n\n", ceiling.Millis(dev))
}

func (r *report) writeBacklog(w func(string, ...any)) {
	b := r.backlog
	if b == nil {
		return
	}
	w("## One role draining a backlog\n\n")
	w("%d requests wait in a fresh requests topic; then a dispatcher takes the role with a no-op device and reads them.\n", b.Commands)
	w("The time runs from the dispatcher's start (the role held) to the device's last act and to the last Outcome record\n")
	w("read by a read_committed consumer of the log. Target: at least %d commands/s to the last outcome.\n", targetBacklogRate)
	if r.opts.backlogBatch > 0 {
		w("This run set the dispatcher's maximum records per transaction to %d.\n", r.opts.backlogBatch)
	} else {
		w("The dispatcher runs with its default bounds (at most %d records per transaction).\n", dispatch.DefaultMaxBatchRecords)
	}
	w("\n")
	w("| Commands | To the last dispatch, s | To the last outcome, s | Commands/s | Log transactions | Commands per transaction | Met |\n|---:|---:|---:|---:|---:|---:|---|\n")
	w("| %d | %.2f | %.2f | %.0f | %d | %.0f | %s |\n\n", b.Commands, b.ToDevice.Seconds(), b.ToOutcomes.Seconds(), b.Rate(), b.Transactions,
		ceiling.Ratio(float64(b.Commands), float64(b.Transactions)), yes(b.Rate() >= targetBacklogRate))
}

// The markers around the "Cost against history" section. scripts/bench.sh
// replaces what lies between them with the fragment of test/bench/history
// when that program exists.
const (
	historyBegin = "<!-- cost-against-history:begin -->"
	historyEnd   = "<!-- cost-against-history:end -->"
)

// writeHistory writes the place of the "Cost against history" section:
// the fragment of -history when the file exists, a note otherwise.
func (r *report) writeHistory(w func(string, ...any)) {
	w("## Cost against history\n\n%s\n", historyBegin)
	fragment, err := os.ReadFile(r.opts.history)
	if r.opts.history != "" && err == nil && len(strings.TrimSpace(string(fragment))) > 0 {
		w("%s\n", strings.TrimSpace(string(fragment)))
	} else {
		w("This section comes from `test/bench/history` (`cmd/benchhistory`), which `scripts/bench.sh` runs when it is\n")
		w("present; it was not part of this run.\n")
	}
	w("%s\n\n", historyEnd)
}
