package dispatch

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// doubling returns the waits between two attempts of a retry loop: first,
// then twice the previous wait, up to max, without jitter. The waits of one
// dispatcher are few and spread by the devices' and brokers' own latency.
func doubling(first, max time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: first, Multiplier: 2, MaxInterval: max}
}
