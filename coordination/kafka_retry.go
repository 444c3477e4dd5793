package coordination

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// kafkaReadRetryPause is the pause before a read of a partition, or of its
// start offset, is tried again after a leader move or a broker that went
// away.
const kafkaReadRetryPause = 50 * time.Millisecond

// retryBackoff is the backoff of the transport's clients: from a tenth of
// DefaultKafkaRetryBackoffMax, doubling, to DefaultKafkaRetryBackoffMax,
// without jitter. tries counts from 1.
func retryBackoff(tries int) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval: DefaultKafkaRetryBackoffMax / 10,
		Multiplier:      2,
		MaxInterval:     DefaultKafkaRetryBackoffMax,
	}
	wait := b.NextBackOff()
	for i := 1; i < tries && wait < b.MaxInterval; i++ {
		wait = b.NextBackOff()
	}
	return wait
}

// retryRead calls read until it succeeds or fails with an error that
// retriable rejects, pausing kafkaReadRetryPause between calls, for as long
// as ctx allows. When ctx ends first, the error wraps ctx's error and the
// last one of read.
func retryRead[T any](ctx context.Context, retriable func(error) bool, read func() (T, error)) (T, error) {
	var last error
	permanent := false
	v, err := backoff.Retry(ctx, func() (T, error) {
		v, err := read()
		if err != nil && !retriable(err) {
			permanent = true
			return v, backoff.Permanent(err)
		}
		last = err
		return v, err
	}, backoff.WithBackOff(backoff.NewConstantBackOff(kafkaReadRetryPause)), backoff.WithMaxElapsedTime(0))
	if err != nil && !permanent && last != nil && ctx.Err() != nil {
		var zero T
		return zero, fmt.Errorf("%w (last: %w)", ctx.Err(), last)
	}
	return v, err
}
