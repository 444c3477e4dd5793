package ceiling

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
	"github.com/krabka-io/krabka-dispatch/internal/member"
)

// Member is a real member of a role (the runtime behind `dispatcher run`)
// that leads it, with its HTTP API on a loopback port, intake from the
// requests topic, and a timing device that does nothing.
type Member struct {
	// URL is the base URL of the HTTP API.
	URL string

	// Device is the member's device.
	Device *TimingDevice

	transport *coordination.KafkaTransport
	source    *dispatch.KafkaRequestSource
	server    *http.Server
	cancel    context.CancelFunc
	done      chan error
}

// MemberSetup describes a Member to start.
type MemberSetup struct {
	Brokers []string

	// Role, LogTopic and RequestsTopic name the role and its topics of one
	// partition each, which the caller created.
	Role, LogTopic, RequestsTopic string
}

// StartMember starts a member and waits until it leads and has read its log.
func StartMember(ctx context.Context, s MemberSetup) (*Member, error) {
	lease, err := coordination.NewLeaseConfig(BenchLease, 3*time.Second, time.Second)
	if err != nil {
		return nil, err
	}
	role, err := coordination.NewRole(s.Role)
	if err != nil {
		return nil, err
	}
	id, _ := coordination.NewMemberID("bench-member")
	transport, err := coordination.NewKafkaTransport(lease, s.Brokers...)
	if err != nil {
		return nil, err
	}
	m := &Member{Device: &TimingDevice{}, transport: transport}
	fail := func(err error) (*Member, error) {
		m.Close()
		return nil, err
	}
	registry := dispatch.NewRegistry()
	if err := registry.Register(BenchDevice, m.Device); err != nil {
		return fail(err)
	}
	logReader, err := dispatch.NewKafkaLogReader(s.Brokers)
	if err != nil {
		return fail(err)
	}
	if m.source, err = dispatch.NewKafkaRequestSource(s.Brokers); err != nil {
		return fail(err)
	}
	mem, err := member.New(member.Config{
		Transport: transport, Role: role, Member: id,
		Coordination: []coordination.Option{coordination.WithLeaseConfig(lease), coordination.WithPollInterval(100 * time.Millisecond),
			coordination.WithRenewalsInWrites(lease.RenewInterval() / 4)}, // as the dispatcher binary
		Registry: registry, Log: logReader, LogTopic: s.LogTopic, LogPartitions: 1,
		Dispatch: []dispatch.Option{
			dispatch.WithLogTopic(s.LogTopic, 1), dispatch.WithRequestsTopic(s.RequestsTopic, 1),
			dispatch.WithRequestSource(m.source),
		},
	})
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	m.URL = "http://" + ln.Addr().String()
	m.server = &http.Server{Handler: httpapi.NewHandler(mem, httpapi.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.server.Serve(ln) }()
	runCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.done = make(chan error, 1)
	go func() { m.done <- mem.Run(runCtx) }()

	deadline := time.Now().Add(time.Minute)
	for {
		_, leads := mem.Leading()
		if leads && mem.Ready() == nil {
			return m, nil
		}
		if time.Now().After(deadline) {
			return fail(errors.New("the member did not lead and read its log within a minute"))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops the member (it resigns), its API and its clients.
func (m *Member) Close() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = m.server.Shutdown(ctx)
		cancel()
	}
	if m.source != nil {
		m.source.Close()
	}
	m.transport.Close()
}

// A Submitter hands one command to a member by some path and returns when
// the path accepted it.
type Submitter func(ctx context.Context, cmd dispatch.Command) error

// HTTPSubmitter submits through POST /v1/commands of the member's API,
// without waiting for the outcome (the API answers 202).
func HTTPSubmitter(baseURL string, conns int) Submitter {
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns},
	}
	return func(ctx context.Context, cmd dispatch.Command) error {
		body, err := json.Marshal(httpapi.SubmitRequest{ID: cmd.ID, Device: cmd.Device, Action: cmd.Action, Payload: string(cmd.Payload), Timeout: "1m"})
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/commands", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
			return fmt.Errorf("submit %s: %s: %s", cmd.ID, resp.Status, strings.TrimSpace(string(msg)))
		}
		return nil
	}
}

