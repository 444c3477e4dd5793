package coordination

import (
	"errors"
	"testing"
	"time"
)

func TestSettingsDefaults(t *testing.T) {
	s, err := newSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.topic != StateTopic || s.partitions != DefaultPartitions || s.pollInterval != DefaultPollInterval || s.lease != DefaultLeaseConfig() {
		t.Fatalf("defaults %+v", s)
	}
	if _, ok := s.clock.(SystemClock); !ok {
		t.Fatalf("default clock %T", s.clock)
	}
}

func TestOptionsCombine(t *testing.T) {
	config := mustConfig(t, time.Minute, 20*time.Second, 3*time.Second)
	clock := NewManualClock(0)
	s, err := newSettings([]Option{
		WithLeaseConfig(config),
		WithRenewInterval(15 * time.Second), // changes one timing of the config
		WithClock(clock),
		WithPollInterval(250 * time.Millisecond),
		nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := mustConfig(t, time.Minute, 15*time.Second, 3*time.Second)
	if s.lease != want || s.clock != Clock(clock) || s.pollInterval != 250*time.Millisecond {
		t.Fatalf("settings %+v", s)
	}
	// The combination is checked after every option applied: a lease
	// duration set before a longer renew interval is caught.
	_, err = newSettings([]Option{WithLeaseDuration(time.Second), WithRenewInterval(2 * time.Second)})
	if err == nil || err.Error() != "coordination: renew interval 2s is not below the lease duration 1s" {
		t.Fatalf("combination: %v", err)
	}
}

func TestOptionErrorStopsApply(t *testing.T) {
	applied := false
	_, err := newSettings([]Option{
		WithPartitions(0),
		func(*settings) error { applied = true; return errors.New("later") },
	})
	if err == nil || applied {
		t.Fatalf("apply went on after a bad option: %v", err)
	}
}
