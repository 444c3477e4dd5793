package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// logSearch is what a lookup without a hint learnt from the end of the
// role's partition.
type logSearch struct {
	checkpointSearch

	// since is the start of the lookup window, and end the high watermark
	// the search began at.
	since time.Time
	end   int64
}

// searchLog searches the lookup window of the role's partition backwards
// from the high watermark for the role's newest checkpoint. Without one it
// has read the whole window, as a lookup did before checkpoints. A
// checkpoint written before the window is not looked for: a command that
// old has left the dispatcher's dedup window.
func (c *Client) searchLog(ctx context.Context, tp coordination.TopicPartition, role string) (logSearch, error) {
	w, err := c.lookupWindow(ctx, tp)
	if err != nil {
		return logSearch{}, err
	}
	return c.searchWindow(ctx, tp, role, w)
}

// window is the lookup window of a partition as a lookup without a hint
// listed it: it starts at offset from, the first written at since or
// later (and not before the log start), and ends at the high watermark.
type window struct {
	since     time.Time
	from, end int64
}

// lookupWindow lists the offsets of the lookup window of tp. The offset
// of the window's start and the partition's bounds are asked for at once.
func (c *Client) lookupWindow(ctx context.Context, tp coordination.TopicPartition) (window, error) {
	w := window{since: time.Now().Add(-c.cfg.lookupWindow)}
	var from int64
	var errFrom error
	var wg sync.WaitGroup
	wg.Go(func() { from, errFrom = c.reader.OffsetAt(ctx, tp, w.since) })
	start, end, err := c.reader.Bounds(ctx, tp)
	wg.Wait()
	if err = errors.Join(errFrom, err); err != nil {
		return w, err
	}
	w.from, w.end = max(from, start), end
	return w, nil
}

// searchWindow is searchLog in the window the caller listed.
func (c *Client) searchWindow(ctx context.Context, tp coordination.TopicPartition, role string, w window) (logSearch, error) {
	s := logSearch{since: w.since, end: w.end}
	var err error
	s.checkpointSearch, err = searchCheckpoint(ctx, role, w.from, w.end, firstSearchStep, roleRange(c.reader, tp, role), true, nil)
	return s, err
}

// tail returns the role's records the search read after the checkpoint, or
// all it read when it found none.
func (s *logSearch) tail() []Entry {
	if !s.found {
		return s.entries
	}
	for i := range s.entries {
		if s.entries[i].Offset > s.at {
			return s.entries[i:]
		}
	}
	return nil
}

// wholeCommand returns the checkpoint's command id when it holds it whole.
func (s *logSearch) wholeCommand(id string) (CheckpointCommand, bool) {
	if s.found {
		for _, cmd := range s.cp.Commands {
			if cmd.Command.ID == id {
				return cmd, true
			}
		}
	}
	return CheckpointCommand{}, false
}

// compactIDs returns the checkpoint's compact ID whose hash is id's: that
// of id, or of a command whose ID shares its hash. A checkpoint holds each
// hash once. The checkpoint's IDs are decoded only here, and the base of a
// delta is read only when the delta does not hold the hash.
func (s *logSearch) compactIDs(ctx context.Context, id string) ([]CheckpointID, error) {
	if !s.found {
		return nil, nil
	}
	if err := s.loadIDs(); err != nil {
		return nil, err
	}
	if c, ok := s.ids.find(IDHash(id)); ok {
		return []CheckpointID{c.checkpointID()}, nil
	}
	if s.unread == nil {
		return nil, nil
	}
	if err := s.loadBase(ctx); err != nil {
		return nil, err
	}
	if c, ok := s.ids.find(IDHash(id)); ok {
		return []CheckpointID{c.checkpointID()}, nil
	}
	return nil, nil
}

// statusWithoutHint is Status without a hint: it reads the records of id
// that the role's newest checkpoint points to, or the tail after the
// checkpoint when the checkpoint does not hold id, and searches the lookup
// window only when the role has no checkpoint in it.
func (c *Client) statusWithoutHint(ctx context.Context, tp coordination.TopicPartition, role, id string) (*CommandHistory, error) {
	w, err := c.lookupWindow(ctx, tp)
	if err != nil {
		return nil, err
	}
	if _, h, ok, err := c.probeRecent(ctx, tp, role, id, w); err != nil || ok {
		return h, err
	}
	s, err := c.searchWindow(ctx, tp, role, w)
	if err != nil {
		return nil, err
	}
	h, ok, err := c.commandHistory(ctx, tp, role, id, &s, s.end)
	switch {
	case err != nil:
		return nil, err
	case ok:
		return h, nil
	}
	return nil, &OutsideLookupWindowError{ID: id, Since: s.since, Window: c.cfg.lookupWindow}
}

// recentProbe is how many offsets at the end of the role's partition a
// lookup without a hint reads before it searches for the role's newest
// checkpoint. A command looked up soon after it was written, the common
// case of `dispatcher status`, is found there without the search, which
// on a long log reads a whole search step and the checkpoint; any other
// costs one small read more. It is kept small because the offsets before
// a fresh command often hold checkpoints: in the history bench at a
// million commands a probe of 256 offsets read the parts that the cold
// starts had written, and took longer than a read from the command's
// submission time.
const recentProbe = 64

