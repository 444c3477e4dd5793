package history

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// recoveredMsg is the message of the line a dispatcher logs when it has
// recovered its role's log (dispatch/recovery.go).
const recoveredMsg = `msg="dispatch: recovered the role's log"`

// windowMsg is the message of the line a dispatcher logs when it loaded
// the dedup window that its recovery left to load behind intake, while its
// standby still read it (dispatch/dispatcher_window.go).
const windowMsg = `msg="dispatch: loaded the role's dedup window"`

// recovery is what a member's log says of one recovery: how long it took,
// how many records it read, and how far below the end of the partition the
// checkpoint it started from began (its base, for a delta), or -1 when it
// found none.
type recovery struct {
	Took        time.Duration
	RecordsRead int64
	Below       int64
	// WindowLoad is how long the dedup window took to load after the
	// recovery, behind intake; 0 when the recovery loaded it.
	WindowLoad time.Duration
}

// lastRecovery returns the last recovery that the member's log file at
// path records after byte offset from.
func lastRecovery(path string, from int64) (recovery, error) {
	f, err := os.Open(path)
	if err != nil {
		return recovery{}, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return recovery{}, err
	}
	var last, window string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.Contains(l, recoveredMsg):
			last, window = l, ""
		case strings.Contains(l, windowMsg):
			window = l
		}
	}
	if err := sc.Err(); err != nil {
		return recovery{}, err
	}
	if last == "" {
		return recovery{}, fmt.Errorf("history: %s logs no recovery after byte %d", path, from)
	}
	r, err := parseRecovery(last)
	if err != nil || window == "" {
		return r, err
	}
	took, err := lineField(window, "took")
	if err != nil {
		return r, err
	}
	if r.WindowLoad, err = time.ParseDuration(took); err != nil {
		return r, fmt.Errorf("history: the window load's took: %w", err)
	}
	return r, nil
}

// lineField returns the value of key in a line in slog's text format.
func lineField(line, key string) (string, error) {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return "", fmt.Errorf("history: the line has no %s: %q", key, line)
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v, nil
}

// parseRecovery reads the fields of a recovery line in slog's text format.
func parseRecovery(line string) (recovery, error) {
	field := func(key string) (string, error) { return lineField(line, key) }
	number := func(key string) (int64, error) {
		v, err := field(key)
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(v, 10, 64)
	}
	var r recovery
	took, err := field("took")
	if err != nil {
		return r, err
	}
	if r.Took, err = time.ParseDuration(took); err != nil {
		return r, fmt.Errorf("history: the recovery's took: %w", err)
	}
	if r.RecordsRead, err = number("records_read"); err != nil {
		return r, err
	}
	cp, err := number("checkpoint_offset")
	if err != nil {
		return r, err
	}
	base, err := number("base_offset")
	if err != nil {
		return r, err
	}
	end, err := number("end")
	if err != nil {
		return r, err
	}
	switch {
	case base >= 0:
		r.Below = end - base
	case cp >= 0:
		r.Below = end - cp
	default:
		r.Below = -1
	}
	return r, nil
}

// logSize returns the size of the file at path, 0 when there is none.
func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