// TopicSubmitter produces each command as a request to partition 0 of the
// requests topic, acks=all, and returns when the broker acknowledged it.
// close releases its client.
func TopicSubmitter(brokers []string, topic string) (submit Submitter, close func(), err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.RequestTimeoutOverhead(DefaultRequestTimeout))
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, cmd dispatch.Command) error {
		value, err := dispatch.EncodeRequest(cmd)
		if err != nil {
			return err
		}
		return cl.ProduceSync(ctx, &kgo.Record{Key: []byte(cmd.ID), Value: value, Partition: 0}).FirstErr()
	}, cl.Close, nil
}

// LatencyResult is the latencies of one path from submit to the device
// acting and to the outcome committed.
type LatencyResult struct {
	// ToAccepted ends when the path accepted the command: the API's 202,
	// or the broker's acknowledgement of the request record.
	ToAccepted, ToDevice, ToOutcome Summary
}

// MeasureLatency runs clients closed loops for duration: each submits a
// command by submit, waits until the member's device acted on it and its
// outcome record arrived at the watcher, and submits the next. It returns
// the latencies from the instant before the submit.
func MeasureLatency(ctx context.Context, m *Member, w *OutcomeWatcher, submit Submitter, role, prefix string, clients int, duration time.Duration) (LatencyResult, error) {
	type sample struct{ acc, dev, out time.Duration }
	results := make(chan []sample, clients)
	errs := make(chan error, clients)
	start := time.Now()
	for c := range clients {
		go func() {
			var mine []sample
			for i := 0; time.Since(start) < duration; i++ {
				cmd := BenchCommand(role, fmt.Sprintf("%s-c%d", prefix, c), i, time.Now())
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				began := time.Now()
				err := submit(wctx, cmd)
				accepted := time.Now()
				var dev, out time.Time
				if err == nil {
					dev, err = m.Device.Wait(wctx, cmd.ID)
				}
				if err == nil {
					out, err = w.Wait(wctx, cmd.ID)
				}
				cancel()
				if err != nil {
					errs <- err
					results <- mine
					return
				}
				mine = append(mine, sample{accepted.Sub(began), dev.Sub(began), out.Sub(began)})
			}
			errs <- nil
			results <- mine
		}()
	}
	var acc, dev, out []time.Duration
	var firstErr error
	for range clients {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
		for _, s := range <-results {
			acc, dev, out = append(acc, s.acc), append(dev, s.dev), append(out, s.out)
		}
	}
	elapsed := time.Since(start)
	if firstErr != nil {
		return LatencyResult{}, firstErr
	}
	return LatencyResult{ToAccepted: Summarize(acc, elapsed), ToDevice: Summarize(dev, elapsed), ToOutcome: Summarize(out, elapsed)}, nil
}

// MeasureIntakeRead times the requests topic alone, one request at a time
// for window: from the instant before a request is produced (as
// TopicSubmitter does) until a dispatch.KafkaRequestSource reading the
// partition returns it. It is the part of the requests-topic path before
// the dispatcher takes the command.
func MeasureIntakeRead(ctx context.Context, brokers []string, topic string, window time.Duration) (Summary, error) {
	submit, closeSubmit, err := TopicSubmitter(brokers, topic)
	if err != nil {
		return Summary{}, err
	}
	defer closeSubmit()
	source, err := dispatch.NewKafkaRequestSource(brokers)
	if err != nil {
		return Summary{}, err
	}
	defer source.Close()
	tp := coordination.TopicPartition{Topic: topic}
	next := int64(0)
	prefix := "intake"
	round := func(ctx context.Context, i int) error {
		cmd := BenchCommand("intake", prefix, i, time.Now())
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := submit(rctx, cmd); err != nil {
			return err
		}
		for {
			recs, err := source.ReadRequests(rctx, tp, next)
			if err != nil {
				return err
			}
			next = recs[len(recs)-1].Offset + 1
			if string(recs[len(recs)-1].Key) == cmd.ID {
				return nil
			}
		}
	}
	// An untimed first round reads the topic's earlier requests (a call
	// before this one wrote them) and connects the clients, so each timed
	// round reads its own request alone. Its ID is the call's own, so no
	// earlier request matches it.
	prefix = fmt.Sprintf("intake-warm-%d", time.Now().UnixNano())
	if err := round(ctx, 0); err != nil {
		return Summary{}, err
	}
	prefix = "intake"
	return SerialLoop(ctx, window, round)
}
