// Command chaosmember is one dispatcher member of a chaos run: it runs
// package member, which competes for a role and, while it holds the role,
// runs a dispatch.Dispatcher that takes commands from the requests topic and
// drives the two devices of the run's device server. When the leadership ends
// it competes again; SIGTERM makes it stop intake, drain, resign and exit.
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
	krabkamember "github.com/krabka-io/krabka-dispatch/member"
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
	drain := flag.Duration("drain", 5*time.Second, "drain timeout on SIGTERM")
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

	client := &http.Client{Timeout: deviceTimeout}
	registry := dispatch.NewRegistry()
	for _, name := range []string{chaos.FencedDevice, chaos.PlainDevice} {
		dev := &chaos.HTTPDevice{BaseURL: *devices, Name: name, Member: *member, Client: client, Redispatch: *redispatch}
		if err := registry.Register(name, dev); err != nil {
			return err
		}
	}
	logReader, err := dispatch.NewKafkaLogReader(addrs)
	if err != nil {
		return err
	}
	m, err := krabkamember.New(transport, role, memberID,
		krabkamember.WithCoordination(coordination.WithLeaseConfig(config), coordination.WithPollInterval(*poll)),
		krabkamember.WithDispatcher(registry, logReader,
			dispatch.WithLogTopic(*logTopic, 1),
			dispatch.WithRequestsTopic(*requestsTopic, 1),
			dispatch.WithRequestSource(source),
			dispatch.WithSafetyMargin(*margin),
			dispatch.WithLogger(logger)),
		krabkamember.WithCampaignBackoff(*poll, 4**poll),
		krabkamember.WithDrainTimeout(*drain),
		krabkamember.WithResignTimeout(*lease),
		krabkamember.WithLogger(logger),
		krabkamember.WithEventHandler(func(e krabkamember.Event) {
			switch e.Kind {
			case krabkamember.EventElected:
				logger.Warn("leading", "term", e.Term, "token", e.Token)
			case krabkamember.EventDeposed, krabkamember.EventResigned, krabkamember.EventAbandoned:
				logger.Warn("leadership ended", "event", e.Kind.String(), "err", e.Err)
			}
		}))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return m.Run(ctx)
}
