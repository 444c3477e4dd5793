package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
)

// failover runs the crash (SIGKILL) or the graceful (SIGTERM) trials.
func failover(ctx context.Context, o options, reader coordination.StateReader, prefix string, graceful bool, rep *report) error {
	kind := "crash"
	if graceful {
		kind = "handover"
	}
	trials := o.failoverTrials
	if graceful {
		trials = o.handoverTrials
	}
	t := o.failoverTimings
	res, err := ceiling.RunFailover(ctx, ceiling.Failover{
		HolderBin: o.holderBin, Brokers: o.brokers, Role: prefix + "-" + kind,
		Members: 3, Trials: trials, Graceful: graceful,
		Lease: t.lease, Renew: t.renew, Stagger: t.stagger, Poll: t.poll,
		Reader: reader, Seed: o.seed, Stderr: stderr(o),
	})
	for i, tr := range res {
		logf("%s trial %d: %s -> %s in %s (bound %s, rank %d)", kind, i+1, tr.From, tr.To, tr.Measured.Round(time.Millisecond), tr.Bound.Round(time.Millisecond), tr.Rank)
	}
	if graceful {
		rep.handover = res
	} else {
		rep.crash = res
	}
	return err
}

// warmCluster runs, before any section and without keeping a figure, the
// end-to-end comparison with one repetition and a few handover trials
// (warmHandovers). Brokers that just started answer their first minutes of
// transactions slower while their JIT compiles the hot paths, and the first
// sections would measure that rather than the dispatcher.
func warmCluster(ctx context.Context, o options, reader coordination.StateReader, prefix string, newTopic func(string) (string, error)) error {
	w := o
	w.reps = 1
	w.handoverTrials = o.warmHandovers()
	prefix += "-warm"
	var discard report
	warmTopic := func(name string) (string, error) { return newTopic("warm-" + name) }
	if err := endToEnd(ctx, w, prefix, warmTopic, &discard); err != nil {
		return err
	}
	return failover(ctx, w, reader, prefix, true, &discard)
}

// warmHandovers is the number of handover trials of the warm-up.
func (o options) warmHandovers() int { return min(5, o.handoverTrials) }

// endToEnd compares the dispatcher with the fair ceiling, batch by batch.
func endToEnd(ctx context.Context, o options, prefix string, newTopic func(string) (string, error), rep *report) error {
	for _, batch := range o.batches {
		var topics [3]string
		for i, kind := range []string{"log", "req", "raw"} {
			name, err := newTopic(fmt.Sprintf("e2e-%s-b%d", kind, batch))
			if err != nil {
				return err
			}
			topics[i] = name
		}
		res, err := ceiling.RunE2E(ctx, ceiling.E2E{
			Brokers: o.brokers, Role: fmt.Sprintf("%s-e2e-b%d", prefix, batch),
			LogTopic: topics[0], RequestsTopic: topics[1], RawTopic: topics[2],
			Batch: batch, Submit: o.submit, Window: o.point, Warmup: o.warmup, Reps: o.reps, Log: logf,
			Options: o.e2eDispatcherOptions(),
		})
		if err != nil {
			return fmt.Errorf("batch %d: %w", batch, err)
		}
		logf("batch %d: dispatcher %.0f/s, ceiling %.0f/s, ratio %.2f (%.2f-%.2f)", batch, res.DispatchRate, res.CeilingRate, res.Ratio, res.RatioMin, res.RatioMax)
		rep.e2e = append(rep.e2e, res)
	}
	return nil
}

// e2eDispatcherOptions returns the dispatcher options of -commit-gap,
// -commit-linger and -checkpoint-interval.
func (o *options) e2eDispatcherOptions() []dispatch.Option {
	var opts []dispatch.Option
	if o.commitGap >= 0 {
		opts = append(opts, dispatch.WithCommitGap(o.commitGap))
	}
	if o.commitLinger >= 0 {
		opts = append(opts, dispatch.WithCommitLinger(o.commitLinger))
	}
	if o.checkpointInterval > 0 {
		opts = append(opts, dispatch.WithCheckpointInterval(o.checkpointInterval))
	}
	return opts
}

