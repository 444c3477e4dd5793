package dispatch

import (
	"context"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// LogRangeReader is an optional interface of a [LogReader] that reads part
// of a partition. [KafkaLogReader] implements it. With it a dispatcher
// writes checkpoints, recovers from the newest one and the records after
// it instead of the whole partition, and holds a settled command as a
// compact ID whose records it reads back by offset; without it, it reads
// the whole partition at takeover and holds every command whole. Its
// methods may be called from several goroutines at once: a recovery reads
// the parts of a large checkpoint in two reads at a time.
type LogRangeReader interface {
	LogReader

	// Bounds returns the log start offset and the high watermark of the
	// partition.
	Bounds(ctx context.Context, partition coordination.TopicPartition) (start, end int64, err error)

	// ReadRange returns the committed entries within rng, in offset order,
	// each with its Offset set. Like ReadLog it reads until it has passed
	// the range's end (lowered to the high watermark), waiting for any
	// transaction that holds the last stable offset below it, and it fails
	// on a record that does not decode.
	ReadRange(ctx context.Context, partition coordination.TopicPartition, rng LogRange) ([]Entry, error)
}
