package ceiling

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// E2E describes the end-to-end comparison at one batch size: a dispatcher
// with a device that does nothing against the raw producer of
// RawProducer, on fresh topics of the same settings, after a warm-up of
// each, in Reps alternating repetitions.
type E2E struct {
	Brokers []string

	// Role, LogTopic and RequestsTopic are the dispatcher's; RawTopic the
	// ceiling's. The caller creates the topics, one partition each.
	Role, LogTopic, RequestsTopic, RawTopic string

	// Batch is the number of commands submitted at once by the dispatcher
	// side and committed per transaction by the ceiling.
	Batch int

	// Submit is how the dispatcher side submits a batch: by default with
	// one SubmitBatch call.
	Submit SubmitMode

	// Window is how long each side runs in a repetition, the ceiling once
	// per pause; Warmup how long each side runs before the first.
	Window, Warmup time.Duration

	// Reps is the number of repetitions; at least 5 for a median and a
	// spread that mean something.
	Reps int

	// Pauses are the pauses after each commit that the ceiling sweeps;
	// DefaultPauses when empty.
	Pauses []time.Duration

	// Options are passed to the dispatcher after the harness's own, to
	// measure other commit timings than the defaults.
	Options []dispatch.Option

	// Log, when set, receives a line per repetition.
	Log func(format string, args ...any)
}

// E2ERep is one repetition: the dispatcher, then the ceiling at every
// pause, or the other way round on every other repetition.
type E2ERep struct {
	Dispatch Summary
	Ceiling  []Summary // by pause
	Best     int       // index of the pause of the best ceiling
	Ratio    float64   // Dispatch.Rate over Ceiling[Best].Rate
}

// E2EResult is the comparison at one batch size.
type E2EResult struct {
	Batch  int
	Pauses []time.Duration
	Reps   []E2ERep

	// DispatchRate and CeilingRate are the medians over the repetitions of
	// the dispatcher's rate and of the best ceiling's; Ratio, RatioMin and
	// RatioMax the median and the extremes of the per-repetition ratios.
	DispatchRate, CeilingRate  float64
	Ratio, RatioMin, RatioMax  float64
	DispatchSpread, CeilSpread [2]float64 // min and max rate

	// Dispatch is every dispatcher latency of every repetition, from the
	// submit to the device's return; Ceiling every latency of the best
	// ceiling of each repetition, from its transaction's start to the
	// return of the commit.
	Dispatch, Ceiling Summary

	// TxnsPerRound is the mean number of transactions the dispatcher wrote
	// per round of Batch commands.
	TxnsPerRound float64

	// Mix and Rounds say what the transactions of the repetitions carried
	// and over how many rounds: a round that needs more than one
	// transaction with Issued records did not gather its burst of submits
	// into one, and a transaction of outcomes alone held back the Issued
	// records that queued while it was in flight.
	Mix    MixStats
	Rounds int64

	// Drive is the median over the rounds of the time from the first to the
	// last device act of a round: how long the dispatcher takes to drive a
	// committed batch, and so how long its outcomes keep queuing.
	Drive time.Duration

	// Phases are the medians over the rounds of each phase of a round.
	Phases RoundPhases

	// Writes are the dispatcher's transactions during the repetitions:
	// their number, records and time inside Leadership.Write. With the
	// dispatcher's own time it says where a round's time goes.
	Writes WriteStats
	// DispatchRetries counts the CONCURRENT_TRANSACTIONS answers the
	// dispatcher met during the repetitions; CeilingRetries and
	// CeilingTxns those of the ceiling and its transactions, by pause.
	DispatchRetries             int64
	CeilingRetries, CeilingTxns []int64
	// DispatchTime is the dispatcher side's time over the repetitions.
	DispatchTime time.Duration

	// DispatchCPU and CeilingCPU are the CPU time this process used while
	// each side ran, over the repetitions, and DispatchCommands and
	// CeilingCommands the commands each side carried meanwhile: the
	// ceiling's at every pause. The brokers' CPU is not in them.
	DispatchCPU, CeilingCPU           time.Duration
	DispatchCommands, CeilingCommands int64

	// CeilingBytesPerCommand is the bytes of one command's records that
	// the ceiling writes: its Issued and its Outcome record, keys, values
	// and headers.
	CeilingBytesPerCommand int64
}

// BytesPerRound returns the bytes the dispatcher's transactions carried per
// round of Batch commands, and those of them that were parts of a
// checkpoint.
func (r E2EResult) BytesPerRound() (all, checkpoints float64) {
	if r.Rounds == 0 {
		return 0, 0
	}
	return float64(r.Writes.Bytes) / float64(r.Rounds), float64(r.Writes.CheckpointBytes) / float64(r.Rounds)
}

// CPUPerCommand returns the CPU time this process used per command while
// the dispatcher side ran and while the ceiling ran.
func (r E2EResult) CPUPerCommand() (dispatch, ceiling time.Duration) {
	per := func(cpu time.Duration, n int64) time.Duration {
		if n == 0 {
			return 0
		}
		return cpu / time.Duration(n)
	}
	return per(r.DispatchCPU, r.DispatchCommands), per(r.CeilingCPU, r.CeilingCommands)
}

