package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
	"github.com/krabka-io/krabka-dispatch/internal/member"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// node is one member of the demo with everything it owns: its Kafka
// clients, its devices, its HTTP server.
type node struct {
	id  string
	url string
	ln  net.Listener
	srv *http.Server

	transport *coordination.KafkaTransport
	requests  *dispatch.KafkaRequestSource
	registry  *dispatch.Registry
	member    *member.Member
	meters    *sdkmetric.MeterProvider

	cancel context.CancelFunc
	done   chan struct{}
	served chan struct{}
}

// newNode opens the node's listener, so every URL is known before any
// member starts.
func newNode(id string) (*node, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &node{id: id, ln: ln, url: "http://" + ln.Addr().String()}, nil
}

// build creates the node's clients, devices and member.
func (n *node) build(o *Options, w *world, tl *timeline, peers map[string]string, onEvent func(member.Event)) error {
	role, _ := coordination.NewRole(Role)
	id, _ := coordination.NewMemberID(n.id)
	lease, err := coordination.NewLeaseConfig(o.LeaseDuration, o.RenewInterval, o.ChallengeStagger)
	if err != nil {
		return err
	}
	n.transport, err = coordination.NewKafkaTransport(lease, w.brokers...)
	if err != nil {
		return err
	}
	logReader, err := dispatch.NewKafkaLogReader(w.brokers)
	if err != nil {
		return err
	}
	n.requests, err = dispatch.NewKafkaRequestSource(w.brokers)
	if err != nil {
		return err
	}
	var metrics http.Handler
	n.meters, metrics, err = newMetrics()
	if err != nil {
		return err
	}
	n.registry = dispatch.NewRegistry()
	valve, err := mqtt.New(mqtt.Config{Brokers: []string{w.mqttURL}, Topic: cmdTopic, ClientID: "demo-" + n.id, Verifier: w.valveKeys})
	if err != nil {
		return err
	}
	if err := n.registry.Register("valve-1", &recorder{Device: valve, name: "valve-1", member: n.id, tl: tl}); err != nil {
		return err
	}
	pump, err := modbus.New(modbus.Config{
		Transport: modbus.TCP, Address: w.modbus.Addr(), Unit: 1,
		Fence:   &modbus.Fence{Address: 100},
		Actions: map[modbus.Action]modbus.ActionConfig{modbus.WriteRegister: {Verify: true}},
	})
	if err != nil {
		return err
	}
	if err := n.registry.Register("pump-1", &recorder{Device: pump, name: "pump-1", member: n.id, tl: tl}); err != nil {
		return err
	}
	n.member, err = member.New(member.Config{
		Transport: n.transport,
		Role:      role,
		Member:    id,
		Coordination: []coordination.Option{
			coordination.WithLeaseConfig(lease),
			coordination.WithPollInterval(o.PollInterval),
			coordination.WithPartitions(partitions),
		},
		PollInterval: o.PollInterval,
		Registry:     n.registry,
		Log:          logReader,
		Dispatch: []dispatch.Option{
			dispatch.WithLogTopic(dispatch.DefaultLogTopic, partitions),
			dispatch.WithRequestsTopic(dispatch.DefaultRequestsTopic, partitions),
			dispatch.WithRequestSource(n.requests),
			dispatch.WithSafetyMargin(o.LeaseDuration / 4),
			withLogger(o.Logger),
			dispatch.WithMeterProvider(n.meters),
		},
		MeterProvider:   n.meters,
		LogPartitions:   partitions,
		Peers:           peers,
		ShutdownTimeout: time.Second,
		OnEvent:         onEvent,
		Logger:          o.Logger,
	})
	if err != nil {
		return err
	}
	n.srv = &http.Server{Handler: httpapi.NewHandler(n.member, httpapi.Options{Metrics: metrics}), ReadHeaderTimeout: 5 * time.Second}
	return nil
}

// start serves HTTP and runs the member until stop.
func (n *node) start(ctx context.Context) {
	ctx, n.cancel = context.WithCancel(ctx)
	n.done = make(chan struct{})
	n.served = make(chan struct{})
	go func() {
		defer close(n.served)
		if err := n.srv.Serve(n.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return
		}
	}()
	go func() {
		defer close(n.done)
		_ = n.member.Run(ctx)
	}()
}

// crash cuts the node off the cluster first, as a power loss or a
// partition does, so it can neither renew nor resign, and then stops it.
func (n *node) crash() {
	n.transport.Close()
	n.stop()
}

// stop ends the member (it resigns if it leads and can still reach the
// cluster), the HTTP server, and every client of the node, and waits.
func (n *node) stop() {
	if n.cancel != nil {
		n.cancel()
		<-n.done
		n.cancel = nil
	}
	if n.served != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = n.srv.Shutdown(ctx)
		cancel()
		<-n.served
		n.served = nil
	} else if n.ln != nil {
		_ = n.ln.Close()
	}
	n.close()
}

// close releases the clients; idempotent.
func (n *node) close() {
	if n.registry != nil {
		_ = n.registry.Close()
		n.registry = nil
	}
	if n.requests != nil {
		n.requests.Close()
		n.requests = nil
	}
	if n.transport != nil {
		n.transport.Close()
		n.transport = nil
	}
	shutdownMetrics(n.meters)
	n.meters = nil
}

func (n *node) String() string { return fmt.Sprintf("%s (%s)", n.id, n.url) }

// withLogger passes a logger to the dispatcher when there is one.
func withLogger(l *slog.Logger) dispatch.Option {
	if l == nil {
		return nil
	}
	return dispatch.WithLogger(l)
}
