// Command member runs one member of a role with a dispatcher and recording
// devices, for the dispatch integration tests that kill (SIGKILL) or pause
// (SIGSTOP) a leader in its own process. It runs package member: it competes
// for the role, dispatches while it leads, competes again when it loses the
// role, and on SIGTERM or SIGINT stops intake, drains, and resigns.
//
// It prints one line per change to stdout, which the tests wait for:
//
//	leading term <term> token <token>
//	halted <error>
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/member"
	"github.com/krabka-io/krabka-dispatch/test/recorder"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		os.Exit(1)
	}
}

// redispatchable is a recorder device that declares a redispatch safe.
type redispatchable struct{ *recorder.Device }

func (redispatchable) RedispatchSafe(dispatch.Command) bool { return true }

func run() error {
	var (
		brokers       = flag.String("brokers", "", "comma-separated broker addresses")
		roleName      = flag.String("role", "", "role to compete for")
		memberName    = flag.String("member", "", "member id")
		logTopic      = flag.String("log-topic", dispatch.DefaultLogTopic, "command log topic")
		requestsTopic = flag.String("requests-topic", dispatch.DefaultRequestsTopic, "requests topic")
		partitions    = flag.Int("partitions", dispatch.DefaultTopicPartitions, "partitions of both topics")
		leaseDur      = flag.Duration("lease", 3*time.Second, "lease duration")
		renew         = flag.Duration("renew", time.Second, "renew interval")
		stagger       = flag.Duration("stagger", time.Second, "challenge stagger")
		margin        = flag.Duration("margin", 500*time.Millisecond, "freshness safety margin")
		recorderURL   = flag.String("recorder", "", "URL of the recorder server")
		devices       = flag.String("devices", "", "comma-separated device names to register")
		redispatch    = flag.String("redispatch", "", "comma-separated device names that declare a redispatch safe")
		checkLog      = flag.Bool("check-log", true, "devices read the committed log at each call")
		drain         = flag.Duration("drain", 5*time.Second, "drain timeout on SIGTERM")
	)
	flag.Parse()
	if *brokers == "" || *roleName == "" || *memberName == "" || *recorderURL == "" {
		return errors.New("-brokers, -role, -member and -recorder are required")
	}
	role, err := coordination.NewRole(*roleName)
	if err != nil {
		return err
	}
	memberID, err := coordination.NewMemberID(*memberName)
	if err != nil {
		return err
	}
	lease, err := coordination.NewLeaseConfig(*leaseDur, *renew, *stagger)
	if err != nil {
		return err
	}
	brokerList := strings.Split(*brokers, ",")
	logReader, err := dispatch.NewKafkaLogReader(brokerList)
	if err != nil {
		return err
	}
	logPartition, err := coordination.RolePartition(role, *partitions)
	if err != nil {
		return err
	}
	safe := map[string]bool{}
	for _, name := range strings.Split(*redispatch, ",") {
		safe[name] = name != ""
	}
	registry := dispatch.NewRegistry()
	for _, name := range strings.Split(*devices, ",") {
		if name == "" {
			continue
		}
		dev := recorder.NewDevice(name, *recorderURL, *memberName)
		if *checkLog {
			dev.CheckLog(logReader, coordination.TopicPartition{Topic: *logTopic, Partition: logPartition}, role.String())
		}
		var d dispatch.Device = dev
		if safe[name] {
			d = redispatchable{dev}
		}
		if err := registry.Register(name, d); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	transport, err := coordination.NewKafkaTransport(lease, brokerList...)
	if err != nil {
		return err
	}
	defer transport.Close()
	source, err := dispatch.NewKafkaRequestSource(brokerList)
	if err != nil {
		return err
	}
	defer source.Close()

	m, err := member.New(transport, role, memberID,
		member.WithCoordination(coordination.WithLeaseConfig(lease), coordination.WithPollInterval(100*time.Millisecond)),
		member.WithDispatcher(registry, logReader,
			dispatch.WithLogTopic(*logTopic, *partitions),
			dispatch.WithRequestsTopic(*requestsTopic, *partitions),
			dispatch.WithRequestSource(source),
			dispatch.WithSafetyMargin(*margin),
			dispatch.WithRetryBackoff(50*time.Millisecond, 200*time.Millisecond)),
		member.WithDrainTimeout(*drain),
		member.WithResignTimeout(2*time.Second),
		member.WithEventHandler(printEvent))
	if err != nil {
		return err
	}
	return m.Run(ctx)
}

// printEvent writes the lines the tests wait for.
func printEvent(e member.Event) {
	switch e.Kind {
	case member.EventElected:
		fmt.Printf("leading %s\n", coordination.Authority{Term: e.Term, Token: e.Token})
	case member.EventDeposed:
		fmt.Printf("halted %v\n", e.Err)
	case member.EventResigned:
		fmt.Println("halted: stopped and resigned")
	case member.EventAbandoned:
		fmt.Printf("halted: stopped without resigning: %v\n", e.Err)
	case member.EventCampaignFailed:
		fmt.Fprintln(os.Stderr, "member: acquire:", e.Err)
	}
}
