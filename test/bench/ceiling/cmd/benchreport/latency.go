package main

import (
	"context"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
)

// latencyResult is the end-to-end latency section.
type latencyResult struct {
	clients     int
	http, topic ceiling.LatencyResult
	raw         ceiling.Summary
	rawSeen     ceiling.Summary // the raw commit until a reader of the log read it
	rawLoop     ceiling.Summary // the same clients on a raw producer that commits greedily
	rawBatch    int
	rawPause    time.Duration
	intakeRead  ceiling.Summary
	// rawSteps splits the raw commit into its produce and its EndTxn, and
	// retryBackoff is the brokers' add.partitions.to.txn.retry.backoff.ms
	// ("" when the cluster did not say).
	rawSteps     ceiling.CommitSteps
	retryBackoff string
}

// retryBackoff is the broker setting after which a partition leader checks
// again a transaction that it held at its first produce.
const retryBackoffSetting = "add.partitions.to.txn.retry.backoff.ms"

// latencySection times commands from submit, through a real member's HTTP
// API and through the requests topic, to the device acting and to the
// outcome committed, in alternation with the raw commit of the ceiling.
func latencySection(ctx context.Context, o options, prefix string, newTopic func(string) (string, error), rep *report) error {
	var topics [6]string
	for i, kind := range []string{"log", "req", "raw", "intake", "rawseen", "rawloop"} {
		name, err := newTopic("lat-" + kind)
		if err != nil {
			return err
		}
		topics[i] = name
	}
	role := prefix + "-lat"
	w, err := ceiling.WatchOutcomes(o.brokers, topics[0])
	if err != nil {
		return err
	}
	defer w.Close()
	m, err := ceiling.StartMember(ctx, ceiling.MemberSetup{Brokers: o.brokers, Role: role, LogTopic: topics[0], RequestsTopic: topics[1]})
	if err != nil {
		return fmt.Errorf("member: %w", err)
	}
	defer m.Close()
	viaTopic, closeTopic, err := ceiling.TopicSubmitter(o.brokers, topics[1])
	if err != nil {
		return err
	}
	defer closeTopic()
	viaHTTP := ceiling.HTTPSubmitter(m.URL, o.clients)
	commands, err := ceiling.EncodeCommands(role, 4*o.clients)
	if err != nil {
		return err
	}
	raw, err := ceiling.NewRawProducer(ctx, o.brokers, topics[2], topics[2], ceiling.BenchLease, commands)
	if err != nil {
		return err
	}
	defer raw.Close()
	// The paths' log partition has a reader, the clients' watcher of
	// outcomes, and on Kafka 4.1 a reader spares some transactions the
	// hold at their first produce: the raw commit's partition has one too.
	tail, err := ceiling.StartTailReader(o.brokers, topics[2], 0)
	if err != nil {
		return err
	}
	defer tail.Close()

	// The raw commit seen by a reader writes each command once: enough of
	// them for a transaction every 5 ms over the whole section.
	rawSeen, seenWatch, err := watchedProducer(ctx, o, role, topics[4], 5*time.Millisecond)
	if err != nil {
		return err
	}
	defer rawSeen.Close()
	defer seenWatch.Close()
	// The clients on a greedy raw producer write each command once: a
	// command per client every 10 ms over the whole section is more than
	// two transactions a command allow.
	rawLoop, loopWatch, err := watchedProducer(ctx, o, role, topics[5], 10*time.Millisecond)
	if err != nil {
		return err
	}
	defer rawLoop.Close()
	defer loopWatch.Close()

	res := &latencyResult{clients: o.clients, rawBatch: o.clients}
	// The raw commit runs at the pause that commits fastest.
	best := 0.0
	for _, p := range ceiling.DefaultPauses {
		s, err := raw.Run(ctx, res.rawBatch, p, o.warmup/time.Duration(len(ceiling.DefaultPauses))+time.Millisecond)
		if err != nil {
			return err
		}
		if s.Rate > best {
			best, res.rawPause = s.Rate, p
		}
	}
	raw.KeepSteps() // from the measured transactions on, not the sweep's
	if res.retryBackoff, err = ceiling.BrokerConfig(ctx, o.brokers, retryBackoffSetting); err != nil {
		logf("latency: %v", err)
	}
	if _, err := ceiling.MeasureLatency(ctx, m, w, viaHTTP, role, "warm", o.clients, o.warmup); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	var httpAcc, httpDev, httpOut, topicAcc, topicDev, topicOut, raws, seens, loops, intakes []ceiling.Summary
	for i := range o.reps {
		h, err := ceiling.MeasureLatency(ctx, m, w, viaHTTP, role, fmt.Sprintf("http%d", i), o.clients, o.point)
		if err != nil {
			return fmt.Errorf("through the API: %w", err)
		}
		t, err := ceiling.MeasureLatency(ctx, m, w, viaTopic, role, fmt.Sprintf("topic%d", i), o.clients, o.point)
		if err != nil {
			return fmt.Errorf("through the requests topic: %w", err)
		}
		r, err := raw.Run(ctx, res.rawBatch, res.rawPause, o.point)
		if err != nil {
			return fmt.Errorf("raw commit: %w", err)
		}
		seen, err := rawSeen.RunSeen(ctx, seenWatch, res.rawBatch, res.rawPause, o.point)
		if err != nil {
			return fmt.Errorf("raw commit seen by a reader: %w", err)
		}
		seens = append(seens, seen)
		loop, err := rawLoop.RunClosedLoop(ctx, loopWatch, o.clients, res.rawPause, o.point)
		if err != nil {
			return fmt.Errorf("the clients on a greedy raw producer: %w", err)
		}
		loops = append(loops, loop)
		in, err := ceiling.MeasureIntakeRead(ctx, o.brokers, topics[3], o.point)
		if err != nil {
			return fmt.Errorf("requests topic read alone: %w", err)
		}
		intakes = append(intakes, in)
		httpAcc, httpDev, httpOut = append(httpAcc, h.ToAccepted), append(httpDev, h.ToDevice), append(httpOut, h.ToOutcome)
		topicAcc, topicDev, topicOut = append(topicAcc, t.ToAccepted), append(topicDev, t.ToDevice), append(topicOut, t.ToOutcome)
		raws = append(raws, r)
		logf("latency repetition %d: API to outcome p99 %s ms, topic to outcome p99 %s ms, raw commit p99 %s ms, raw commit seen by a reader p99 %s ms, greedy raw p99 %s ms", i+1,
			ceiling.Millis(h.ToOutcome.P99), ceiling.Millis(t.ToOutcome.P99), ceiling.Millis(r.P99), ceiling.Millis(seen.P99), ceiling.Millis(loop.P99))
	}
	res.http = ceiling.LatencyResult{ToAccepted: ceiling.Pool(httpAcc...), ToDevice: ceiling.Pool(httpDev...), ToOutcome: ceiling.Pool(httpOut...)}
	res.topic = ceiling.LatencyResult{ToAccepted: ceiling.Pool(topicAcc...), ToDevice: ceiling.Pool(topicDev...), ToOutcome: ceiling.Pool(topicOut...)}
	res.raw = ceiling.Pool(raws...)
	res.rawSteps = raw.TakeSteps()
	res.rawSeen = ceiling.Pool(seens...)
	res.rawLoop = ceiling.Pool(loops...)
	res.intakeRead = ceiling.Pool(intakes...)
	rep.latency = res
	return nil
}

