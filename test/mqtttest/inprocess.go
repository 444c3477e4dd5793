package mqtttest

import (
	"log/slog"
	"testing"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// InProcess is an MQTT broker inside the test process, listening on a
// loopback port and accepting every client.
type InProcess struct {
	// Addr is the host:port the broker listens on.
	Addr     string
	server   *mochi.Server
	listener *listeners.TCP
	subs     int
}

// URL returns the tcp:// URL of the broker.
func (b *InProcess) URL() string { return "tcp://" + b.Addr }

// Close stops the broker and drops its clients. The test's cleanup calls
// it too; a second call does nothing.
func (b *InProcess) Close() {
	if b.server == nil {
		return
	}
	// mochi's own Close lists the listener's clients with
	// Clients.GetByListener, which read-locks the client map twice and
	// deadlocks when a disconnecting client's Delete asks for the write lock
	// in between (mochi-mqtt/server issue 488): a test hung in its cleanup.
	// Closing the listener first, with a closer that reads the map once,
	// stops new connections and leaves the server's Close no client to list.
	b.listener.Close(b.dropClients)
	_ = b.server.Close()
	b.server = nil
}

// dropClients disconnects the clients of listener.
func (b *InProcess) dropClients(listener string) {
	for _, cl := range b.server.Clients.GetAll() {
		if cl.Net.Listener == listener && !cl.Closed() {
			_ = b.server.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
}

// StartInProcess starts an in-process broker on addr, such as
// "127.0.0.1:0" for a free port or the Addr of a closed InProcess to bring
// one back on the same port. It is closed at the test's cleanup.
func StartInProcess(t testing.TB, addr string) *InProcess {
	t.Helper()
	server := mochi.New(&mochi.Options{
		InlineClient: true,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err := server.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatalf("mqtttest: allow hook: %v", err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "tcp", Address: addr})
	if err := server.AddListener(l); err != nil {
		t.Fatalf("mqtttest: listen on %s: %v", addr, err)
	}
	if err := server.Serve(); err != nil {
		t.Fatalf("mqtttest: serve: %v", err)
	}
	b := &InProcess{Addr: l.Address(), server: server, listener: l}
	t.Cleanup(b.Close)
	return b
}

// Subscribe calls fn, on the broker's own goroutine, for each message on
// a topic matching filter. fn must not block.
func (b *InProcess) Subscribe(t testing.TB, filter string, fn func(topic string, payload []byte)) {
	t.Helper()
	b.subs++
	err := b.server.Subscribe(filter, b.subs, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
		fn(pk.TopicName, pk.Payload)
	})
	if err != nil {
		t.Fatalf("mqtttest: subscribe %s: %v", filter, err)
	}
}

// Publish publishes payload on topic at QoS 1 from the broker itself. It
// may be called from a Subscribe callback.
func (b *InProcess) Publish(topic string, payload []byte) error {
	return b.server.Publish(topic, payload, false, 1)
}
