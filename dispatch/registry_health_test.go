package dispatch

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type checkedDevice struct {
	idleDevice
	err error
}

func (d checkedDevice) CheckHealth(context.Context) error { return d.err }

func TestRegistryCheckHealth(t *testing.T) {
	unreachable := errors.New("no route to unit 3")
	r := NewRegistry()
	for name, dev := range map[string]Device{
		"plain": idleDevice{}, "good": checkedDevice{}, "bad": checkedDevice{err: unreachable},
	} {
		if err := r.Register(name, dev); err != nil {
			t.Fatal(err)
		}
	}
	got := r.CheckHealth(t.Context())
	if len(got) != 3 || got["plain"] != nil || got["good"] != nil || !errors.Is(got["bad"], unreachable) {
		t.Errorf("CheckHealth %v", got)
	}
}

// healthDevice is a recordingDevice whose health check returns down.
type healthDevice struct {
	*recordingDevice
	down error
}

func (d *healthDevice) CheckHealth(context.Context) error { return d.down }

// TestSubmitToUnreachableDeviceFailsFast wants a submit for a device whose
// last health check failed, and still fails, to return a
// *DeviceUnavailableError at once, with nothing written to the log, and a
// submit once the device is back to go through.
func TestSubmitToUnreachableDeviceFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		down := errors.New("broker unreachable")
		dev := &healthDevice{recordingDevice: &recordingDevice{log: log, t: t}, down: down}
		h := newHarness(t, log, map[string]Device{"valve": dev, "plain": &recordingDevice{log: log, t: t}})
		h.start(t.Context())
		synctest.Wait()
		if got := h.registry.Health(); len(got) != 0 {
			t.Fatalf("Health before any check: %v", got)
		}
		results := h.registry.CheckHealth(t.Context())
		if !errors.Is(results["valve"], down) || results["plain"] != nil {
			t.Fatalf("CheckHealth %v", results)
		}
		health := h.registry.Health()
		if len(health) != 2 || health[0].Device != "plain" || health[0].Err != nil || health[1].Device != "valve" || !errors.Is(health[1].Err, down) {
			t.Fatalf("Health %+v", health)
		}

		start := time.Now()
		_, err := h.d.Submit(t.Context(), newCommand("refused", "valve", time.Minute))
		var unavailable *DeviceUnavailableError
		if !errors.As(err, &unavailable) || unavailable.Device != "valve" || !errors.Is(err, down) {
			t.Fatalf("Submit to a device down: %v, want a *DeviceUnavailableError wrapping the check's error", err)
		}
		if time.Since(start) != 0 {
			t.Errorf("the refusal took %s", time.Since(start))
		}
		if _, logged := log.issued(t, "refused"); logged {
			t.Error("a command refused for an unreachable device was recorded")
		}
		if out, err := h.d.Submit(t.Context(), newCommand("other", "plain", time.Minute)); err != nil || out.Status != StatusSucceeded {
			t.Errorf("Submit to a healthy device: %+v %v", out, err)
		}

		// A device back since its last check is asked again, not refused
		// on a stale answer, and the fresh answer is remembered.
		dev.down = nil
		if out, err := h.d.Submit(t.Context(), newCommand("back", "valve", time.Minute)); err != nil || out.Status != StatusSucceeded {
			t.Errorf("Submit after the device came back: %+v %v", out, err)
		}
		if health := h.registry.Health(); health[1].Err != nil {
			t.Errorf("Health after the re-check: %+v", health)
		}
		h.stop()
	})
}
