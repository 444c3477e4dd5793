package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// goldenDelta is the delta checkpoint whose encoding testdata/ holds: the
// golden checkpoint on a base.
func goldenDelta(t testing.TB) Checkpoint {
	cp := goldenCheckpoint(t)
	cp.Base = &CheckpointBase{Token: mustToken(t, 4001, 7), Sequence: 2, First: 60, Last: 62}
	return cp
}

// TestDeltaCheckpointGolden checks the layout of version 2 against its
// golden vector, and that it decodes back, split at any byte.
func TestDeltaCheckpointGolden(t *testing.T) {
	want := goldenDelta(t)
	parts, err := EncodeCheckpoint("plant-a", 3, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 {
		t.Fatalf("the golden delta takes %d parts, want 1", len(parts))
	}
	golden(t, "checkpoint-state-v2", parts[0].Data)
	data := readGolden(t, "testdata/checkpoint-state-v2.hex")
	for i := 0; i <= len(data); i++ {
		got, err := AssembleCheckpoint("plant-a", []CheckpointPart{{Sequence: 3, Parts: 2, Data: data[:i]}, {Sequence: 3, Part: 1, Parts: 2, Data: data[i:]}})
		if err != nil {
			t.Fatalf("split at %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d: the golden delta decodes as\n%+v\nwant\n%+v", i, got, want)
		}
		if i < len(data) {
			if _, err := AssembleCheckpoint("plant-a", []CheckpointPart{{Sequence: 3, Parts: 1, Data: data[:i]}}); err == nil {
				t.Fatalf("the first %d of %d bytes decode", i, len(data))
			}
		}
	}
	// A full checkpoint is still written as version 1.
	full, err := EncodeCheckpoint("plant-a", 3, goldenCheckpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	if v := int(full[0].Data[0])<<8 | int(full[0].Data[1]); v != checkpointVersion {
		t.Fatalf("a full checkpoint is written as version %d", v)
	}
}

// TestDeltaCheckpointBaseChecked checks that a base out of range neither
// encodes nor decodes.
func TestDeltaCheckpointBaseChecked(t *testing.T) {
	for name, base := range map[string]CheckpointBase{
		"negative sequence": {Token: mustToken(t, 1, 0), Sequence: -1, First: 1, Last: 1},
		"offsets reversed":  {Token: mustToken(t, 1, 0), First: 5, Last: 4},
		"negative first":    {Token: mustToken(t, 1, 0), First: -1, Last: 4},
		"no token":          {Token: coordination.NoEpoch, First: 1, Last: 1},
	} {
		cp := goldenCheckpoint(t)
		cp.Base = &base
		if _, err := EncodeCheckpoint("plant-a", 1, cp); err == nil {
			t.Errorf("%s: a delta on %+v encodes", name, base)
		}
		good := goldenDelta(t)
		parts, err := EncodeCheckpoint("plant-a", 1, good)
		if err != nil {
			t.Fatal(err)
		}
		// The base's fields follow the head: rewrite them in place.
		data := parts[0].Data
		i := len(data) - (8 + 2 + 8 + 8 + 8) - baseTailLen(t, good)
		var w wireWriter
		w.int64(base.Token.ProducerID())
		w.int16(base.Token.ProducerEpoch())
		w.int64(base.Sequence)
		w.int64(base.First)
		w.int64(base.Last)
		copy(data[i:], w.buf)
		if _, err := AssembleCheckpoint("plant-a", parts); err == nil {
			t.Errorf("%s: a delta on %+v decodes", name, base)
		}
	}
}

// baseTailLen is the length of what follows the base in cp's encoding: its
// compact IDs.
func baseTailLen(t testing.TB, cp Checkpoint) int {
	t.Helper()
	noIDs := cp
	noIDs.IDs = nil
	a, err := EncodeCheckpoint("plant-a", 1, noIDs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeCheckpoint("plant-a", 1, cp)
	if err != nil {
		t.Fatal(err)
	}
	return len(b[0].Data) - len(a[0].Data) + 4
}

// TestOverlay checks the window a delta describes: the base's IDs with the
// delta's in place of those of the same hash, in hash order, and the
// TestMergeBlockReplaces checks mergeBlock against its definition: the IDs
// of blk whose hash add does not hold, and those of add, in hash order, in
// blocks of at most windowBlock IDs as even as they can be, for blocks and
// additions of random sizes and overlaps, replacements at either end
// included.
func TestMergeBlockReplaces(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	sorted := func(n int, hashes []uint64) []compactID {
		ids := make([]compactID, 0, n)
		for _, h := range rng.Perm(len(hashes))[:n] {
			id := compactID{hash: hashes[h], first: rng.Int64N(1000), submitted: packEpoch + rng.Int64N(1<<40)}
			if rng.IntN(4) == 0 {
				id.submitted = 1 // before packEpoch: held wide
			}
			id.outcome = id.first + rng.Int64N(3)
			ids = append(ids, id)
		}
		sortByHash(ids)
		return ids
	}
	for round := range 500 {
		hashes := make([]uint64, 1+rng.IntN(3*windowBlock))
		for i := range hashes {
			hashes[i] = uint64(i)*3 + 1
		}
		blk := sorted(1+rng.IntN(min(len(hashes), windowBlock)), hashes)
		add := sorted(rng.IntN(len(hashes)+1), hashes)
		replaced := map[uint64]bool{}
		for _, a := range add {
			replaced[a.hash] = true
		}
		var want []compactID
		for _, id := range blk {
			if !replaced[id.hash] {
				want = append(want, id)
			}
		}
		want = append(want, add...)
		if len(want) == 0 {
			continue
		}
		sortByHash(want)
		pieces := (len(want) + windowBlock - 1) / windowBlock
		var sizes []int
		for p := range pieces {
			sizes = append(sizes, len(want)/pieces)
			if p < len(want)%pieces {
				sizes[p]++
			}
		}
		blocks := blocksOf(blk)
		got := idBlocks{list: blocks.mergeBlock(blocks.list[0], add), wide: blocks.wide}
		wide := 0
		for _, id := range want {
			if _, ok := pack(id); !ok {
				wide++
			}
		}
		if len(got.wide) != wide {
			t.Fatalf("round %d: %d wide IDs held, want %d", round, len(got.wide), wide)
		}
		if !slices.Equal(flat(got), want) || !slices.Equal(blockSizes(got), sizes) {
			t.Fatalf("round %d: %d IDs over %d: blocks of %v, want %v", round, len(add), len(blk), blockSizes(got), sizes)
		}
	}
}

func blockSizes(b idBlocks) []int {
	var out []int
	for _, blk := range b.list {
		out = append(out, len(blk))
	}
	return out
}

// base's blocks that the delta does not touch kept as they are.
func TestOverlay(t *testing.T) {
	var base []compactID
	for i := range 3 * windowBlock {
		base = append(base, compactID{hash: uint64(i) * 10, first: int64(i), outcome: int64(i), submitted: 1})
	}
	blocks := blocksOf(base)
	untouched := &blocks.list[1][0]
	delta := []compactID{
		{hash: 5, first: 100000, outcome: 100000, submitted: 2},                            // new, first block
		{hash: 20, first: 100001, outcome: 100002, submitted: 2},                           // replaces hash 20
		{hash: uint64(3*windowBlock)*10 + 7, first: 100003, outcome: 100003, submitted: 2}, // new, past the end
	}
	got := overlay(blocks, blocksOf(delta))
	want := map[uint64]compactID{}
	for _, id := range base {
		want[id.hash] = id
	}
	for _, id := range delta {
		want[id.hash] = id
	}
	all := flat(got)
	if len(all) != len(want) {
		t.Fatalf("overlay holds %d IDs, want %d", len(all), len(want))
	}
	for i, id := range all {
		if i > 0 && id.hash <= all[i-1].hash {
			t.Fatalf("ID %d: hash %d after %d", i, id.hash, all[i-1].hash)
		}
		if want[id.hash] != id {
			t.Fatalf("hash %d: %+v, want %+v", id.hash, id, want[id.hash])
		}
	}
	kept := false
	for _, blk := range got.list {
		if &blk[0] == untouched {
			kept = true
		}
	}
	if !kept {
		t.Fatal("overlay copied a block that the delta adds nothing to")
	}
	if got := overlay(idBlocks{}, blocksOf(delta)); !slices.Equal(flat(got), delta) {
		t.Fatalf("a delta on an empty base: %+v", got)
	}
}

// TestDeltaCheckpointRecovery runs a leader whose window is large against
// its checkpoint interval, so that it writes deltas between full
// checkpoints, among a neighbour's records: Verify finds the log sound, and
// a successor that starts from a delta reads the delta, its base and a
// bounded tail, and knows what a successor that reads the whole log knows.
func TestDeltaCheckpointRecovery(t *testing.T) {
	const interval = 40
	log := &leaderLog{}
	dev := &countingDevice{}
	devices := map[string]Device{"dev": dev}
	first := startLeader(t, log, &rangeLog{leaderLog: log}, 0, devices, WithCheckpointInterval(interval))
	const rounds, per = 12, 200
	for round := range rounds {
		submitMany(t, first.d, fmt.Sprintf("r%d", round), per, time.Now())
		otherRole(t, log, round, 30)
	}
	// The window's 2,400 IDs make a full checkpoint due every 150 records,
	// and a checkpoint every 40: one of the next few is a delta.
	last := 0
	for ; last < 10*(interval/2+1); last += interval/2 + 1 {
		if cps := checkpointsOf(t, log.entries(t)); cps[len(cps)-1].Base != nil {
			break
		}
		submitMany(t, first.d, fmt.Sprintf("last%d", last), interval/2+1, time.Now())
	}
	first.stop(t)
	verifyClean(t, log)

	fulls, deltas := 0, 0
	cps := checkpointsOf(t, log.entries(t))
	for _, cp := range cps {
		if cp.Base == nil {
			fulls++
		} else {
			deltas++
		}
	}
	newest := cps[len(cps)-1]
	if fulls == 0 || deltas == 0 || newest.Base == nil {
		t.Fatalf("the leader wrote %d full checkpoints and %d deltas, the newest with base %+v; want both, and a delta last", fulls, deltas, newest.Base)
	}
	if len(newest.IDs) >= rounds*per/2 {
		t.Fatalf("the newest delta holds %d compact IDs of %d: not only those since its base", len(newest.IDs), rounds*per)
	}

	reader := &rangeLog{leaderLog: log}
	second := startLeader(t, log, reader, 1, devices, WithCheckpointInterval(interval))
	stats := second.d.RecoveryStats()
	if stats.CheckpointOffset < 0 || stats.BaseOffset < 0 || stats.BaseOffset >= stats.CheckpointOffset {
		t.Fatalf("recovery stats %+v: want a delta on a base before it", stats)
	}
	// The search reads an interval, then two, back from the end; the base
	// is read at its own offsets.
	if bound := 3*(interval+30) + 1 + (stats.BaseOffset - newest.Base.First + 1); int64(stats.RecordsRead) > bound {
		t.Fatalf("recovery read %d records of a log of %d, want at most %d", stats.RecordsRead, len(log.entries(t)), bound)
	}
	if r := second.d.Retained(); r.Whole != 0 || r.Compact != rounds*per+last {
		t.Fatalf("the successor holds %+v, want %d compact IDs and nothing whole", r, rounds*per+last)
	}
	whole := startLeader(t, log, log, 2, devices) // reads the whole log
	for round := range rounds {
		for i := range per {
			id := fmt.Sprintf("r%d-%d", round, i)
			a, okA := second.d.Lookup(id)
			b, okB := whole.d.Lookup(id)
			if !okA || !okB || !reflect.DeepEqual(a, b) || a.Status != StatusSucceeded {
				t.Fatalf("%s: from the delta %+v %t, from the whole log %+v %t", id, a, okA, b, okB)
			}
		}
	}
	// The successor's first checkpoint is a delta on its predecessor's
	// newest full checkpoint, with the IDs of the delta it started from;
	// the log stays sound.
	submitMany(t, second.d, "next", 3*interval, time.Now())
	whole.stop(t)
	second.stop(t)
	verifyClean(t, log)
	found := false
	for _, cp := range checkpointsOf(t, log.entries(t)) {
		if cp.token != second.leader.Token() {
			continue
		}
		found = true
		if cp.first != cp.last {
			t.Fatalf("the successor's first checkpoint takes offsets %d to %d, want a delta of one part", cp.first, cp.last)
		}
		if cp.Base == nil || *cp.Base != *newest.Base || len(cp.IDs) < len(newest.IDs) {
			t.Fatalf("the successor's first checkpoint: base %+v and %d IDs, want a delta on %+v with at least the %d IDs of its predecessor's",
				cp.Base, len(cp.IDs), *newest.Base, len(newest.IDs))
		}
		break
	}
	if !found {
		t.Fatal("the successor wrote no checkpoint")
	}
	if n := dev.count("r5-9"); n != 1 {
		t.Fatalf("r5-9 dispatched %d times", n)
	}
}

// TestDeltaBaseGone checks a delta whose base retention took: the search
// reads the partition from its start, as without a checkpoint.
func TestDeltaBaseGone(t *testing.T) {
	const interval = 20
	log := &leaderLog{}
	r := startLeader(t, log, &rangeLog{leaderLog: log}, 0, map[string]Device{"dev": &countingDevice{}}, WithCheckpointInterval(interval))
	submitMany(t, r.d, "g", 400, time.Now())
	r.stop(t)
	entries := log.entries(t)
	reader := &rangeLog{leaderLog: log}
	rr := roleRange(reader, r.d.logTP, r.d.role)
	// The search ends after the last delta.
	delta := lastDelta(t, entries, false)
	end := delta.last + 1

	s, err := searchCheckpoint(context.Background(), r.d.role, 0, end, interval, rr, false, nil)
	if err != nil || !s.found || s.base < 0 {
		t.Fatalf("search from the start: found %t, base %d, %v; want a delta", s.found, s.base, err)
	}
	// Were the log to start past the base, the delta is useless.
	start := s.base + 1
	s, err = searchCheckpoint(context.Background(), r.d.role, start, end, interval, rr, false, nil)
	if err != nil || s.found {
		t.Fatalf("search from offset %d: found %t, %v; want no checkpoint", start, s.found, err)
	}
	if got, want := s.entries[0].Offset, firstOfRole(entries, r.d.role, start); got != want {
		t.Fatalf("the search without the base read from offset %d, want the role's first record at %d", got, want)
	}
	// A base that is not where the delta says is malformed.
	base := *delta.Base
	base.Sequence++
	var format *LogFormatError
	if _, _, err := readBase(context.Background(), r.d.role, base, 0, rr, nil); !errors.As(err, &format) {
		t.Fatalf("a base that is not there: %v, want a *LogFormatError", err)
	}
}

func firstOfRole(entries []Entry, role string, from int64) int64 {
	for _, e := range entries {
		if e.Offset >= from && e.Role == role {
			return e.Offset
		}
	}
	return -1
}

// loggedCheckpoint is a checkpoint of the log with where it is.
type loggedCheckpoint struct {
	Checkpoint
	token       coordination.FencingToken
	first, last int64 // the offsets of its first and last part
}

// checkpointsOf returns the checkpoints of entries, in log order.
func checkpointsOf(t *testing.T, entries []Entry) []loggedCheckpoint {
	t.Helper()
	var out []loggedCheckpoint
	parts := map[string][]CheckpointPart{}
	firsts := map[string]int64{}
	for _, e := range entries {
		if e.Kind != EntryCheckpoint {
			continue
		}
		k := fmt.Sprintf("%s/%s/%d", e.Role, e.Token, e.Checkpoint.Sequence)
		if len(parts[k]) == 0 {
			firsts[k] = e.Offset
		}
		parts[k] = append(parts[k], *e.Checkpoint)
		if len(parts[k]) < e.Checkpoint.Parts {
			continue
		}
		cp, err := AssembleCheckpoint(e.Role, parts[k])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, loggedCheckpoint{Checkpoint: cp, token: e.Token, first: firsts[k], last: e.Offset})
	}
	if len(out) == 0 {
		t.Fatal("the log holds no checkpoint")
	}
	return out
}

// lastDelta returns the log's last delta checkpoint, and the last with
// compact IDs when withIDs is set.
func lastDelta(t *testing.T, entries []Entry, withIDs bool) loggedCheckpoint {
	t.Helper()
	cps := checkpointsOf(t, entries)
	for i := len(cps) - 1; i >= 0; i-- {
		if cps[i].Base != nil && (!withIDs || len(cps[i].IDs) > 0) {
			return cps[i]
		}
	}
	t.Fatalf("the log holds no delta (with IDs: %t)", withIDs)
	return loggedCheckpoint{}
}

// TestVerifyDeltaCheckpoints checks that Verify reads a delta over its
// base: it finds a log of deltas sound, checks a log that begins at a delta
// from it, and reports a delta on another base than the role's newest full
// checkpoint, or one that leaves out an ID added since its base.
func TestVerifyDeltaCheckpoints(t *testing.T) {
	const interval = 20
	log := &leaderLog{}
	r := startLeader(t, log, &rangeLog{leaderLog: log}, 0, map[string]Device{"dev": &countingDevice{}}, WithCheckpointInterval(interval))
	for round := range 8 {
		submitMany(t, r.d, fmt.Sprintf("v%d", round), 100, time.Now())
	}
	r.stop(t)
	entries := log.entries(t)
	if vs := Verify(entries); len(vs) > 0 {
		t.Fatalf("the dispatcher's log: %v", vs)
	}
	// The last delta, whose base comes before it; the fake log's offsets
	// are the entries' indexes.
	logged := lastDelta(t, entries, true)
	delta := logged.Checkpoint
	if vs := Verify(entries[logged.first:]); len(vs) > 0 {
		t.Fatalf("the log from a delta: %v", vs)
	}
	if vs := Verify(entries[delta.Base.First:]); len(vs) > 0 {
		t.Fatalf("the log from the delta's base: %v", vs)
	}

	upTo, part := entries[:logged.last+1], entries[logged.last]
	again := func(cp Checkpoint) []Entry { return appendCheckpoint(t, upTo, part, cp) }
	if vs := Verify(again(delta)); len(vs) > 0 {
		t.Fatalf("the same delta again: %v", vs)
	}
	otherBase := delta
	b := *delta.Base
	b.Sequence--
	otherBase.Base = &b
	if vs := Verify(again(otherBase)); !slices.Contains(kinds(vs), ViolationCheckpointMalformed) {
		t.Errorf("a delta on another base: Verify found %v, want a malformed checkpoint", vs)
	}
	missing := delta
	missing.IDs = delta.IDs[1:]
	if vs := Verify(again(missing)); !slices.Contains(kinds(vs), ViolationCheckpointMismatch) {
		t.Errorf("a delta without an ID added since its base: Verify found %v, want a checkpoint mismatch", vs)
	}
}

// TestLookupReadsBaseOnlyWhenNeeded checks the client's lazy search: it
// leaves the IDs of the delta it finds undecoded and its base unread,
// decodes the delta's IDs and answers from them for an ID the delta holds,
// and reads the base only for an ID it does not.
func TestLookupReadsBaseOnlyWhenNeeded(t *testing.T) {
	const interval, n = 20, 400
	log := &leaderLog{}
	r := startLeader(t, log, &rangeLog{leaderLog: log}, 0, map[string]Device{"dev": &countingDevice{}}, WithCheckpointInterval(interval))
	submitMany(t, r.d, "g", n, time.Now())
	r.stop(t)
	delta := lastDelta(t, log.entries(t), true)
	end, inDelta := delta.last+1, map[uint64]bool{}
	for _, id := range delta.IDs {
		inDelta[id.Hash] = true
	}
	var deltaID, baseID string
	for i := range n {
		id := fmt.Sprintf("g-%d", i)
		if inDelta[IDHash(id)] {
			deltaID = id
		} else if baseID == "" {
			baseID = id
		}
	}

	reader := &rangeLog{leaderLog: log}
	ctx := context.Background()
	// A first step of 1 finds the delta before it reads its base; a first
	// step of the whole log reads the base with it, and the base is then
	// decoded from the parts in hand, not read again.
	for _, tc := range []struct {
		step   int64
		inHand bool
	}{{1, false}, {end, true}} {
		cs, err := searchCheckpoint(ctx, r.d.role, 0, end, tc.step, roleRange(reader, r.d.logTP, r.d.role), true, nil)
		if err != nil || !cs.found || cs.unread == nil || cs.idsLeft == nil || cs.ids.count() != 0 {
			t.Fatalf("step %d: lazy search: found %t, base unread %t, IDs undecoded %t, %d IDs, %v; want the delta's IDs undecoded and its base unread",
				tc.step, cs.found, cs.unread != nil, cs.idsLeft != nil, cs.ids.count(), err)
		}
		if got := cs.unread.parts != nil; got != tc.inHand {
			t.Fatalf("step %d: the search holds the base's parts: %t, want %t", tc.step, got, tc.inHand)
		}
		s := &logSearch{checkpointSearch: cs}
		read := reader.read.Load()
		if ids, err := s.compactIDs(ctx, deltaID); err != nil || len(ids) != 1 || s.unread == nil || reader.read.Load() != read || s.ids.count() != len(inDelta) {
			t.Fatalf("step %d: an ID of the delta: %+v, %v; base read %t, %d records read, %d IDs decoded of the delta's %d",
				tc.step, ids, err, s.unread == nil, reader.read.Load()-read, s.ids.count(), len(inDelta))
		}
		ids, err := s.compactIDs(ctx, baseID)
		if err != nil || len(ids) != 1 || s.unread != nil {
			t.Fatalf("step %d: an ID of the base: %+v, %v; base loaded %t", tc.step, ids, err, s.unread == nil)
		}
		if readAgain := reader.read.Load() != read; readAgain == tc.inHand {
			t.Fatalf("step %d: the base was read from the log: %t, want %t", tc.step, readAgain, !tc.inHand)
		}
		if ids, err := s.compactIDs(ctx, deltaID); err != nil || len(ids) != 1 {
			t.Fatalf("step %d: an ID of the delta after the base was read: %+v, %v", tc.step, ids, err)
		}
	}
}

// TestRecoveryFromDeltaEqualsFullLog is the delta's property: for any lawful
// log and any two cuts, a fold from a delta taken at the second cut, laid
// over a full checkpoint taken at the first, and the records after the
// second cut gives the state of a fold of the whole log. The delta holds
// what a leader's does: the commands and intake whole, and the compact IDs
// that its base does not hold as they are.
func TestRecoveryFromDeltaEqualsFullLog(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	requests := coordination.TopicPartition{Topic: DefaultRequestsTopic, Partition: 12}
	tok := mustToken(t, 3, 1)
	for seed := range 400 {
		c := randChoices{rand.New(rand.NewPCG(uint64(seed), 13))}
		entries := placedLawfulLog(c, now)
		cut1 := c.intn(len(entries) + 1)
		cut2 := cut1 + c.intn(len(entries)-cut1+1)
		full := foldLog(propRole, requests, entries)

		base := checkpointOfFold(foldLog(propRole, requests, entries[:cut1]), now)
		delta := checkpointOfFold(foldLog(propRole, requests, entries[:cut2]), now)
		held := map[uint64]CheckpointID{}
		for _, id := range base.IDs {
			held[id.Hash] = id
		}
		added := delta.IDs[:0:0]
		for _, id := range delta.IDs {
			if b, ok := held[id.Hash]; !ok || b != id {
				added = append(added, id)
			}
		}
		delta.IDs, delta.Base = added, &CheckpointBase{Token: tok, Sequence: 1, First: int64(cut1), Last: int64(cut1)}

		b, d := roundTrip(t, seed, base), roundTrip(t, seed, delta)
		if d.Base == nil || *d.Base != *delta.Base {
			t.Fatalf("seed %d: the delta's base decodes as %+v", seed, d.Base)
		}
		f := newFolder(propRole, requests)
		f.seed(d, overlay(blocksOf(toCompacts(b.IDs)), blocksOf(toCompacts(d.IDs))))
		for i := cut2; i < len(entries); i++ {
			f.apply(&entries[i])
		}
		sameState(t, fmt.Sprintf("seed %d cuts %d %d/%d", seed, cut1, cut2, len(entries)), full, f.finish())
	}
}

// windowOf returns a window of n compact IDs, each with the hash and the
// offsets of the next command.
func windowOf(n int) *idWindow {
	w := newIDWindow()
	for i := range n {
		w.add(CheckpointID{Hash: uint64(i + 1), First: int64(2 * i), Outcome: int64(2*i + 1), SubmittedAt: at})
	}
	return w
}

// TestFullCheckpointDue checks when a checkpoint writes the window whole: a
// window of at most checkpointDivisor intervals always; a larger one when no
// base is known, once a record for each checkpointDivisor of its IDs passed
// since the base, and, for a
// leadership's first checkpoint, when a delta would hold more than a quarter
// of the window.
func TestFullCheckpointDue(t *testing.T) {
	const interval = 10
	base := &CheckpointBase{Token: mustToken(t, 1, 0), First: 1, Last: 1}
	for _, c := range []struct {
		name      string
		ids       int
		base      *CheckpointBase
		seq       int64
		since     int
		added     int
		wantWhole bool
	}{
		{"a small window", checkpointDivisor * interval, base, 1, 0, 0, true},
		{"no base", 1600, nil, 1, 0, 0, true},
		{"a delta", 1600, base, 1, 1600/checkpointDivisor - 1, 40, false},
		{"the full one is due", 1600, base, 1, 1600 / checkpointDivisor, 40, true},
		{"a first delta of a quarter", 1600, base, 0, 1000, 400, false},
		{"a first delta above a quarter", 1600, base, 0, 0, 401, true},
	} {
		d := &Dispatcher{cfg: &config{checkpointInterval: interval}, ids: windowOf(c.ids), cpBase: c.base,
			cpSeq: c.seq, cpFullSince: c.since, cpAdded: make([]addedID, c.added)}
		if got := d.fullCheckpointDueLocked(); got != c.wantWhole {
			t.Errorf("%s: whole %t, want %t", c.name, got, c.wantWhole)
		}
	}
}

// TestCheckpointIDsPerRecord runs the schedule of fullCheckpointDueLocked
// over a window of steady size, one new ID every two records and a
// checkpoint every interval, and counts the compact IDs the checkpoints
// write: the full ones about checkpointDivisor a record, and the deltas,
// which hold the IDs added since the full one (here an eighth of the
// window at most), about window/(4 x checkpointDivisor x interval) a
// record, as the package doc and checkpointDivisor's say.
func TestCheckpointIDsPerRecord(t *testing.T) {
	const (
		interval = 100
		ids      = 64 * interval
		records  = 40 * ids
	)
	d := &Dispatcher{cfg: &config{checkpointInterval: interval}, ids: windowOf(ids),
		cpBase: &CheckpointBase{Token: mustToken(t, 1, 0), First: 1, Last: 1}, cpSeq: 1}
	var whole, delta int
	for r := 1; r <= records; r++ {
		d.cpFullSince++
		if r%2 == 0 {
			// The window's size is steady: an ID leaves as one comes.
			d.cpAdded = append(d.cpAdded, addedID{hash: uint64(ids + r)})
		}
		if r%interval != 0 {
			continue
		}
		if d.fullCheckpointDueLocked() {
			whole += d.ids.len()
			d.cpFullSince, d.cpAdded = 0, nil
		} else {
			delta += len(d.cpAdded)
		}
	}
	perRecord := func(n int) float64 { return float64(n) / records }
	if got := perRecord(whole); got < 0.9*checkpointDivisor || got > 1.1*checkpointDivisor {
		t.Errorf("full checkpoints wrote %.2f IDs a record, want about %d", got, checkpointDivisor)
	}
	want := float64(ids) / (4 * checkpointDivisor * interval)
	if got := perRecord(delta); got < 0.85*want || got > 1.1*want {
		t.Errorf("deltas wrote %.2f IDs a record, want about %.2f", got, want)
	}
}

// TestReadHalves reads ranges in two halves at once: the entries come back
// whole and in offset order, the records read add up, and an error of
// either half fails the read.
func TestReadHalves(t *testing.T) {
	var calls atomic.Int32
	read := func(_ context.Context, from, to int64) ([]Entry, int, error) {
		calls.Add(1)
		if from <= 13 && 13 < to {
			return nil, int(to - from), errors.New("offset 13 is unreadable")
		}
		var out []Entry
		for o := from; o < to; o++ {
			out = append(out, Entry{Offset: o})
		}
		return out, int(to - from), nil
	}
	for _, tc := range []struct {
		first, end int64
		calls      int32
	}{{0, 0, 1}, {0, 1, 1}, {0, 2, 2}, {0, 7, 2}, {3, 12, 2}} {
		calls.Store(0)
		entries, n, err := readHalves(context.Background(), tc.first, tc.end, read)
		if err != nil || n != int(tc.end-tc.first) || len(entries) != n || calls.Load() != tc.calls {
			t.Fatalf("[%d, %d): %d entries, %d read in %d reads, %v", tc.first, tc.end, len(entries), n, calls.Load(), err)
		}
		for i, e := range entries {
			if e.Offset != tc.first+int64(i) {
				t.Fatalf("[%d, %d): entry %d has offset %d", tc.first, tc.end, i, e.Offset)
			}
		}
	}
	for _, rng := range [][2]int64{{10, 14}, {12, 20}} {
		if _, _, err := readHalves(context.Background(), rng[0], rng[1], read); err == nil {
			t.Fatalf("[%d, %d) read with offset 13 unreadable", rng[0], rng[1])
		}
	}
}

// TestRecoveryDecodesTheBaseItRead checks that a recovery whose search read
// the base of the delta it found, in the same step, decodes the base from
// those records rather than reading its offsets again, and recovers the
// same window as one that reads them.
func TestRecoveryDecodesTheBaseItRead(t *testing.T) {
	const interval = 40
	log, delta, role, _ := deltaLog(t, interval, map[string]Device{"dev": &countingDevice{}})
	ctx := context.Background()
	reader := &rangeLog{leaderLog: log}
	start, end, err := reader.Bounds(ctx, coordination.TopicPartition{})
	if err != nil {
		t.Fatal(err)
	}
	requests := coordination.TopicPartition{Topic: DefaultRequestsTopic}
	recoverWith := func(step int64) (recovered, RecoveryStats) {
		t.Helper()
		s, stats, err := recoverState(ctx, role.String(), requests, start, end, step, roleRange(reader, coordination.TopicPartition{}, role.String()), nil, false)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if stats.CheckpointOffset != delta.last || stats.BaseOffset != delta.Base.Last {
			t.Fatalf("step %d: recovered from the checkpoint at %d on the base at %d, want %d on %d",
				step, stats.CheckpointOffset, stats.BaseOffset, delta.last, delta.Base.Last)
		}
		return s, stats
	}
	// A step from the end to the base's first offset reads the delta and its
	// base at once.
	whole, wholeStats := recoverWith(end - delta.Base.First)
	if want := int(end - delta.Base.First); wholeStats.RecordsRead != want {
		t.Errorf("a step that holds the base read %d records, want %d: the %d from the base's first offset to the end, once",
			wholeStats.RecordsRead, want, want)
	}
	// A first step of 1 finds the delta first, then reads the base.
	apart, apartStats := recoverWith(1)
	if apartStats.RecordsRead <= int(end-delta.first) {
		t.Errorf("a search that found the delta alone read %d records, no more than the %d from the delta on: the base was not read",
			apartStats.RecordsRead, end-delta.first)
	}
	if got, want := whole.ids.all(), apart.ids.all(); !slices.Equal(got, want) || len(got) == 0 {
		t.Fatalf("the window decoded from the base in hand holds %d IDs, the one read apart %d; want them equal, and not empty",
			len(got), len(want))
	}
}
