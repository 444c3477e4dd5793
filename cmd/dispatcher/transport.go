package main

import (
	"context"
)

// connectCluster builds the coordination transport over franz-go from the
// cluster options.
func connectCluster(ctx context.Context, o *ClusterOptions) (cluster, error) {
	return nil, withCode(ExitUnavailable, errNoTransport)
}
