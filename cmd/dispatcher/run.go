package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/config"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
	"github.com/krabka-io/krabka-dispatch/internal/member"
)

// HTTPShutdownTimeout bounds the graceful stop of the HTTP server.
const HTTPShutdownTimeout = 5 * time.Second

// RunOptions are the flags of `dispatcher run`.
type RunOptions struct {
	ConfigFile string
	LogFormat  string
	LogLevel   string

	Streams

	cfg    *config.Config
	logger *slog.Logger
	// serving, when set, receives the HTTP address once the server listens.
	serving func(addr string)
}

// NewRunCommand builds `dispatcher run`; its logger follows the global
// flags g.
func NewRunCommand(streams Streams, g *GlobalOptions) *cobra.Command {
	o := &RunOptions{Streams: streams}
	cmd := &cobra.Command{
		Use:   "run -c dispatcher.yaml",
		Short: "Run one member of a role: compete for it, and dispatch while leading",
		Long: `run is one member of a role. It registers, waits for its turn, and when it
leads, records every command in the command log under its fencing token and
only then drives the device. A standby answers API writes with a redirect to
the leader. SIGTERM or SIGINT stops intake, lets in-flight commands finish
for dispatch.shutdown_timeout, cancels what is left, resigns so a standby
takes over at once, and exits 0.

The HTTP server (http.listen) serves the API, the status page at /, the
health endpoints /livez, /readyz and /leaderz, and Prometheus /metrics;
over TLS when http.tls is set, with client certificates required when
http.tls.client_ca_file is, and with the token demanded for every read but
the health endpoints when http.protect_reads is.
OpenTelemetry reads the standard OTEL_* variables; traces are exported when
OTEL_EXPORTER_OTLP_ENDPOINT is set.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.LogFormat, o.LogLevel = g.LogFormat, g.LogLevel
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	addConfigFlag(cmd.Flags(), &o.ConfigFile)
	return cmd
}

// Complete loads the configuration and builds the logger.
func (o *RunOptions) Complete() error {
	if o.ConfigFile == "" {
		return usageErrorf("--config is required")
	}
	cfg, err := config.Load(o.ConfigFile)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	// A member serves the API, so it needs its token now, before it joins.
	if err := cfg.CheckMemberSecrets(); err != nil {
		return withCode(ExitUsage, err)
	}
	o.cfg = cfg
	logger, err := newLogger(o.Err, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	o.logger = logger
	return nil
}

// Validate has nothing to add to the configuration's validation.
func (o *RunOptions) Validate() error { return nil }

// Run runs the member until ctx ends.
func (o *RunOptions) Run(ctx context.Context) error {
	cfg := o.cfg
	logger := o.logger.With("role", cfg.Role, "member", cfg.Member)
	role, _ := coordination.NewRole(cfg.Role)
	memberID, _ := coordination.NewMemberID(cfg.Member)

	tel, err := newTelemetry(ctx, cfg.Role, cfg.Member)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), HTTPShutdownTimeout)
		defer cancel()
		_ = tel.Shutdown(sctx)
	}()

	kopts, err := cfg.Kafka.ClientOptions()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	lease, err := coordination.NewLeaseConfig(cfg.Lease.Duration, cfg.Lease.RenewInterval, cfg.Lease.ChallengeStagger)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	transport, err := coordination.NewKafkaTransportWithClientOptions(lease, kopts...)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer transport.Close()
	if err := transport.SetReadWait(coordination.ReadWait{Logger: logger, MeterProvider: tel.meters}); err != nil {
		return err
	}
	logReader, err := dispatch.NewKafkaLogReader(cfg.Kafka.Brokers, kopts...)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if err := logReader.SetReadWait(dispatch.LogReadWait{Logger: logger, MeterProvider: tel.meters}); err != nil {
		return err
	}
	requests, err := dispatch.NewKafkaRequestSource(cfg.Kafka.Brokers, kopts...)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer requests.Close()

	registry, err := buildRegistry(cfg, logger)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer func() {
		if err := registry.Close(); err != nil {
			logger.Warn("closing devices", "err", err)
		}
	}()

	coordOpts, err := withClockOffset(coordinationOptions(cfg))
	if err != nil {
		return withCode(ExitUsage, err)
	}
	m, err := member.New(member.Config{
		Transport:       transport,
		Role:            role,
		Member:          memberID,
		Coordination:    coordOpts,
		PollInterval:    cfg.Lease.PollInterval,
		Registry:        registry,
		Log:             logReader,
		LogTopic:        cfg.Topics.Log,
		LogPartitions:   cfg.Topics.Partitions,
		Dispatch:        dispatchOptions(cfg, requests, tel, logger),
		Peers:           cfg.Members,
		ShutdownTimeout: cfg.Dispatch.ShutdownTimeout,
		HealthInterval:  cfg.Dispatch.HealthInterval,
		HealthTimeout:   cfg.Dispatch.HealthTimeout,
		// A device down fails readiness only when the file asks for it.
		ReadyRequiresDevices: cfg.Dispatch.ReadyRequiresDevices,
		MeterProvider:        tel.meters,
		Logger:               logger,
	})
	if err != nil {
		return err
	}

	token, err := cfg.HTTP.ResolveToken()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	stopHTTP, err := o.serveHTTP(cfg, httpapi.NewHandler(m, httpapi.Options{Token: token, ProtectReads: cfg.HTTP.ProtectReads, Metrics: tel.metrics, Logger: logger}), logger)
	if err != nil {
		return err
	}
	defer stopHTTP()

	// The collector's percentage follows the live heap while the member
	// runs (see tuneGC).
	gcCtx, stopGC := context.WithCancel(ctx)
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		tuneGC(gcCtx)
	}()
	defer func() {
		stopGC()
		<-gcDone
	}()

	logger.Info("member started", "brokers", cfg.Kafka.Brokers, "devices", registry.Names(), "lease", cfg.Lease.Duration)
	if !o.awaitCluster(ctx, kopts, logger) {
		logger.Info("member stopped")
		return nil
	}
	if err := m.Run(ctx); err != nil {
		return err
	}
	logger.Info("member stopped")
	return nil
}

// serveHTTP starts the HTTP server unless it is off, and returns its stop.
func (o *RunOptions) serveHTTP(cfg *config.Config, h http.Handler, logger *slog.Logger) (func(), error) {
	if cfg.HTTP.Listen == config.HTTPOff {
		return func() {}, nil
	}
	var tlsConfig *tls.Config
	scheme := "http"
	if cfg.HTTP.TLS != nil {
		c, err := cfg.HTTP.TLS.ServerConfig()
		if err != nil {
			return nil, withCode(ExitUsage, err)
		}
		tlsConfig, scheme = c, "https"
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("http.listen %s: %w", cfg.HTTP.Listen, err))
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	// A refused handshake (no client certificate, an unknown authority)
	// is logged as a warning, not to the process's standard error.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server", "err", err)
		}
	}()
	addr := ln.Addr().String()
	logger.Info("http listening", "url", scheme+"://"+addr, "protect_reads", cfg.HTTP.ProtectReads)
	if o.serving != nil {
		o.serving(addr)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), HTTPShutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// coordinationOptions returns the options of package coordination that a
// configuration sets. A command write carries the lease renewal when it falls
// due within a quarter of the renew interval, so a leader under steady load
// spends no transaction of its own on renewals.
func coordinationOptions(c *config.Config) []coordination.Option {
	return []coordination.Option{
		coordination.WithTopic(c.Topics.Coordination),
		coordination.WithPartitions(c.Topics.CoordinationPartitions),
		coordination.WithLeaseDuration(c.Lease.Duration),
		coordination.WithRenewInterval(c.Lease.RenewInterval),
		coordination.WithChallengeStagger(c.Lease.ChallengeStagger),
		coordination.WithPollInterval(c.Lease.PollInterval),
		coordination.WithRenewalsInWrites(c.Lease.RenewInterval / 4),
	}
}

// dispatchOptions returns the options of each dispatcher. A commit timing
// the configuration leaves out is left to the dispatcher's own default.
func dispatchOptions(c *config.Config, requests dispatch.RequestSource, tel *telemetry, logger *slog.Logger) []dispatch.Option {
	opts := []dispatch.Option{
		dispatch.WithLogTopic(c.Topics.Log, c.Topics.Partitions),
		dispatch.WithRequestsTopic(c.Topics.Requests, c.Topics.Partitions),
		dispatch.WithRequestSource(requests),
		dispatch.WithSafetyMargin(c.Dispatch.SafetyMargin),
		dispatch.WithDedupWindow(c.Dispatch.DedupWindow),
		dispatch.WithMaxPending(c.Dispatch.MaxPending),
		dispatch.WithMeterProvider(tel.meters),
		dispatch.WithTracerProvider(tel.tracers),
		dispatch.WithLogger(logger),
	}
	for _, t := range []struct {
		d    *time.Duration
		with func(time.Duration) dispatch.Option
	}{
		{c.Dispatch.CommitGap, dispatch.WithCommitGap},
		{c.Dispatch.CommitLinger, dispatch.WithCommitLinger},
		{c.Dispatch.OutcomeLinger, dispatch.WithOutcomeLinger},
	} {
		if t.d != nil {
			opts = append(opts, t.with(*t.d))
		}
	}
	return opts
}

// newLogger builds the process logger on w. A duration is logged as the
// text a person reads and a configuration file takes ("15s"), in both
// formats: the JSON handler would write nanoseconds.
func newLogger(w interface{ Write([]byte) (int, error) }, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationText}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErrorf("--log-format %q: want text or json", format)
}

// durationText is a slog.HandlerOptions.ReplaceAttr that writes a
// time.Duration with its String method.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// The bounds of awaitCluster: each attempt to reach the cluster, and the
// wait between attempts, which doubles from the first to the last.
const (
	joinReachTimeout = 10 * time.Second
	joinRetryFirst   = 500 * time.Millisecond
	joinRetryMax     = 15 * time.Second
)

// awaitCluster blocks until the cluster answers, logging each failed
// attempt at warn level with its cause and the setting to check, so that a
// member that cannot join says why at once instead of after the first
// registration times out. It returns false when ctx ended first.
func (o *RunOptions) awaitCluster(ctx context.Context, kopts []kgo.Opt, logger *slog.Logger) bool {
	setting := "kafka.brokers in " + o.ConfigFile
	wait := joinRetryFirst
	for {
		rctx, cancel := context.WithTimeout(ctx, joinReachTimeout)
		err := reachCluster(rctx, o.cfg.Kafka.Brokers, setting, joinReachTimeout, kopts)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			return true
		}
		attrs := []any{"err", err, "retry_in", wait}
		var ue *UnreachableError
		if errors.As(err, &ue) {
			attrs = append(attrs, "cause", ue.Cause, "setting", ue.Setting)
		}
		logger.Warn("joining: cannot reach the Kafka cluster; trying again", attrs...)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false
		}
		wait = min(2*wait, joinRetryMax)
	}
}
