package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Producer ids and epochs of the real cluster's transaction coordinators, as
// Kafka 4.1 hands them out.
//
// A transactional id keeps one producer id while its epoch grows: every bare
// InitProducerId (no producer id and epoch in the request) bumps it by one,
// and under transactions v2 so does every commit and every abort. Epoch
// [ExhaustedEpoch] is the last one a producer may use: an InitProducerId at
// that epoch, or an EndTxn under transactions v2, moves the id to a new
// producer id with epoch 0, which the coordinator takes from the block of
// producer ids of its own broker. The controller grants each broker blocks of
// [ProducerIDBlockSize] ids in increasing order, so the new id is lower than
// the old one when the coordinator's broker holds an older block than the one
// the old id came from.
const (
	// ExhaustedEpoch is the epoch at which Kafka rotates a transactional id
	// to a new producer id (TransactionMetadata.isEpochExhausted:
	// epoch >= Short.MaxValue - 1).
	ExhaustedEpoch = math.MaxInt16 - 1

	// ProducerIDBlockSize is the number of producer ids in one block that
	// the controller grants a broker; blocks start at multiples of it.
	ProducerIDBlockSize = 1000
)

// txnTimeout bounds one request of the helpers below.
const txnTimeout = 30 * time.Second

// bumpWindow is the number of InitProducerId requests that [BumpEpoch] keeps
// in flight on its one connection to the coordinator. The broker reads the
// next request of a connection only after it answered the one before, so
// they apply one after another; the window only hides the round trip.
const bumpWindow = 8

// rawClient returns a plain client of the brokers, closed at the end of the
// test, for requests that the helpers build by hand.
func rawClient(t testing.TB, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RetryTimeout(txnTimeout))
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// BrokerNumber returns the number (1 to [NumBrokers]) of the broker of the
// real cluster that listens on host and port, as a FindCoordinator or
// Metadata response names it.
func BrokerNumber(host string, port int32) (int, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	for n := 1; n <= NumBrokers; n++ {
		if BrokerAddr(n) == addr {
			return n, nil
		}
	}
	return 0, fmt.Errorf("kafkatest: %s is no broker of the real cluster", addr)
}

// TxnCoordinator returns the number (1 to [NumBrokers]) of the broker that
// coordinates transactionalID now: the leader of its partition of
// __transaction_state. It asks until a broker answers, up to a timeout, so a
// test may call it while the coordinator moves.
func TxnCoordinator(t testing.TB, brokers []string, transactionalID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	n, err := txnCoordinator(ctx, rawClient(t, brokers), transactionalID, 0)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	return n
}

// WaitTxnCoordinatorMoved waits until a broker other than from coordinates
// transactionalID and has loaded its state, and returns that broker's number.
// A test calls it after it killed broker from.
func WaitTxnCoordinatorMoved(t testing.TB, brokers []string, transactionalID string, from int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	cl := rawClient(t, brokers)
	n, err := txnCoordinator(ctx, cl, transactionalID, from)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	// The new coordinator answers FindCoordinator before it has loaded the
	// transactional ids of the partition; DescribeTransactions waits for
	// the load.
	if err := waitTxnLoaded(ctx, cl, n, transactionalID); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	return n
}

