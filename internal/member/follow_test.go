package member

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// boundedLog is a log reader that tells its bounds and records where the
// member asks to follow from.
type boundedLog struct {
	start, end int64
	from       chan int64
}

func (b *boundedLog) Bounds(context.Context, coordination.TopicPartition) (int64, int64, error) {
	return b.start, b.end, nil
}

func (b *boundedLog) FollowLog(_ context.Context, _ coordination.TopicPartition, from int64) (*dispatch.LogStream, error) {
	b.from <- from
	return nil, errors.New("no stream in this test")
}

// TestRecentFollowsABoundedTail wants the member's recent commands, which
// the status page lists, read from a bounded number of records before the
// end of a long log, and from the start of a short one.
func TestRecentFollowsABoundedTail(t *testing.T) {
	role, _ := coordination.NewRole("r")
	m := &Member{cfg: Config{Role: role, LogTopic: dispatch.DefaultLogTopic, LogPartitions: 4, PollInterval: time.Hour},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, c := range []struct{ start, end, want int64 }{
		{0, 1_000_000, 1_000_000 - recentLookback},
		{0, 100, 0},
		{900, 1000, 900},
	} {
		log := &boundedLog{start: c.start, end: c.end, from: make(chan int64, 1)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.followLog(ctx, log)
		}()
		if got := <-log.from; got != c.want {
			t.Errorf("log [%d, %d): followed from %d, want %d", c.start, c.end, got, c.want)
		}
		cancel()
		<-done
	}
}
