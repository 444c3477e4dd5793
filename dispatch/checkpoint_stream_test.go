package dispatch

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// streamedBase is a full checkpoint of role plant-a laid in a log with a
// record of another role before each of its parts, as a shared partition
// holds it.
type streamedBase struct {
	entries []Entry
	base    CheckpointBase
	ids     []compactID
	parts   int
}

// newStreamedBase returns a full checkpoint of n compact IDs, its first
// part at offset 101.
func newStreamedBase(t *testing.T, n int) streamedBase {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 6))
	ids := make([]compactID, n)
	at := time.Now().Add(-time.Hour).UnixMilli()
	for i := range ids {
		first := int64(2 * i)
		ids[i] = compactID{hash: r.Uint64(), first: first, outcome: first + 1 + int64(r.IntN(3)), submitted: at + int64(i)/8}
	}
	sortByHash(ids)
	parts, err := encodeWindowCheckpoint("plant-a", 3, Checkpoint{Window: DefaultDedupWindow}, blocksOf(ids))
	if err != nil {
		t.Fatal(err)
	}
	tok := mustToken(t, 1, 1)
	s := streamedBase{ids: ids, parts: len(parts)}
	off := int64(100)
	for i := range parts {
		s.entries = append(s.entries,
			Entry{Offset: off, Kind: EntryIssued, Role: "plant-b", Token: mustToken(t, 2, 1)},
			Entry{Offset: off + 1, Kind: EntryCheckpoint, Role: "plant-a", Token: tok, Checkpoint: &parts[i]})
		off += 2
	}
	s.base = CheckpointBase{Token: tok, Sequence: 3, First: 101, Last: off - 1}
	return s
}

// stream returns a rangeStream over entries that hands over the role's
// records of a range one or two at a time, as fetches do, counting every
// record of the range.
func stream(entries []Entry) rangeStream {
	return func(ctx context.Context, from, to int64, each func([]Entry)) (int, error) {
		n := 0
		var batch []Entry
		for _, e := range entries {
			if e.Offset < from || e.Offset >= to {
				continue
			}
			if err := ctx.Err(); err != nil {
				return n, err
			}
			n++
			if e.Role != "plant-a" {
				continue
			}
			if batch = append(batch, e); len(batch) == 2 {
				each(batch)
				batch = nil
			}
		}
		if len(batch) > 0 {
			each(batch)
		}
		return n, nil
	}
}

// ranged returns the rangeReader over entries that readBase reads with.
func ranged(entries []Entry) rangeReader {
	return func(_ context.Context, from, to int64) ([]Entry, int, error) {
		var out []Entry
		n := 0
		for _, e := range entries {
			if e.Offset >= from && e.Offset < to {
				n++
				if e.Role == "plant-a" {
					out = append(out, e)
				}
			}
		}
		return out, n, nil
	}
}

