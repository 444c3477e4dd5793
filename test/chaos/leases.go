package chaos

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// readLeases reads every committed lease record of the state partition tp,
// in offset order. The run's state topic is not compacted, so every renewal
// is still there. A record that does not decode is skipped: the members'
// own reads refuse it, and the log's audit is where findings go.
func readLeases(ctx context.Context, brokers []string, tp coordination.TopicPartition) ([]LeaseRecord, error) {
	var out []LeaseRecord
	err := readCommitted(ctx, brokers, tp, func(rec *kgo.Record) {
		key, err := coordination.DecodeKey(rec.Key)
		if err != nil || key.Kind != coordination.KindLease || coordination.IsTombstone(rec.Value) {
			return
		}
		lease, err := coordination.DecodeLease(rec.Value)
		if err != nil {
			return
		}
		out = append(out, LeaseRecord{
			Role: key.Role.String(), Member: lease.Member.String(), Token: lease.Token.String(),
			GrantedAt: time.UnixMilli(lease.GrantedAt), Deadline: time.UnixMilli(lease.Deadline), Offset: rec.Offset,
		})
	})
	return out, err
}
