package coordination

import (
	"math"
	"sync"
	"testing"
	"time"
)

func received(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestManualClock(t *testing.T) {
	clock := NewManualClock(1000)
	if clock.NowMillis() != 1000 {
		t.Fatal("NowMillis")
	}
	if !received(clock.After(0)) || !received(clock.After(-time.Second)) {
		t.Fatal("a due wait did not receive at once")
	}
	second := clock.After(time.Second)
	fraction := clock.After(1500 * time.Microsecond) // rounds up to 2ms
	clock.Advance(time.Millisecond)
	if received(second) || received(fraction) {
		t.Fatal("a wait received early")
	}
	clock.Advance(time.Millisecond)
	if !received(fraction) || received(second) {
		t.Fatal("the fractional wait")
	}
	clock.Set(1999)
	if received(second) {
		t.Fatal("received before its instant")
	}
	clock.Set(500) // backwards: releases nothing
	if received(second) || clock.NowMillis() != 500 {
		t.Fatal("a backwards move released a wait")
	}
	late := clock.After(time.Second) // due at 1500
	clock.Set(2000)
	if !received(second) || !received(late) {
		t.Fatal("waits not released at their instant")
	}
	clock.Advance(-time.Second)
	if clock.NowMillis() != 1000 {
		t.Fatalf("Advance backwards: %d", clock.NowMillis())
	}
	clock.Set(math.MaxInt64 - 1)
	never := clock.After(time.Hour) // saturates at the end of time
	clock.Advance(time.Hour)
	if clock.NowMillis() != math.MaxInt64 || !received(never) {
		t.Fatal("saturation at the end of time")
	}
}

func TestManualClockConcurrent(t *testing.T) {
	clock := NewManualClock(0)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		ch := clock.After(time.Duration(i+1) * time.Millisecond)
		go func() {
			defer wg.Done()
			<-ch
		}()
	}
	for range 8 {
		clock.Advance(time.Millisecond)
	}
	wg.Wait()
}

func TestSystemClock(t *testing.T) {
	var clock Clock = SystemClock{}
	before := time.Now().UnixMilli()
	now := clock.NowMillis()
	if now < before || now > time.Now().UnixMilli() {
		t.Fatalf("NowMillis %d", now)
	}
	if !received(waitFor(clock.After(0))) {
		t.Fatal("After(0) did not receive")
	}
}

// waitFor blocks until ch receives, then hands back a channel that holds the
// value, so a test checks SystemClock's After without a sleep of its own.
func waitFor(ch <-chan time.Time) <-chan time.Time {
	out := make(chan time.Time, 1)
	out <- <-ch
	return out
}
