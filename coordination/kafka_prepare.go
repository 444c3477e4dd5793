package coordination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A prepared client is a role's transactional client that PrepareEpoch
// created and connected, and that no InitProducerId has touched yet.
//
// Its connections idle between the preparation and the handover, which may
// be minutes apart. franz-go reaps a connection idle for its ConnIdleTimeout
// (30s by default) and Kafka one idle for connections.max.idle.ms (10 minutes
// by default), so the prepared client idles up to preparedConnIdle and is
// prepared again once older than preparedMaxAge.
const (
	preparedConnIdle = 5 * time.Minute
	preparedMaxAge   = 4 * time.Minute
)

// preparedClient is a client that PrepareEpoch left for AcquireEpoch.
type preparedClient struct {
	client *kgo.Client
	at     time.Time
}

// PrepareEpoch gets the transport ready to take the epoch of role, without
// taking it: it creates the role's transactional client and opens its
// connections (the brokers' metadata, one connection to every broker, the
// transaction coordinator among them), so that a later AcquireEpoch of the
// role costs its FindCoordinator and InitProducerId and no connection
// set-up. It sends no request about the role: it fences no one, and the
// holder of the role notices nothing.
//
// [AcquireLeadership] calls it while this member is the first in line for a
// role that another member holds, so a handover or a failover does not pay
// for the connections after the lease ends. A prepared client that
// AcquireEpoch never takes stays open, up to one connection per broker,
// until it is prepared again, the role is taken, or the transport is closed.
// A call for a role whose client is prepared and younger than a few minutes,
// or whose epoch this transport holds, returns at once.
func (t *KafkaTransport) PrepareEpoch(ctx context.Context, role Role) error {
	if role.name == "" {
		return errors.New("coordination: prepare epoch: role is empty")
	}
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return errTransportClosed
	case t.producers[role.name] != nil:
		t.mu.Unlock()
		return nil
	}
	if p := t.prepared[role.name]; p != nil && time.Since(p.at) < preparedMaxAge {
		t.mu.Unlock()
		return nil
	}
	t.mu.Unlock()

	ctx, cancel := t.bound(ctx)
	defer cancel()
	client, err := kgo.NewClient(append(t.ProducerOptions(role.name), kgo.ConnIdleTimeout(preparedConnIdle))...)
	if err != nil {
		return fmt.Errorf("coordination: prepare epoch of role %s: %w", role, err)
	}
	if err := connect(ctx, client); err != nil {
		client.Close()
		return fmt.Errorf("coordination: prepare epoch of role %s: %w", role, err)
	}

	t.mu.Lock()
	if t.closed || t.producers[role.name] != nil {
		// Closed, or the role was taken while the client connected.
		t.mu.Unlock()
		client.Close()
		return nil
	}
	old := t.prepared[role.name]
	t.prepared[role.name] = &preparedClient{client: client, at: time.Now()}
	t.mu.Unlock()
	if old != nil {
		old.client.Close()
	}
	return nil
}

// takePrepared removes and returns the prepared client of role, or nil. The
// caller holds t.mu.
func (t *KafkaTransport) takePrepared(role Role) *kgo.Client {
	p := t.prepared[role.name]
	if p == nil {
		return nil
	}
	delete(t.prepared, role.name)
	if time.Since(p.at) >= preparedMaxAge+preparedConnIdle {
		// Its connections are gone; it is no better than a new client.
		p.client.Close()
		return nil
	}
	return p.client
}

// connect opens the connections that an InitProducerId and the first
// transaction need: it loads the brokers' metadata and sends an ApiVersions
// request to every broker, which opens the connection that the coordinator
// requests and the metadata requests of the first produce use. Which broker
// coordinates the role does not matter, and franz-go keeps no answer of a
// FindCoordinator that it did not send itself.
func connect(ctx context.Context, client *kgo.Client) error {
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	metaResp, err := meta.RequestWith(ctx, client)
	if err != nil {
		return fmt.Errorf("load the brokers: %w", err)
	}
	for _, b := range metaResp.Brokers {
		versions := kmsg.NewPtrApiVersionsRequest()
		if _, err := versions.RequestWith(ctx, client.Broker(int(b.NodeID))); err != nil {
			return fmt.Errorf("connect to broker %d: %w", b.NodeID, err)
		}
	}
	return nil
}
