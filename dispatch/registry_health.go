package dispatch

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// DefaultHealthRecheckTimeout bounds the check that [Registry.Unavailable]
// runs again on a device that its last check found down.
const DefaultHealthRecheckTimeout = time.Second

// DeviceHealth is the answer of one device's last health check.
type DeviceHealth struct {
	// Device is the name the device is registered under.
	Device string
	// CheckedAt is when the check returned.
	CheckedAt time.Time
	// Err is the check's error; nil for a reachable device and for one that
	// does not implement [HealthChecker].
	Err error
}

// DeviceUnavailableError reports a command that [Dispatcher.Submit] refused
// without recording it, because the last health check of its device failed.
// The caller may submit the command again once the device is back.
type DeviceUnavailableError struct {
	// Device names the device; CheckedAt is when its check failed.
	Device    string
	CheckedAt time.Time
	// Err is the check's error.
	Err error
}

// Error names the device and the failed check.
func (e *DeviceUnavailableError) Error() string {
	return fmt.Sprintf("dispatch: device %q is unreachable (health check at %s): %v",
		e.Device, e.CheckedAt.UTC().Format(time.RFC3339), e.Err)
}

// Unwrap returns the check's error.
func (e *DeviceUnavailableError) Unwrap() error { return e.Err }

// CheckHealth asks every registered device that implements [HealthChecker]
// whether it is reachable, all at once, and returns each device's answer by
// name: nil for a healthy device, and for one without CheckHealth. It
// returns when every check returned; each check must return by the time ctx
// ends, so bound ctx for a health endpoint. The registry remembers the
// answers for [Registry.Health] and [Registry.Unavailable].
func (r *Registry) CheckHealth(ctx context.Context) map[string]error {
	names := r.Names()
	results := make(map[string]error, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range names {
		device, err := r.Lookup(name)
		if err != nil {
			continue
		}
		checker, ok := device.(HealthChecker)
		if !ok {
			mu.Lock()
			results[name] = nil
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			err := checker.CheckHealth(ctx)
			mu.Lock()
			results[name] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	now := time.Now()
	r.mu.Lock()
	if r.health == nil {
		r.health = make(map[string]DeviceHealth, len(results))
	}
	for name, err := range results {
		r.health[name] = DeviceHealth{Device: name, CheckedAt: now, Err: err}
	}
	r.mu.Unlock()
	return results
}

// Health returns the answers of the last [Registry.CheckHealth], one per
// device it checked, in name order; nil before the first check.
func (r *Registry) Health() []DeviceHealth {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]DeviceHealth, 0, len(r.health))
	for _, h := range r.health {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out
}

// Unavailable returns a *[DeviceUnavailableError] when the device named is
// unreachable, and nil when the last [Registry.CheckHealth] found it
// reachable, did not check it, or never ran. A device that the last check
// found down is checked again first, bounded by ctx and
// [DefaultHealthRecheckTimeout], so a device that came back since (one that
// connected just after the check, say) is not refused; the answer is
// remembered.
func (r *Registry) Unavailable(ctx context.Context, name string) error {
	r.mu.RLock()
	h, ok := r.health[name]
	device := r.devices[name]
	r.mu.RUnlock()
	if !ok || h.Err == nil {
		return nil
	}
	if checker, ok := device.(HealthChecker); ok {
		cctx, cancel := context.WithTimeout(ctx, DefaultHealthRecheckTimeout)
		err := checker.CheckHealth(cctx)
		cancel()
		h = DeviceHealth{Device: name, CheckedAt: time.Now(), Err: err}
		r.mu.Lock()
		r.health[name] = h
		r.mu.Unlock()
		if err == nil {
			return nil
		}
	}
	return &DeviceUnavailableError{Device: name, CheckedAt: h.CheckedAt, Err: h.Err}
}
