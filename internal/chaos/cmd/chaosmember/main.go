// Command chaosmember is one dispatcher member of a chaos run: it competes for
// a role with package coordination and, while it holds the role, runs a
// dispatch.Dispatcher that takes commands from the requests topic and drives
// the two devices of the run's device server. When the leadership ends it
// competes again; SIGTERM makes it halt, resign and exit.
//
//	chaosmember -member m1 -role chaos-r -devices http://127.0.0.1:PORT \
//	    -log-topic chaos-log -requests-topic chaos-requests
//
// It writes one line per leadership change to standard error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/chaos"
)

// deviceTimeout bounds one call to the device server.
const deviceTimeout = 5 * time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chaosmember:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "comma-separated bootstrap addresses (default $KRABKA_KAFKA_BROKERS)")
	member := flag.String("member", "", "member id")
	roleName := flag.String("role", "", "role")
	devices := flag.String("devices", "", "base URL of the device server")
	logTopic := flag.String("log-topic", dispatch.DefaultLogTopic, "command log topic (one partition)")
	requestsTopic := flag.String("requests-topic", dispatch.DefaultRequestsTopic, "requests topic (one partition)")
	lease := flag.Duration("lease", 4*time.Second, "lease duration")
	renew := flag.Duration("renew", time.Second, "renew interval")
	stagger := flag.Duration("stagger", time.Second, "challenge stagger")
	poll := flag.Duration("poll", 250*time.Millisecond, "poll interval")
	margin := flag.Duration("margin", 1500*time.Millisecond, "dispatch safety margin")
	redispatch := flag.Bool("redispatch", true, "devices declare redispatch after takeover safe")
	flag.Parse()
	if *brokers == "" || *member == "" || *roleName == "" || *devices == "" {
		return errors.New("-brokers, -member, -role and -devices are required")
	}
	role, err := coordination.NewRole(*roleName)
	if err != nil {
		return err
	}
	memberID, err := coordination.NewMemberID(*member)
	if err != nil {
		return err
	}
	config, err := coordination.NewLeaseConfig(*lease, *renew, *stagger)
	if err != nil {
		return err
	}
	addrs := strings.Split(*brokers, ",")
	transport, err := coordination.NewKafkaTransport(config, addrs...)
	if err != nil {
		return err
	}
	defer transport.Close()
	source, err := dispatch.NewKafkaRequestSource(addrs)
	if err != nil {
		return err
	}
	defer source.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("member", *member)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	client := &http.Client{Timeout: deviceTimeout}
	for ctx.Err() == nil {
		l, err := coordination.AcquireLeadership(ctx, transport, role, memberID,
			coordination.WithLeaseConfig(config), coordination.WithPollInterval(*poll))
		if err != nil {
			if ctx.Err() == nil {
				logger.Warn("acquire failed", "err", err)
				time.Sleep(*poll) // a plain pause before the next campaign
			}
			continue
		}
		logger.Warn("leading", "term", l.Term(), "token", l.Token())
		err = lead(ctx, l, addrs, source, client, *devices, *member, *logTopic, *requestsTopic, *margin, *redispatch, logger)
		logger.Warn("leadership ended", "err", err)
		if ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.Background(), *lease)
			_ = l.Resign(rctx)
			cancel()
		}
	}
	return nil
}

// lead runs one dispatcher for one leadership, until the leadership or ctx
// ends.
func lead(ctx context.Context, l *coordination.Leadership, brokers []string, source dispatch.RequestSource,
	client *http.Client, devices, member, logTopic, requestsTopic string, margin time.Duration, redispatch bool, logger *slog.Logger) error {
	registry := dispatch.NewRegistry()
	for _, name := range []string{chaos.FencedDevice, chaos.PlainDevice} {
		dev := &chaos.HTTPDevice{BaseURL: devices, Name: name, Member: member, Client: client, Redispatch: redispatch}
		if err := registry.Register(name, dev); err != nil {
			return err
		}
	}
	logReader, err := dispatch.NewKafkaLogReader(brokers)
	if err != nil {
		return err
	}
	d, err := dispatch.NewDispatcher(l, registry, logReader,
		dispatch.WithLogTopic(logTopic, 1),
		dispatch.WithRequestsTopic(requestsTopic, 1),
		dispatch.WithRequestSource(source),
		dispatch.WithSafetyMargin(margin),
		dispatch.WithLogger(logger),
	)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}