// MeanWrite returns the mean time of one dispatcher transaction.
func (r E2EResult) MeanWrite() time.Duration {
	if r.Writes.Writes == 0 {
		return 0
	}
	return r.Writes.InWrite / time.Duration(r.Writes.Writes)
}

// WriteShare returns the share of the dispatcher side's time spent inside
// Leadership.Write.
func (r E2EResult) WriteShare() float64 {
	return Ratio(float64(r.Writes.InWrite), float64(r.DispatchTime))
}

// RunE2E runs the comparison. The dispatcher side runs under the pprof
// label side=dispatcher and the ceiling under side=ceiling, so that a CPU
// profile of the run separates them.
func RunE2E(ctx context.Context, cfg E2E) (E2EResult, error) {
	if cfg.Reps < 1 || cfg.Batch < 1 || cfg.Window <= 0 {
		return E2EResult{}, fmt.Errorf("ceiling: E2E needs Reps, Batch and Window above zero")
	}
	pauses := cfg.Pauses
	if len(pauses) == 0 {
		pauses = DefaultPauses
	}
	logf := cfg.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	res := E2EResult{Batch: cfg.Batch, Pauses: pauses, CeilingRetries: make([]int64, len(pauses)), CeilingTxns: make([]int64, len(pauses))}

	var d *Dispatcher
	var raw *RawProducer
	var err error
	pprof.Do(ctx, pprof.Labels("side", "dispatcher"), func(ctx context.Context) {
		d, err = StartDispatcher(ctx, DispatcherSetup{
			Brokers: cfg.Brokers, Role: cfg.Role, LogTopic: cfg.LogTopic, RequestsTopic: cfg.RequestsTopic,
			Options: append([]dispatch.Option{
				dispatch.WithMaxBatchRecords(max(dispatch.DefaultMaxBatchRecords, 2*cfg.Batch)),
				dispatch.WithMaxQueued(max(dispatch.DefaultMaxQueued, 4*cfg.Batch)),
			}, cfg.Options...),
		})
	})
	if err != nil {
		return res, fmt.Errorf("dispatcher: %w", err)
	}
	defer d.Close()
	// Enough distinct commands for a few transactions; they repeat after.
	commands, err := EncodeCommands(cfg.Role, max(4*cfg.Batch, 64))
	if err != nil {
		return res, err
	}
	res.CeilingBytesPerCommand = commands[0].Bytes()
	pprof.Do(ctx, pprof.Labels("side", "ceiling"), func(ctx context.Context) {
		raw, err = NewRawProducer(ctx, cfg.Brokers, cfg.RawTopic, cfg.RawTopic, BenchLease, commands)
	})
	if err != nil {
		return res, fmt.Errorf("ceiling: %w", err)
	}
	defer raw.Close()

	n := 0 // commands the dispatcher side submitted, for fresh ids
	runDispatch := func(window time.Duration) (run submitRun, err error) {
		pprof.Do(ctx, pprof.Labels("side", "dispatcher"), func(ctx context.Context) {
			run, err = measureSubmit(ctx, d, cfg.Batch, window, "e2e", n, cfg.Submit)
		})
		n += len(run.samples)
		return run, err
	}
	runCeiling := func(pause, window time.Duration) (s Summary, err error) {
		pprof.Do(ctx, pprof.Labels("side", "ceiling"), func(ctx context.Context) {
			s, err = raw.Run(ctx, cfg.Batch, pause, window)
		})
		return s, err
	}

	if cfg.Warmup > 0 {
		if _, err := runDispatch(cfg.Warmup); err != nil {
			return res, fmt.Errorf("dispatcher warm-up: %w", err)
		}
		for _, p := range pauses {
			if _, err := runCeiling(p, cfg.Warmup/time.Duration(len(pauses))+time.Millisecond); err != nil {
				return res, fmt.Errorf("ceiling warm-up: %w", err)
			}
		}
	}

	var dispatchSamples []time.Duration
	var perRounds, drives []float64
	var phases []RoundPhases
	for rep := range cfg.Reps {
		r := E2ERep{Ceiling: make([]Summary, len(pauses))}
		dispatchSide := func() error {
			before, retries, mix := d.WriteStats(), d.Retries.Count(), d.Mix.Stats()
			cpu, err := ownCPU()
			if err != nil {
				return err
			}
			run, err := runDispatch(cfg.Window)
			samples, elapsed := run.samples, run.elapsed
			used, cerr := ownCPU()
			if err == nil {
				err = cerr
			}
			res.DispatchCPU += used - cpu
			res.DispatchCommands += int64(len(samples))
			delta := d.WriteStats().Sub(before)
			mixed := d.Mix.Stats().Sub(mix)
			res.Mix = MixStats{Issuing: res.Mix.Issuing + mixed.Issuing, OutcomesOnly: res.Mix.OutcomesOnly + mixed.OutcomesOnly}
			res.Rounds += int64(len(samples) / cfg.Batch)
			for i := 0; i+cfg.Batch <= len(samples); i += cfg.Batch {
				round := samples[i : i+cfg.Batch]
				drives = append(drives, float64(slices.Max(round)-slices.Min(round)))
			}
			res.DispatchRetries += d.Retries.Count() - retries
			res.Writes = res.Writes.Add(delta)
			res.DispatchTime += elapsed
			if err != nil {
				return fmt.Errorf("dispatcher, repetition %d: %w", rep+1, err)
			}
			dispatchSamples = append(dispatchSamples, samples...)
			perRounds = append(perRounds, run.perRound)
			phases = append(phases, run.phases...)
			r.Dispatch = Summarize(samples, elapsed)
			return nil
		}
		ceilingSide := func() error {
			cpu, err := ownCPU()
			if err != nil {
				return err
			}
			for i, p := range pauses {
				retries := raw.Retries.Count()
				s, err := runCeiling(p, cfg.Window)
				if err != nil {
					return fmt.Errorf("ceiling, pause %s, repetition %d: %w", p, rep+1, err)
				}
				// One read ends this pause's CPU and begins the next's.
				used, err := ownCPU()
				if err != nil {
					return err
				}
				res.CeilingCPU += used - cpu
				cpu = used
				res.CeilingCommands += int64(s.Count)
				res.CeilingRetries[i] += raw.Retries.Count() - retries
				res.CeilingTxns[i] += int64(s.Count / cfg.Batch)
				r.Ceiling[i] = s
				if s.Rate > r.Ceiling[r.Best].Rate {
					r.Best = i
				}
			}
			return nil
		}
		sides := []func() error{dispatchSide, ceilingSide}
		if rep%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return res, err
			}
		}
		r.Ratio = Ratio(r.Dispatch.Rate, r.Ceiling[r.Best].Rate)
		res.Reps = append(res.Reps, r)
		logf("batch %d, repetition %d: dispatcher %.0f/s, best ceiling %.0f/s (pause %s), ratio %.2f; per round so far: %.2f transactions with Issued records, %.2f of outcomes alone, driven in %s (median)",
			cfg.Batch, rep+1, r.Dispatch.Rate, r.Ceiling[r.Best].Rate, pauses[r.Best], r.Ratio,
			Ratio(float64(res.Mix.Issuing), float64(res.Rounds)), Ratio(float64(res.Mix.OutcomesOnly), float64(res.Rounds)),
			time.Duration(Median(drives)).Round(10*time.Microsecond))
	}
	res.summarize(dispatchSamples, perRounds)
	res.Drive = time.Duration(Median(drives))
	res.Phases = MedianPhases(phases)
	return res, nil
}