func TestStreamBaseReadsWhatReadBaseReads(t *testing.T) {
	s := newStreamedBase(t, 150_000)
	if s.parts < 3 {
		t.Fatalf("the checkpoint has %d parts, want 3 or more for the test", s.parts)
	}
	got, n, err := streamBase(context.Background(), "plant-a", s.base, 0, stream(s.entries))
	if err != nil {
		t.Fatal(err)
	}
	want, wantN, err := readBase(context.Background(), "plant-a", s.base, 0, ranged(s.entries), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != wantN || n != 2*s.parts-1 {
		t.Errorf("streamBase read %d records, readBase %d; want %d", n, wantN, 2*s.parts-1)
	}
	if !reflect.DeepEqual(got.all(), want.all()) || !reflect.DeepEqual(got.all(), s.ids) {
		t.Errorf("streamBase decoded %d IDs, readBase %d, of %d written; they differ", got.count(), want.count(), len(s.ids))
	}
}

// TestStreamBaseDecodesBeforeTheLastPart feeds the parts of a base one by
// one and checks that the decoder takes every part but the last before the
// last has come: the decode overlaps the read.
func TestStreamBaseDecodesBeforeTheLastPart(t *testing.T) {
	s := newStreamedBase(t, 150_000)
	f := newPartFeed("plant-a", s.base)
	f.reads = 1
	taken := make(chan int, s.parts)
	more := func() ([]byte, int, bool) {
		b, unread, ok := f.next()
		if ok {
			taken <- len(b)
		}
		return b, unread, ok
	}
	type decoded struct {
		ids idBlocks
		err error
	}
	done := make(chan decoded, 1)
	go func() {
		_, ids, err := decodeCheckpointState("plant-a", wireReader{more: more})
		done <- decoded{ids, err}
	}()
	var last Entry
	for _, e := range s.entries {
		if e.Role != "plant-a" {
			continue
		}
		if e.Checkpoint.Part == s.parts-1 {
			last = e
			continue
		}
		f.add([]Entry{e})
	}
	for i := range s.parts - 1 {
		select {
		case <-taken:
		case d := <-done:
			t.Fatalf("the decode ended (%v) after %d of %d parts, before the last came", d.err, i, s.parts)
		}
	}
	f.add([]Entry{last})
	f.done(len(s.entries), nil)
	d := <-done
	if d.err != nil {
		t.Fatal(d.err)
	}
	if !reflect.DeepEqual(d.ids.all(), s.ids) {
		t.Errorf("decoded %d IDs, want the %d written", d.ids.count(), len(s.ids))
	}
}

func TestStreamBaseFaults(t *testing.T) {
	s := newStreamedBase(t, 150_000)
	// edit returns a copy of the base's entries with change made to the
	// part of index i.
	edit := func(i int, change func(e *Entry) bool) []Entry {
		var out []Entry
		for _, e := range s.entries {
			if e.Role == "plant-a" && e.Checkpoint.Part == i {
				p := *e.Checkpoint
				p.Data = append([]byte(nil), p.Data...)
				e.Checkpoint = &p
				if !change(&e) {
					continue
				}
			}
			out = append(out, e)
		}
		return out
	}
	// The role's records at the parts' offsets are of another kind.
	var noParts []Entry
	for _, e := range s.entries {
		if e.Role == "plant-a" {
			e.Kind, e.Checkpoint = EntryIssued, nil
		}
		noParts = append(noParts, e)
	}
	errRead := errors.New("broker gone")
	failing := func(at int64) rangeStream {
		inner := stream(s.entries)
		return func(ctx context.Context, from, to int64, each func([]Entry)) (int, error) {
			if from <= at && at < to {
				return 0, errRead
			}
			return inner(ctx, from, to, each)
		}
	}
	for _, tc := range []struct {
		name     string
		read     rangeStream
		logStart int64
		want     string // in a *LogFormatError; empty for another error
		is       error
	}{
		{name: "a part missing", read: stream(edit(1, func(*Entry) bool { return false })), want: "2 parts of a checkpoint of 3"},
		// Either copy of part 0 may come first: the decode of the other
		// copy's data, or the repeat, fails.
		{name: "a part repeated", read: stream(edit(2, func(e *Entry) bool { e.Checkpoint.Part = 0; return true })), want: "malformed checkpoint"},
		{name: "a part truncated", read: stream(edit(2, func(e *Entry) bool { e.Checkpoint.Data = e.Checkpoint.Data[:10]; return true })), want: "truncated"},
		{name: "an unknown version", read: stream(edit(0, func(e *Entry) bool { e.Checkpoint.Data[1] = 9; return true })), want: "unknown version 9"},
		{name: "a delta as base", read: stream(edit(0, func(e *Entry) bool { e.Checkpoint.Data[1] = checkpointVersionDelta; return true })), want: "checkpoint"},
		{name: "no part", read: stream(noParts), want: "hold no part of the base checkpoint 3"},
		{name: "log start past the base", read: stream(s.entries), logStart: s.base.First + 1, is: errBaseGone},
		{name: "retention took the range meanwhile", read: stream(nil), is: errBaseGone},
		{name: "the lower read fails", read: failing(s.base.First), is: errRead},
		{name: "the upper read fails", read: failing(s.base.Last), is: errRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, _, err := streamBase(context.Background(), "plant-a", s.base, tc.logStart, tc.read)
			if err == nil {
				t.Fatalf("streamBase decoded %d IDs, want an error", ids.count())
			}
			if tc.is != nil {
				if !errors.Is(err, tc.is) {
					t.Fatalf("error %v, want %v", err, tc.is)
				}
				return
			}
			var format *LogFormatError
			if !errors.As(err, &format) || format.Part != "checkpoint" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a *LogFormatError of the checkpoint with %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "offsets 101 to ") {
				t.Errorf("error %v does not name the base", err)
			}
		})
	}
}

// TestStreamBaseEndsReadsOnAFault checks that a decode that fails ends the
// reads still under way, and that the fault, not their end, is the error.
func TestStreamBaseEndsReadsOnAFault(t *testing.T) {
	s := newStreamedBase(t, 150_000)
	mid := s.base.First + (s.base.Last+1-s.base.First)/2
	inner := stream(s.entries)
	read := func(ctx context.Context, from, to int64, each func([]Entry)) (int, error) {
		if from == mid {
			// The upper half never comes.
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return inner(ctx, from, to, func(entries []Entry) {
			for i := range entries {
				if entries[i].Checkpoint.Part == 0 {
					p := *entries[i].Checkpoint
					p.Data = append([]byte{0, 9}, p.Data[2:]...)
					entries[i].Checkpoint = &p
				}
			}
			each(entries)
		})
	}
	_, _, err := streamBase(context.Background(), "plant-a", s.base, 0, read)
	var format *LogFormatError
	if !errors.As(err, &format) || !strings.Contains(err.Error(), "unknown version 9") {
		t.Fatalf("error %v, want a *LogFormatError of the unknown version", err)
	}
}
