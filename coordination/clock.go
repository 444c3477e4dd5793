package coordination

import (
	"sync"
	"time"
)

// Clock is the source of the current time, and the source of every wait.
//
// The succession rules and the lease clock take an instant as a parameter, so
// they need no clock at all. This interface is the seam for the code around
// them that reads a real clock and that waits. A test supplies *[ManualClock],
// drives time by hand, and sleeps for nothing.
type Clock interface {
	// NowMillis returns the current time, in milliseconds since the Unix
	// epoch.
	NowMillis() int64

	// After returns a channel that receives one value after the extent
	// passes. An extent at or below zero receives at once.
	After(extent time.Duration) <-chan time.Time
}

// SystemClock reads the clock of the host. It is the clock that
// [AcquireLeadership] takes by default.
type SystemClock struct{}

// NowMillis returns the host time, in milliseconds since the Unix epoch.
func (SystemClock) NowMillis() int64 { return time.Now().UnixMilli() }

// After returns a channel that receives one value after the extent passes.
func (SystemClock) After(extent time.Duration) <-chan time.Time { return time.After(extent) }

// onHostClock reports whether clock is the clock of the host, whose extents
// the monotonic clock measures better than the wall clock does.
func onHostClock(clock Clock) bool {
	switch clock.(type) {
	case SystemClock, *SystemClock:
		return true
	}
	return false
}

// stopwatch measures the extent since it started: on the monotonic clock of
// the host for [SystemClock], so a step of the wall clock does not move it,
// and on the Clock itself otherwise.
type stopwatch struct {
	clock     Clock
	monotonic bool
	mono      time.Time
	millis    int64
}

// startStopwatch starts a stopwatch on clock now.
func startStopwatch(clock Clock) stopwatch {
	return stopwatch{clock: clock, monotonic: onHostClock(clock), mono: time.Now(), millis: clock.NowMillis()}
}

// elapsed returns the extent since the start, never negative.
func (s stopwatch) elapsed() time.Duration {
	if s.monotonic {
		return max(time.Since(s.mono), 0)
	}
	return millisBetween(s.millis, s.clock.NowMillis())
}

// ManualClock is a clock that a test moves by hand. A wait that
// [ManualClock.After] returns receives when [ManualClock.Set] or
// [ManualClock.Advance] moves the clock to the instant of the wait.
//
// The clock is safe for concurrent use, so a test shares one clock between a
// holder and its challengers and moves them all together.
type ManualClock struct {
	mu      sync.Mutex
	now     int64
	waiters []manualWait
}

// manualWait is one pending wait of a ManualClock.
type manualWait struct {
	at int64
	ch chan time.Time
}

// NewManualClock builds a clock that reads this instant, in milliseconds since
// the Unix epoch.
func NewManualClock(nowMillis int64) *ManualClock {
	return &ManualClock{now: nowMillis}
}

// NowMillis returns the instant the clock reads now.
func (c *ManualClock) NowMillis() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives when the clock reaches the instant
// this extent names. A wait that is already due receives at once. The clock
// counts in whole milliseconds and rounds a fraction of one up.
func (c *ManualClock) After(extent time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if extent <= 0 {
		ch <- time.UnixMilli(c.now)
		return ch
	}
	ms := extent.Milliseconds()
	if extent%time.Millisecond != 0 {
		ms++
	}
	at := addMillis(c.now, time.Duration(ms)*time.Millisecond)
	c.waiters = append(c.waiters, manualWait{at: at, ch: ch})
	return ch
}

// Advance moves the clock forward by this extent and releases every wait
// that the move makes due. A negative extent moves the clock back, as
// [ManualClock.Set] does.
func (c *ManualClock) Advance(step time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if step >= 0 {
		c.moveLocked(addMillis(c.now, step))
	} else {
		c.moveLocked(c.now + step.Milliseconds())
	}
}

// Set moves the clock to this instant and releases every wait that the move
// makes due. It moves the clock backwards too, and a backwards move releases
// nothing.
func (c *ManualClock) Set(nowMillis int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveLocked(nowMillis)
}

func (c *ManualClock) moveLocked(now int64) {
	c.now = now
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at <= now {
			w.ch <- time.UnixMilli(now)
			continue
		}
		kept = append(kept, w)
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}
