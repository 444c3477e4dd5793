package mqtt

import (
	"testing"
	"time"
)

// TestReconnectWaitsDoubleWithinTheirJitter checks every wait against its
// bounds: 0.8 to 1.2 times the doubling interval, which stops at the max.
func TestReconnectWaitsDoubleWithinTheirJitter(t *testing.T) {
	b := reconnectWaits(DefaultReconnectMinInterval, time.Second)
	intervals := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for round := range 50 {
		b.Reset()
		for i, iv := range intervals {
			iv *= time.Millisecond
			got := b.NextBackOff()
			if got < iv*4/5 || got > iv*6/5+1 {
				t.Fatalf("round %d: wait %d = %v, want within [%v, %v]", round, i+1, got, iv*4/5, iv*6/5)
			}
		}
	}
}