// watchedProducer returns a raw producer of topic with o.clients commands
// for every interval of the section, each written once, and a watcher of
// the outcomes on topic.
func watchedProducer(ctx context.Context, o options, role, topic string, interval time.Duration) (*ceiling.RawProducer, *ceiling.OutcomeWatcher, error) {
	commands, err := ceiling.EncodeCommands(role, o.clients*int((time.Duration(o.reps)*o.point+o.warmup)/interval+10))
	if err != nil {
		return nil, nil, err
	}
	p, err := ceiling.NewRawProducer(ctx, o.brokers, topic, topic, ceiling.BenchLease, commands)
	if err != nil {
		return nil, nil, err
	}
	w, err := ceiling.WatchOutcomes(o.brokers, topic)
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	return p, w, nil
}

// backlogSection times one role draining a backlog of requests with a
// device that does nothing.
func backlogSection(ctx context.Context, o options, prefix string, newTopic func(string) (string, error), rep *report) error {
	logTopic, err := newTopic("backlog-log")
	if err != nil {
		return err
	}
	reqTopic, err := newTopic("backlog-req")
	if err != nil {
		return err
	}
	var options []dispatch.Option
	if o.backlogBatch > 0 {
		options = append(options, dispatch.WithMaxBatchRecords(o.backlogBatch))
	}
	res, err := ceiling.MeasureBacklog(ctx, o.brokers, prefix+"-backlog", logTopic, reqTopic, o.backlog, options...)
	if err != nil {
		return err
	}
	logf("backlog: %d commands, device done in %s, outcomes committed in %s: %.0f/s", res.Commands,
		res.ToDevice.Round(time.Millisecond), res.ToOutcomes.Round(time.Millisecond), res.Rate())
	rep.backlog = &res
	return nil
}
