package ceiling

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ConcurrentTxns is a franz-go logger that counts the requests a
// transactions-v2 coordinator answered with CONCURRENT_TRANSACTIONS: a
// transaction begun while the markers of the one before were still being
// written. franz-go retries them after its retry backoff (a produce) or
// its transaction backoff (an EndTxn), and reports each at debug level; the
// count says how often a side paid that backoff. It logs nothing.
type ConcurrentTxns struct {
	n atomic.Int64
}

var _ kgo.Logger = (*ConcurrentTxns)(nil)

// Level implements kgo.Logger: debug, where the retries are reported.
func (c *ConcurrentTxns) Level() kgo.LogLevel { return kgo.LogLevelDebug }

// Log implements kgo.Logger.
func (c *ConcurrentTxns) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	const code = "CONCURRENT_TRANSACTIONS"
	if strings.Contains(msg, code) {
		c.n.Add(1)
		return
	}
	if msg != "produced" {
		return
	}
	for i := 1; i < len(keyvals); i += 2 {
		if s, ok := keyvals[i].(string); ok {
			c.n.Add(int64(strings.Count(s, code)))
		} else if st, ok := keyvals[i].(fmt.Stringer); ok {
			c.n.Add(int64(strings.Count(st.String(), code)))
		}
	}
}

// Count returns the retries counted so far.
func (c *ConcurrentTxns) Count() int64 { return c.n.Load() }
