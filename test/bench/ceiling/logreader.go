package ceiling

import (
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// logReaderOf returns the log reader a measured dispatcher recovers with:
// the Kafka reader that the dispatcher binary uses. Beside recovery (an
// empty log here, which is not part of any figure), it is what lets the
// dispatcher hold a settled command as a compact ID of its dedup window
// rather than whole, as it does in production: without it every command of
// a measurement would stay whole in memory, and a measurement would time a
// growing map and heap that no deployment has.
func logReaderOf(brokers []string) (dispatch.LogReader, error) {
	return dispatch.NewKafkaLogReader(brokers)
}
