package member

import (
	"context"
	"time"
)

// checkHealth asks the registry's devices for their health every health
// interval, each round bounded by the health timeout, until ctx ends. The
// registry remembers the answers, which the readiness, the leadership view,
// the metrics and the dispatcher's Submit read. It logs each change of a
// device's health.
func (m *Member) checkHealth(ctx context.Context) {
	down := make(map[string]bool)
	for {
		cctx, cancel := context.WithTimeout(ctx, m.cfg.HealthTimeout)
		results := m.cfg.Registry.CheckHealth(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		for name, err := range results {
			switch {
			case err != nil && !down[name]:
				m.log.Warn("a device is unreachable", "device", name, "err", err)
			case err == nil && down[name]:
				m.log.Info("a device is reachable again", "device", name)
			}
			down[name] = err != nil
		}
		m.mu.Lock()
		m.healthChecked = true
		m.mu.Unlock()
		select {
		case <-time.After(m.cfg.HealthInterval):
		case <-ctx.Done():
			return
		}
	}
}