// memResult is the pending-command memory figure.
type memResult struct {
	n           int
	perCommand  float64
	recordBytes int
}

// memory measures the heap per pending command.
func memory(ctx context.Context, o options, prefix string, newTopic func(string) (string, error), rep *report) error {
	logTopic, err := newTopic("mem-log")
	if err != nil {
		return err
	}
	reqTopic, err := newTopic("mem-req")
	if err != nil {
		return err
	}
	block := ceiling.NewBlockingDevice()
	d, err := ceiling.StartDispatcher(ctx, ceiling.DispatcherSetup{
		Brokers: o.brokers, Role: prefix + "-mem", LogTopic: logTopic, RequestsTopic: reqTopic,
		Device: block, Intake: true,
		Options: []dispatch.Option{dispatch.WithMaxQueued(max(dispatch.DefaultMaxQueued, 2*o.pending))},
	})
	if err != nil {
		return err
	}
	defer d.Close()
	defer block.Release()
	// Recovery of the empty log and the first intake fetch settle first.
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	per, err := ceiling.PendingMemory(ctx, d, block, o.brokers, reqTopic, o.pending)
	if err != nil {
		return err
	}
	token, _ := coordination.NewFencingToken(1, 0)
	cmd := ceiling.BenchCommand(d.Role, "mem", 0, time.Now())
	key, value, err := dispatch.EncodeEntry(dispatch.Entry{Kind: dispatch.EntryIssued, Role: d.Role, Token: token, Member: "bench", At: time.Now(),
		Issued: &dispatch.Issued{Command: cmd}})
	if err != nil {
		return err
	}
	rep.mem = &memResult{n: o.pending, perCommand: per, recordBytes: len(key) + len(value)}
	logf("memory: %.0f bytes per pending command (record %d bytes)", per, len(key)+len(value))
	return nil
}

// rolesPartitions is the partition count of the shared log and requests
// topics of the roles section.
const rolesPartitions = 16

// rolesSection measures one process holding each role count with a real
// dispatcher per role, with the default lease timings.
func rolesSection(ctx context.Context, o options, prefix string, newTopic func(string) (string, error), rep *report) error {
	for _, n := range o.roles {
		var topics [2]string
		for i, kind := range []string{"log", "req"} {
			name := fmt.Sprintf("%s-roles%d-%s", prefix, n, kind)
			tctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := ceiling.CreateTopic(tctx, o.brokers, ceiling.TopicSpec{Name: name, Partitions: rolesPartitions, Replication: 3, MinInsyncReplicas: 2})
			cancel()
			if err != nil {
				return err
			}
			rep.extraTopics = append(rep.extraTopics, name)
			topics[i] = name
		}
		res, err := ceiling.MeasureRoles(ctx, ceiling.Roles{
			HolderBin: o.holderBin, Brokers: o.brokers, RolePrefix: prefix + "-roles", Window: o.rolesWindow,
			Lease: coordination.DefaultLeaseDuration, Renew: coordination.DefaultRenewInterval,
			Stagger: coordination.DefaultChallengeStagger, Poll: coordination.DefaultPollInterval,
			LogTopic: topics[0], RequestsTopic: topics[1], Partitions: rolesPartitions, Stderr: stderr(o),
		}, n)
		if err != nil {
			return fmt.Errorf("%d roles: %w", n, err)
		}
		logf("roles %d: acquired in %s, CPU %.3f cores, RSS %.1f MiB, %.1f requests/s, %d sockets, %d fds, %d goroutines", n,
			res.Acquire.Round(time.Millisecond), res.CPU, float64(res.RSS)/(1<<20), res.RequestsPerSec, res.Sockets, res.FDs, res.Goroutines)
		rep.roles = append(rep.roles, res)
	}
	return nil
}

// stderr is where the measured processes' standard error goes.
func stderr(o options) io.Writer {
	if o.verbose {
		return os.Stderr
	}
	return nil
}
