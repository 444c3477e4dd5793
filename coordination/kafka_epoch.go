package coordination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// roleProducer is the transactional client of one role in one transport.
//
// The slot admits one transaction at a time. Once ended is set the client is
// closed and the producer refuses every write with that error; a later
// AcquireEpoch replaces the whole producer.
type roleProducer struct {
	role   Role
	client *kgo.Client
	slot   chan struct{}

	mu sync.Mutex
	// token is the token the coordinator holds for this producer: the minted
	// one, then the one each commit or abort returns under transactions v2.
	token FencingToken
	// retired holds the producer ids this producer held before its epoch ran
	// out and the coordinator rotated it to a new one, so a token of an old
	// id is known to be stale rather than foreign. One id is added per
	// exhaustion, about every 32,767 transactions.
	retired []int64
	// ended is the reason the client was closed, nil while it is open.
	ended error
	// settled is closed when the settle of the last transaction ends
	// (kafka_settle.go), nil while none ran. noSettle is set once the
	// coordinator refused a settle's question: the producer settles no
	// more.
	settled  chan struct{}
	noSettle bool
}

func newRoleProducer(role Role, client *kgo.Client, token FencingToken) *roleProducer {
	return &roleProducer{role: role, client: client, slot: make(chan struct{}, 1), token: token}
}

// end closes the client for good with reason. The first reason wins.
func (p *roleProducer) end(reason error) {
	p.mu.Lock()
	if p.ended != nil {
		p.mu.Unlock()
		return
	}
	p.ended = reason
	p.mu.Unlock()
	p.client.Close()
}

// state returns the token and the reason the producer ended, or nil.
func (p *roleProducer) state() (FencingToken, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.token, p.ended
}

// setToken records the token the coordinator holds after a transaction.
func (p *roleProducer) setToken(token FencingToken) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if token.producerID != p.token.producerID {
		p.retired = append(p.retired, p.token.producerID)
	}
	p.token = token
}

// held reports whether this producer held token before its current one: an
// earlier epoch of its current producer id, or any epoch of an id it was
// rotated away from.
func (p *roleProducer) held(token FencingToken) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if token.producerID == p.token.producerID {
		return token.producerEpoch < p.token.producerEpoch
	}
	return slices.Contains(p.retired, token.producerID)
}

// acquire takes the transaction slot, or returns the error of ctx.
func (p *roleProducer) acquire(ctx context.Context) error {
	select {
	case p.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *roleProducer) release() { <-p.slot }

// AcquireEpoch creates the transactional producer of the role
// (transactional.id = the role name, transaction.timeout.ms = the lease
// duration) and runs its InitProducerId at once. The transaction coordinator
// mints a new epoch, aborts any open transaction of the previous holder, and
// fences it: every later write of an older token fails. It returns the new
// token.
//
// AcquireEpoch is the only call of the transport that runs an
// InitProducerId. It takes the client that [KafkaTransport.PrepareEpoch]
// connected for the role, if there is one, and creates one otherwise. A
// producer of the same role that this transport held before is closed first,
// so a [Leadership] that wrote through it ends with an error that wraps
// [ErrFenced] at its next write.
//
// On an error no producer of the role remains in the transport. Cancelling
// ctx abandons the wait, and the InitProducerId may still land: the
// coordinator may have fenced the previous holder all the same.
func (t *KafkaTransport) AcquireEpoch(ctx context.Context, role Role) (FencingToken, error) {
	if role.name == "" {
		return NoEpoch, errors.New("coordination: acquire epoch: role is empty")
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()

	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return NoEpoch, errTransportClosed
	}
	old := t.producers[role.name]
	delete(t.producers, role.name)
	client := t.takePrepared(role)
	t.mu.Unlock()
	if old != nil {
		old.close(fmt.Errorf("coordination: role %s: a later AcquireEpoch in this process took the role: %w", role, ErrFenced))
	}

	if client == nil {
		var err error
		if client, err = kgo.NewClient(t.ProducerOptions(role.name)...); err != nil {
			return NoEpoch, fmt.Errorf("coordination: acquire epoch of role %s: %w", role, err)
		}
	}
	id, epoch, err := client.ProducerID(ctx)
	if err != nil {
		client.Close()
		if isFenceErr(err) {
			err = fmt.Errorf("%w: %w", ErrFenced, err)
		}
		return NoEpoch, fmt.Errorf("coordination: acquire epoch of role %s: init producer id: %w", role, err)
	}
	token, err := NewFencingToken(id, epoch)
	if err != nil {
		client.Close()
		return NoEpoch, fmt.Errorf("coordination: acquire epoch of role %s: the coordinator answered producer %d epoch %d: %w", role, id, epoch, err)
	}

	p := newRoleProducer(role, client, token)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		client.Close()
		return NoEpoch, errTransportClosed
	}
	if racing := t.producers[role.name]; racing != nil {
		// Two AcquireEpoch calls of one role ran at once; the coordinator
		// ordered them, and the later token wins here too.
		if racingToken, _ := racing.state(); racingToken.Compare(token) > 0 {
			t.mu.Unlock()
			client.Close()
			return NoEpoch, fmt.Errorf("coordination: acquire epoch of role %s: a concurrent AcquireEpoch in this process minted %s after %s: %w", role, racingToken, token, ErrFenced)
		}
		racing.end(fmt.Errorf("coordination: role %s: a later AcquireEpoch in this process took the role: %w", role, ErrFenced))
	}
	t.producers[role.name] = p
	// A PrepareEpoch that was connecting while this call ran may have left
	// a client behind; the role needs none while it is held.
	stale := t.prepared[role.name]
	delete(t.prepared, role.name)
	t.mu.Unlock()
	if stale != nil {
		stale.client.Close()
	}
	return token, nil
}

