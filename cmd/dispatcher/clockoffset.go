package main

import (
	"fmt"
	"os"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// ClockOffsetEnv names the test-only variable that shifts the clock a member
// reads for its lease records and lease judgements, such as "-2.5s". The
// chaos harness sets it to skew members against each other on one host; a
// deployment never sets it.
const ClockOffsetEnv = "KRABKA_CLOCK_OFFSET"

// offsetClock is the host clock moved by a constant offset. It is not
// coordination.SystemClock, so a leadership measures its freshness on it
// rather than on the monotonic clock; a constant offset leaves those
// extents unchanged and moves every instant the member writes or judges.
type offsetClock struct{ offset time.Duration }

func (c offsetClock) NowMillis() int64 { return time.Now().Add(c.offset).UnixMilli() }

func (offsetClock) After(extent time.Duration) <-chan time.Time { return time.After(extent) }

// clockOffsetOptions returns the coordination option that ClockOffsetEnv
// asks for, none when it is unset, and an error when it does not parse.
func clockOffsetOptions(getenv func(string) string) ([]coordination.Option, error) {
	text := getenv(ClockOffsetEnv)
	if text == "" {
		return nil, nil
	}
	offset, err := time.ParseDuration(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ClockOffsetEnv, err)
	}
	return []coordination.Option{coordination.WithClock(offsetClock{offset: offset})}, nil
}

// withClockOffset appends the clock offset option to opts; see
// clockOffsetOptions.
func withClockOffset(opts []coordination.Option) ([]coordination.Option, error) {
	extra, err := clockOffsetOptions(os.Getenv)
	if err != nil {
		return nil, err
	}
	return append(opts, extra...), nil
}