// txnCoordinator asks FindCoordinator until a broker other than not (0: any)
// coordinates transactionalID.
func txnCoordinator(ctx context.Context, cl *kgo.Client, transactionalID string, not int) (int, error) {
	var last error
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1 // transaction
		req.CoordinatorKeys = []string{transactionalID}
		resp, err := req.RequestWith(ctx, cl)
		switch {
		case err != nil:
			last = err
		case len(resp.Coordinators) != 1:
			last = fmt.Errorf("FindCoordinator answered %d coordinators for one key", len(resp.Coordinators))
		default:
			c := resp.Coordinators[0]
			if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
				last = err
				break
			}
			n, err := BrokerNumber(c.Host, c.Port)
			if err != nil {
				return 0, err
			}
			if n != not {
				return n, nil
			}
			last = fmt.Errorf("broker %d still coordinates %s", n, transactionalID)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("find the coordinator of %s: %w (last: %v)", transactionalID, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// waitTxnLoaded asks broker n with DescribeTransactions until it answers for
// transactionalID without a coordinator error.
func waitTxnLoaded(ctx context.Context, cl *kgo.Client, n int, transactionalID string) error {
	var last error
	for {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{transactionalID}
		resp, err := req.RequestWith(ctx, cl.Broker(n))
		switch {
		case err != nil:
			last = err
		case len(resp.TransactionStates) != 1:
			last = fmt.Errorf("DescribeTransactions answered %d states for one id", len(resp.TransactionStates))
		default:
			last = kerr.ErrorForCode(resp.TransactionStates[0].ErrorCode)
			if last == nil || errors.Is(last, kerr.TransactionalIDNotFound) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for broker %d to load %s: %w (last: %v)", n, transactionalID, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// ProducerIDEpoch is a producer id and epoch of a transactional id.
type ProducerIDEpoch struct {
	ProducerID int64
	Epoch      int16
}

// String writes the producer_id:epoch form.
func (p ProducerIDEpoch) String() string { return fmt.Sprintf("%d:%d", p.ProducerID, p.Epoch) }

// BumpEpoch moves the epoch of transactionalID to target with bare
// InitProducerId requests (no producer id and epoch in the request, as a new
// producer sends), each of which bumps the epoch by one, and returns the
// producer id and epoch the coordinator then holds. A transactional id that
// does not exist yet starts at epoch 0 of a producer id from the
// coordinator's block. It is how a test reaches the end of a producer's
// epochs in seconds, where commits would take hours.
//
// Every request fences the producer that held the id before, and aborts its
// open transaction. The requests go to the coordinator of transactionalID on
// one connection, [bumpWindow] at a time; a request that a broker refuses
// because the coordinator moved goes again to the new one. The target may be
// [ExhaustedEpoch] at most: the next InitProducerId, commit or abort there
// rotates the producer id. It fails the test when another client bumps the
// id at the same time, and logs its progress every few thousand epochs.
func BumpEpoch(t testing.TB, brokers []string, transactionalID string, target int16) ProducerIDEpoch {
	t.Helper()
	if target < 0 || target > ExhaustedEpoch {
		t.Fatalf("kafkatest: bump epoch of %s: target %d is not in 0..%d", transactionalID, target, ExhaustedEpoch)
	}
	cl := rawClient(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	var (
		mu   sync.Mutex
		node = TxnCoordinator(t, brokers, transactionalID)
	)
	// bump sends one InitProducerId to the coordinator. A request that
	// another broker refused because the coordinator moved, or is loading,
	// did not apply; it is sent again to the coordinator of the moment.
	bump := func() (ProducerIDEpoch, error) {
		for {
			mu.Lock()
			n := node
			mu.Unlock()
			got, err := initProducerID(ctx, cl.Broker(n), &transactionalID)
			if !notApplied(err) {
				return got, err
			}
			moved, ferr := txnCoordinator(ctx, cl, transactionalID, 0)
			if ferr != nil {
				return got, fmt.Errorf("%w; then: %w", err, ferr)
			}
			mu.Lock()
			if node != moved {
				t.Logf("kafkatest: the coordinator of %s moved from broker %d to broker %d", transactionalID, node, moved)
				node = moved
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
				return got, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
			case <-time.After(pollInterval):
			}
		}
	}

	first, err := bump()
	if err != nil {
		t.Fatalf("kafkatest: bump epoch of %s: %v", transactionalID, err)
	}
	if first.Epoch > target {
		t.Fatalf("kafkatest: bump epoch of %s: the epoch is %s already, above %d", transactionalID, first, target)
	}

	// Issue exactly the bumps that remain, from bumpWindow goroutines on
	// the connection to the coordinator; each answer is one epoch.
	var (
		issued  = int(first.Epoch)
		last    = first
		failure error
		logged  = int(first.Epoch) / 5000
	)
	var wg sync.WaitGroup
	for range bumpWindow {
		wg.Go(func() {
			for {
				mu.Lock()
				if failure != nil || issued >= int(target) {
					mu.Unlock()
					return
				}
				issued++
				mu.Unlock()
				got, err := bump()
				mu.Lock()
				switch {
				case err != nil:
					failure = cmpErr(failure, err)
				case got.ProducerID != first.ProducerID:
					failure = cmpErr(failure, fmt.Errorf("the producer id moved from %s to %s", first, got))
				case got.Epoch > last.Epoch:
					last = got
					if int(got.Epoch)/5000 > logged {
						logged = int(got.Epoch) / 5000
						t.Logf("kafkatest: %s at epoch %d after %v", transactionalID, got.Epoch, time.Since(start).Round(time.Millisecond))
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	switch {
	case failure != nil:
		t.Fatalf("kafkatest: bump epoch of %s to %d: %v", transactionalID, target, failure)
	case last.Epoch != target:
		t.Fatalf("kafkatest: bump epoch of %s to %d: ended at %s; another client bumped it too", transactionalID, target, last)
	}
	t.Logf("kafkatest: %s bumped from %s to %s in %v", transactionalID, first, last, time.Since(start).Round(time.Millisecond))
	return last
}

// notApplied reports whether the coordinator refused an InitProducerId
// without applying it: it is not the coordinator (any more), it is still
// loading the transactional ids, or another transition of the id is in
// flight.
func notApplied(err error) bool {
	return errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) ||
		errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.ConcurrentTransactions)
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// initProducerID sends one InitProducerId, bare: producer id and epoch -1,
// for transactionalID (nil: an idempotent producer's).
func initProducerID(ctx context.Context, r kmsg.Requestor, transactionalID *string) (ProducerIDEpoch, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = transactionalID
	req.TransactionTimeoutMillis = int32(txnTimeout / time.Millisecond)
	req.ProducerID = -1
	req.ProducerEpoch = -1
	ctx, cancel := context.WithTimeout(ctx, txnTimeout)
	defer cancel()
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return ProducerIDEpoch{}, fmt.Errorf("init producer id: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return ProducerIDEpoch{}, fmt.Errorf("init producer id: %w", err)
	}
	return ProducerIDEpoch{ProducerID: resp.ProducerID, Epoch: resp.ProducerEpoch}, nil
}

// MintProducerID takes one producer id from the block of broker n with an
// idempotent producer's InitProducerId, and returns it. A broker that holds
// no block yet asks the controller for one.
func MintProducerID(t testing.TB, brokers []string, n int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), txnTimeout)
	defer cancel()
	id, err := mintProducerID(ctx, rawClient(t, brokers), n)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	return id
}

func mintProducerID(ctx context.Context, cl *kgo.Client, n int) (int64, error) {
	for {
		got, err := initProducerID(ctx, cl.Broker(n), nil)
		if err == nil {
			return got.ProducerID, nil
		}
		// A broker whose block ran out answers
		// COORDINATOR_LOAD_IN_PROGRESS until the controller granted the
		// next one.
		if !errors.Is(err, kerr.CoordinatorLoadInProgress) {
			return 0, fmt.Errorf("mint a producer id at broker %d: %w", n, err)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("mint a producer id at broker %d: %w (last: %w)", n, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// RaiseProducerIDBlock makes broker n hand out producer ids from a block
// above every block that the other brokers hold: it has each other broker
// take one id, so each holds a block, then takes ids at broker n until they
// come from a new block, which the controller grants above every block it
// granted before. It returns the first id of that block.
//
// A transactional id that broker n coordinates and that takes its first
// producer id afterwards then moves to a lower producer id when it rotates at
// another broker, as long as that broker has not used up its block in the
// meantime (a thousand new producers).
func RaiseProducerIDBlock(t testing.TB, brokers []string, n int) int64 {
	t.Helper()
	cl := rawClient(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	var others []int64
	for m := 1; m <= NumBrokers; m++ {
		if m == n {
			continue
		}
		id, err := mintProducerID(ctx, cl, m)
		if err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
		others = append(others, id)
	}
	first, err := mintProducerID(ctx, cl, n)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	id := first
	for taken := 1; id/ProducerIDBlockSize == first/ProducerIDBlockSize; taken++ {
		if taken > 2*ProducerIDBlockSize {
			t.Fatalf("kafkatest: broker %d handed out %d producer ids from %d to %d and no new block", n, taken, first, id)
		}
		if id, err = mintProducerID(ctx, cl, n); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
	}
	for _, other := range others {
		if other >= id {
			t.Fatalf("kafkatest: broker %d moved to the block of %d, and another broker hands out %d", n, id, other)
		}
	}
	t.Logf("kafkatest: broker %d moved from producer id %d to the block of %d; the other brokers hand out %v", n, first, id, others)
	return id
}