// DescribeEpoch reads the producer id and epoch that the transaction
// coordinator holds for the role, with one DescribeTransactions request. It
// joins no group, creates no producer, and takes no epoch. It reports false
// and [NoEpoch] for a role that no member has ever taken, and for one whose
// transactional id the coordinator expired.
func (t *KafkaTransport) DescribeEpoch(ctx context.Context, role Role) (FencingToken, bool, error) {
	if role.name == "" {
		return NoEpoch, false, errors.New("coordination: describe epoch: role is empty")
	}
	if err := t.open(); err != nil {
		return NoEpoch, false, err
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	for {
		token, held, err := t.describeEpochOnce(ctx, role)
		if err == nil || !retriableErr(err) {
			return token, held, err
		}
		// The coordinator is loading or moving, or its broker went away;
		// ask again.
		select {
		case <-ctx.Done():
			return NoEpoch, false, fmt.Errorf("coordination: describe epoch of role %s: %w (last: %w)", role, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (t *KafkaTransport) describeEpochOnce(ctx context.Context, role Role) (FencingToken, bool, error) {
	described, err := t.admin.DescribeTransactions(ctx, role.name)
	if err != nil {
		return NoEpoch, false, fmt.Errorf("coordination: describe epoch of role %s: %w", role, err)
	}
	d, err := described.On(role.name, nil)
	if err == nil {
		err = d.Err
	}
	switch {
	case errors.Is(err, kerr.TransactionalIDNotFound):
		return NoEpoch, false, nil
	case err != nil:
		return NoEpoch, false, fmt.Errorf("coordination: describe epoch of role %s: %w", role, err)
	case d.State == "Dead" || d.ProducerID < 0 || d.ProducerEpoch < 0:
		return NoEpoch, false, nil
	}
	token, err := NewFencingToken(d.ProducerID, d.ProducerEpoch)
	if err != nil {
		return NoEpoch, false, fmt.Errorf("coordination: describe epoch of role %s: %w", role, err)
	}
	return token, true, nil
}

// retriableErr reports whether a request may succeed when sent again: a
// broker error that Kafka marks retriable, or a transport error such as a
// broker that refused the connection. A cancelled or expired context and a
// closed client are final.
func retriableErr(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return true
}

// isFenceErr reports whether the broker refused a request because a newer
// epoch holds the transactional id: error codes 47 INVALID_PRODUCER_EPOCH
// and 90 PRODUCER_FENCED.
func isFenceErr(err error) bool {
	return errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced)
}
