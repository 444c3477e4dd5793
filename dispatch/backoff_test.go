package dispatch

import (
	"testing"
	"time"
)

func TestDoublingWaitsDoubleUpToTheCapAndRestartAtReset(t *testing.T) {
	b := doubling(DefaultRetryBackoff, DefaultMaxRetryBackoff)
	want := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000}
	for i, w := range want {
		if got := b.NextBackOff(); got != w*time.Millisecond {
			t.Fatalf("wait %d = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.NextBackOff(); got != DefaultRetryBackoff {
		t.Fatalf("first wait after Reset = %v, want %v", got, DefaultRetryBackoff)
	}
}

func TestDoublingWithFirstEqualToMaxWaitsMaxEachTime(t *testing.T) {
	b := doubling(time.Second, time.Second)
	for i := range 3 {
		if got := b.NextBackOff(); got != time.Second {
			t.Fatalf("wait %d = %v, want 1s", i+1, got)
		}
	}
}
