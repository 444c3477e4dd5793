package main

import (
	"context"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// connectCluster builds the coordination transport over franz-go from the
// cluster options. It reaches no broker yet: the first call does.
func connectCluster(_ context.Context, o *ClusterOptions) (cluster, error) {
	opts, err := o.clientOptions()
	if err != nil {
		return nil, err
	}
	c := o.Config
	lease, err := coordination.NewLeaseConfig(c.Lease.Duration, c.Lease.RenewInterval, c.Lease.ChallengeStagger)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	t, err := coordination.NewKafkaTransportWithClientOptions(lease, opts...)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return t, nil
}