// probeRecent reads the role's records among the last recentProbe offsets
// of the lookup window w, and returns them with the history of id they
// give, and true when they hold its Issued record. A command's Issued
// record is its first, so every later record of it lies in the probe too,
// and an Issued record of the same ID further back belongs to a command
// that left the dedup window: this one is newer. Without its Issued record
// the probe proves nothing (a request rejected at intake has none, and an
// outcome alone may follow an older Issued record).
func (c *Client) probeRecent(ctx context.Context, tp coordination.TopicPartition, role, id string, w window) ([]Entry, *CommandHistory, bool, error) {
	if w.end <= w.from {
		return nil, nil, false, nil
	}
	entries, _, err := roleRange(c.reader, tp, role)(ctx, max(w.from, w.end-recentProbe), w.end)
	if err != nil {
		return nil, nil, false, err
	}
	h, ok := Replay(entries).Command(role, id)
	return entries, h, ok && h.Issued != nil, nil
}

// commandHistory returns the history of id that the records before until
// give, read where s points: at the offsets the checkpoint holds for id,
// or among the records after the checkpoint (or in the window, without
// one) that s read.
func (c *Client) commandHistory(ctx context.Context, tp coordination.TopicPartition, role, id string, s *logSearch, until int64) (*CommandHistory, bool, error) {
	if cmd, ok := s.wholeCommand(id); ok {
		from := cmd.First
		if from < 0 {
			// Its writer could not tell where its records start.
			var err error
			if from, err = c.reader.OffsetAt(ctx, tp, s.since); err != nil {
				return nil, false, err
			}
		}
		entries, err := c.reader.ReadRange(ctx, tp, LogRange{From: from, Until: until})
		if err != nil {
			return nil, false, err
		}
		if h, ok := Replay(entries).Command(role, id); ok {
			return h, true, nil
		}
	}
	// A command the checkpoint does not hold whole, and whose records are
	// in the tail, began after it: the tail holds its whole history, and it
	// is newer than a compact ID of the same ID that left the window.
	tail := s.tail()
	for i := range tail {
		if tail[i].Offset >= until {
			tail = tail[:i]
			break
		}
	}
	if h, ok := Replay(tail).Command(role, id); ok {
		return h, true, nil
	}
	cids, err := s.compactIDs(ctx, id)
	if err != nil {
		return nil, false, err
	}
	for _, cid := range cids {
		entries, err := c.reader.ReadRange(ctx, tp, LogRange{From: cid.First, Until: min(cid.Outcome+1, until)})
		if err != nil {
			return nil, false, err
		}
		// Replay names commands by their full ID: a command whose ID
		// shares the hash is not taken for id.
		if h, ok := Replay(entries).Command(role, id); ok {
			return h, true, nil
		}
	}
	return nil, false, nil
}

// waitStart is where Wait without a hint starts: the outcome of id when the
// role's newest checkpoint or the records after it already settle it, or
// else the offset to follow the log from. Every record of the role before
// that offset has been looked at. Like Status, it reads the end of the
// lookup window first: when the probe holds the command's Issued record,
// it holds every later record of it, and the search is not needed.
func (c *Client) waitStart(ctx context.Context, tp coordination.TopicPartition, role, id string) (Outcome, bool, int64, error) {
	w, err := c.lookupWindow(ctx, tp)
	if err != nil {
		return Outcome{}, false, 0, err
	}
	recent, _, ok, err := c.probeRecent(ctx, tp, role, id, w)
	switch {
	case err != nil:
		return Outcome{}, false, 0, err
	case ok:
		if o, ok := settling(sinceIssued(recent, role, id), role, id); ok {
			return o, true, 0, nil
		}
		return Outcome{}, false, w.end, nil
	}
	s, err := c.searchWindow(ctx, tp, role, w)
	if err != nil {
		return Outcome{}, false, 0, err
	}
	cmd, whole := s.wholeCommand(id)
	if whole && cmd.Status != StatusPending {
		return cmd.Outcome, true, 0, nil
	}
	if o, ok := settling(sinceIssued(s.tail(), role, id), role, id); ok {
		return o, true, 0, nil
	}
	if whole || tailNames(s.tail(), role, id) {
		// It was pending at the checkpoint, or began after it, and has
		// not settled yet.
		return Outcome{}, false, s.end, nil
	}
	cids, err := s.compactIDs(ctx, id)
	if err != nil {
		return Outcome{}, false, 0, err
	}
	for _, cid := range cids {
		entries, err := c.reader.ReadRange(ctx, tp, LogRange{From: cid.First, Until: cid.Outcome + 1})
		if err != nil {
			return Outcome{}, false, 0, err
		}
		if o, ok := settling(entries, role, id); ok {
			return o, true, 0, nil
		}
	}
	return Outcome{}, false, s.end, nil
}

// sinceIssued returns entries from the last Issued record of id of role on:
// an outcome before it settled an older command under the same ID.
func sinceIssued(entries []Entry, role, id string) []Entry {
	for i := len(entries) - 1; i >= 0; i-- {
		if e := &entries[i]; e.Role == role && e.Kind == EntryIssued && e.CommandID() == id {
			return entries[i:]
		}
	}
	return entries
}

// tailNames reports whether a record of entries names command id of role.
func tailNames(entries []Entry, role, id string) bool {
	for _, e := range entries {
		if e.Role == role && e.CommandID() == id {
			return true
		}
	}
	return false
}

// settling returns the first outcome of id among entries that is terminal
// or in doubt, as Wait does.
func settling(entries []Entry, role, id string) (Outcome, bool) {
	for _, e := range entries {
		if e.Role == role && e.Kind == EntryOutcome && e.Outcome != nil && e.Outcome.CommandID == id &&
			(e.Outcome.Status.Terminal() || e.Outcome.Status == StatusInDoubt) {
			return *e.Outcome, true
		}
	}
	return Outcome{}, false
}
