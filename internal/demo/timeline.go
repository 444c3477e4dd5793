package demo

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// timeline prints what happens, one line per event, stamped with the time
// since the demo started. It is safe for concurrent use.
type timeline struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newTimeline(w io.Writer) *timeline {
	return &timeline{w: w, start: time.Now()}
}

// print writes one event of who.
func (t *timeline) print(who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "%7.2fs  %-9s %s\n", time.Since(t.start).Seconds(), who, fmt.Sprintf(format, args...))
}

// section starts a part of the story.
func (t *timeline) section(title string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "\n== %s\n", title)
}

// text writes lines as they are.
func (t *timeline) text(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, format, args...)
}
