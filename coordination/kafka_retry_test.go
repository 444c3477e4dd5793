package coordination

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestRetryBackoffDoublesToItsCap(t *testing.T) {
	want := []time.Duration{
		100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, time.Second, time.Second,
	}
	for i, w := range want {
		if got := retryBackoff(i + 1); got != w {
			t.Errorf("retryBackoff(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := retryBackoff(1000); got != DefaultKafkaRetryBackoffMax {
		t.Errorf("retryBackoff(1000) = %v, want the cap %v", got, DefaultKafkaRetryBackoffMax)
	}
	if got := retryBackoff(0); got != DefaultKafkaRetryBackoffMax/10 {
		t.Errorf("retryBackoff(0) = %v, want the first backoff", got)
	}
}

var (
	errPassing = errors.New("passing")
	errFatal   = errors.New("fatal")
)

func isPassing(err error) bool { return errors.Is(err, errPassing) }

func TestRetryReadPausesBetweenRetriableFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		got, err := retryRead(t.Context(), isPassing, func() (int, error) {
			calls++
			if calls < 4 {
				return 0, errPassing
			}
			return 7, nil
		})
		if err != nil || got != 7 {
			t.Fatalf("retryRead = %d, %v; want 7, nil", got, err)
		}
		if elapsed := time.Since(start); elapsed != 3*kafkaReadRetryPause {
			t.Errorf("three retries took %v, want %v", elapsed, 3*kafkaReadRetryPause)
		}
	})
}

func TestRetryReadStopsAtAnErrorThatIsNotRetriable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		_, err := retryRead(t.Context(), isPassing, func() (int, error) {
			calls++
			if calls == 1 {
				return 0, errPassing
			}
			return 0, errFatal
		})
		if !errors.Is(err, errFatal) || calls != 2 {
			t.Fatalf("retryRead after %d calls = %v, want errFatal after 2", calls, err)
		}
	})
}

func TestRetryReadEndsWithTheContextAndTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := retryRead(ctx, isPassing, func() (int, error) { return 0, errPassing })
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errPassing) {
			t.Fatalf("retryRead = %v, want the deadline and the last error", err)
		}
	})
}
