package dispatch

import (
	"context"
	"sync"
)

// CheckHealth asks every registered device that implements [HealthChecker]
// whether it is reachable, all at once, and returns each device's answer by
// name: nil for a healthy device, and for one without CheckHealth. It
// returns when every check returned; each check must return by the time ctx
// ends, so bound ctx for a health endpoint.
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
	return results
}