// ownCPU returns the CPU time this process used since it started.
func ownCPU() (time.Duration, error) {
	p, err := ReadProc(os.Getpid())
	if err != nil {
		return 0, fmt.Errorf("ceiling: the CPU time of the bench: %w", err)
	}
	return p.CPU, nil
}

// summarize fills the medians, the spreads and the pooled latencies.
func (r *E2EResult) summarize(dispatchSamples []time.Duration, perRounds []float64) {
	var disp, ceil, ratios []float64
	var dispElapsed time.Duration
	var ceilSamples []time.Duration
	var ceilElapsed time.Duration
	for _, rep := range r.Reps {
		disp = append(disp, rep.Dispatch.Rate)
		ceil = append(ceil, rep.Ceiling[rep.Best].Rate)
		ratios = append(ratios, rep.Ratio)
		dispElapsed += rep.Dispatch.Elapsed
		ceilElapsed += rep.Ceiling[rep.Best].Elapsed
		ceilSamples = append(ceilSamples, rep.Ceiling[rep.Best].samples...)
	}
	r.DispatchRate, r.CeilingRate = Median(disp), Median(ceil)
	r.Ratio = Median(ratios)
	r.RatioMin, r.RatioMax = slices.Min(ratios), slices.Max(ratios)
	r.DispatchSpread = [2]float64{slices.Min(disp), slices.Max(disp)}
	r.CeilSpread = [2]float64{slices.Min(ceil), slices.Max(ceil)}
	r.Dispatch = Summarize(dispatchSamples, dispElapsed)
	r.Ceiling = Summarize(ceilSamples, ceilElapsed)
	r.TxnsPerRound = Median(perRounds)
}

// Median returns the median of xs, the mean of the middle two for an even
// count, and zero for none. It does not modify xs.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BestPause returns the pause most repetitions found best.
func (r E2EResult) BestPause() time.Duration {
	counts := make([]int, len(r.Pauses))
	for _, rep := range r.Reps {
		counts[rep.Best]++
	}
	best := 0
	for i, c := range counts {
		if c > counts[best] {
			best = i
		}
	}
	return r.Pauses[best]
}
