package dispatch

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// goldenCheckpoint is the checkpoint whose encoding testdata/ holds: one
// command of each state a checkpoint holds whole, and two compact IDs.
func goldenCheckpoint(t testing.TB) Checkpoint {
	tok := mustToken(t, 4001, 7)
	pending := sampleCommand()
	inDoubt := sampleCommand()
	inDoubt.ID, inDoubt.Payload, inDoubt.Attributes = "cmd-0003", nil, nil
	return Checkpoint{
		Window:          DefaultDedupWindow,
		IntakeTopic:     DefaultRequestsTopic,
		IntakePartition: 12,
		IntakeNext:      164,
		Commands: []CheckpointCommand{
			{Command: pending, Issued: true, Status: StatusPending, Attempt: FirstAttempt, Token: tok, First: 90},
			{Command: inDoubt, Issued: true, Status: StatusInDoubt, Attempt: 2, Token: tok, First: 95,
				Outcome: Outcome{CommandID: "cmd-0003", Status: StatusInDoubt, Attempt: 2, Reason: "timeout"}},
			{Command: Command{ID: "cmd-0002", Role: "plant-a", SubmittedAt: at}, Status: StatusRejected, Token: tok, First: 99,
				Outcome: Outcome{CommandID: "cmd-0002", Status: StatusRejected, Attempt: NoAttempt, Reason: "invalid"}},
		},
		IDs: []CheckpointID{
			{Hash: IDHash("cmd-0000"), First: 10, Outcome: 12, SubmittedAt: at},
			{Hash: IDHash("cmd-0001"), First: 40, Outcome: 40, SubmittedAt: at.Add(-time.Second)},
		},
	}
}

func goldenCheckpointData(t testing.TB) []byte {
	parts, err := EncodeCheckpoint("plant-a", 3, goldenCheckpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 {
		t.Fatalf("the golden checkpoint takes %d parts, want 1", len(parts))
	}
	return parts[0].Data
}

// TestCheckpointGolden checks the layout of version 1 against its golden
// vector, and that the golden vectors of both versions decode into the
// golden checkpoint: a dispatcher recovers from a checkpoint that one of
// the version before wrote.
func TestCheckpointGolden(t *testing.T) {
	golden(t, "checkpoint-state-v1", goldenCheckpointData(t))
	golden(t, "checkpoint-state-v0", encodeCheckpointV0(goldenCheckpoint(t)))
	for _, v := range []string{"v0", "v1"} {
		cp, err := AssembleCheckpoint("plant-a", []CheckpointPart{{Sequence: 3, Parts: 1, Data: readGolden(t, "testdata/checkpoint-state-"+v+".hex")}})
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if want := goldenCheckpoint(t); !reflect.DeepEqual(cp, want) {
			t.Fatalf("the golden checkpoint of %s decodes as\n%+v\nwant\n%+v", v, cp, want)
		}
	}
}

// encodeCheckpointV0 writes cp in the layout of version 0, which held the
// compact IDs in the order of their first offset, each with its hash in 8
// bytes and the deltas of its offsets and time from the one before.
func encodeCheckpointV0(cp Checkpoint) []byte {
	var w wireWriter
	w.int16(checkpointVersion0)
	encodeCheckpointHead(&w, cp)
	ids := slices.Clone(cp.IDs)
	slices.SortFunc(ids, func(a, b CheckpointID) int { return cmp.Compare(a.First, b.First) })
	w.int32(int32(len(ids)))
	prevFirst, prevAt := int64(0), int64(0)
	for _, id := range ids {
		w.buf = binary.BigEndian.AppendUint64(w.buf, id.Hash)
		w.buf = binary.AppendUvarint(w.buf, uint64(id.First-prevFirst))
		w.buf = binary.AppendUvarint(w.buf, uint64(id.Outcome-id.First))
		w.buf = binary.AppendVarint(w.buf, id.SubmittedAt.UnixMilli()-prevAt)
		prevFirst, prevAt = id.First, id.SubmittedAt.UnixMilli()
	}
	return w.buf
}

// TestCheckpointSplitAnywhere checks that the decoder reads a state split
// at any byte, into parts of any size, even empty ones: a part boundary may
// fall inside any field.
func TestCheckpointSplitAnywhere(t *testing.T) {
	want := goldenCheckpoint(t)
	for _, data := range [][]byte{goldenCheckpointData(t), encodeCheckpointV0(want)} {
		for i := 0; i <= len(data); i++ {
			for _, split := range [][][]byte{{data[:i], data[i:]}, {data[:i/2], data[i/2 : i], nil, data[i:]}} {
				parts := make([]CheckpointPart, len(split))
				for j, b := range split {
					parts[j] = CheckpointPart{Sequence: 1, Part: j, Parts: len(split), Data: b}
				}
				got, err := AssembleCheckpoint("plant-a", parts)
				if err != nil {
					t.Fatalf("split at %d of %d into %d parts: %v", i, len(data), len(split), err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("split at %d of %d into %d parts decodes as %+v", i, len(data), len(split), got)
				}
			}
			// Cut short, it fails.
			if i < len(data) {
				if _, err := AssembleCheckpoint("plant-a", []CheckpointPart{{Parts: 2, Data: data[:i/2]}, {Part: 1, Parts: 2, Data: data[i/2 : i]}}); err == nil {
					t.Fatalf("the first %d of %d bytes decode", i, len(data))
				}
			}
		}
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	want := goldenCheckpoint(t)
	parts, err := EncodeCheckpoint("plant-a", 9, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		key, value, err := EncodeEntry(Entry{Kind: EntryCheckpoint, Role: "plant-a", Token: mustToken(t, 1, 1), Member: "node-1", At: at, Checkpoint: &p})
		if err != nil {
			t.Fatal(err)
		}
		e, err := DecodeEntry(key, value)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*e.Checkpoint, p) {
			t.Fatalf("part %d decodes as %+v", p.Part, *e.Checkpoint)
		}
	}
	got, err := AssembleCheckpoint("plant-a", parts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip gives\n%+v\nwant\n%+v", got, want)
	}
	// The role is part of the checks: another role's reader refuses the
	// commands.
	if _, err := AssembleCheckpoint("plant-b", parts); err == nil {
		t.Fatal("a checkpoint of plant-a assembled for plant-b")
	}
	// A state the decoder would refuse does not encode.
	bad := want
	bad.IDs = append([]CheckpointID(nil), want.IDs...)
	bad.IDs[1].Hash = bad.IDs[0].Hash
	if _, err := EncodeCheckpoint("plant-a", 1, bad); err == nil {
		t.Fatal("a checkpoint with a hash held twice encoded")
	}
}

// TestCheckpointParts checks a checkpoint of a million compact IDs: it is
// split into parts that each fit a Kafka record, the parts assemble in any
// order, and a reader that misses a part, or mixes two checkpoints, knows.
func TestCheckpointParts(t *testing.T) {
	const n = 1_000_000
	cp := Checkpoint{Window: time.Hour}
	r := rand.New(rand.NewPCG(1, 2))
	off := int64(0)
	for i := range n {
		off += 1 + int64(r.IntN(3))
		cp.IDs = append(cp.IDs, CheckpointID{Hash: r.Uint64(), First: off, Outcome: off + int64(r.IntN(50)), SubmittedAt: at.Add(time.Duration(i) * time.Millisecond)})
	}
	sortIDs(cp.IDs)
	parts, err := EncodeCheckpoint("plant-a", 5, cp)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) < 2 {
		t.Fatalf("a million IDs take %d part", len(parts))
	}
	size := 0
	for _, p := range parts {
		size += len(p.Data)
		key, value, err := EncodeEntry(Entry{Kind: EntryCheckpoint, Role: "plant-a", Token: mustToken(t, 1, 1), Member: "node-1", At: at, Checkpoint: &p})
		if err != nil {
			t.Fatal(err)
		}
		if len(key)+len(value) > 1<<20-1024 {
			t.Fatalf("part %d is %d bytes, too close to Kafka's 1 MiB", p.Part, len(key)+len(value))
		}
	}
	t.Logf("a million compact IDs: %d bytes in %d parts", size, len(parts))
	if size > 16*n {
		t.Errorf("a million compact IDs take %d bytes, above 16 a piece", size)
	}
	shuffled := append([]CheckpointPart(nil), parts...)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	got, err := AssembleCheckpoint("plant-a", shuffled)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, cp) {
		t.Fatal("the shuffled parts assemble into another checkpoint")
	}
	var fe *LogFormatError
	if _, err := AssembleCheckpoint("plant-a", parts[1:]); !errors.As(err, &fe) {
		t.Fatalf("a checkpoint missing its first part: %v, want a *LogFormatError", err)
	}
	mixed := append([]CheckpointPart(nil), parts...)
	mixed[1].Sequence = 6
	if _, err := AssembleCheckpoint("plant-a", mixed); !errors.As(err, &fe) {
		t.Fatalf("parts of two checkpoints: %v, want a *LogFormatError", err)
	}
	twice := append([]CheckpointPart(nil), parts...)
	twice[1] = twice[0]
	if _, err := AssembleCheckpoint("plant-a", twice); !errors.As(err, &fe) {
		t.Fatalf("a part given twice: %v, want a *LogFormatError", err)
	}
}

// TestCheckpointEncodedSize checks that the state of a checkpoint is
// written into the buffers of its parts at their exact size, every part
// but the last full: the parts keep nothing more alive.
func TestCheckpointEncodedSize(t *testing.T) {
	ids := randomCompactIDs(rand.New(rand.NewPCG(7, 8)), 100_000)
	for _, n := range []int{0, 1, 100_000} {
		data := encodeCheckpointState(goldenCheckpoint(t), blocksOf(ids[:n]))
		for i, d := range data {
			if len(d) != cap(d) || (i < len(data)-1 && len(d) != MaxCheckpointPartLen) || len(d) == 0 {
				t.Fatalf("%d IDs: part %d of %d holds %d bytes in a buffer of %d", n, i, len(data), len(d), cap(d))
			}
		}
		parts := make([]CheckpointPart, len(data))
		for i := range data {
			parts[i] = CheckpointPart{Sequence: 1, Part: i, Parts: len(data), Data: data[i]}
		}
		cp, got, err := assembleCheckpoint("plant-a", parts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(flat(got), ids[:n]) || len(cp.Commands) != 3 {
			t.Fatalf("%d IDs: the state does not decode back", n)
		}
	}
}

// TestCheckpointPartsStream checks the encoder that hands each part over as
// it is written: the parts it emits are those of encodeWindowCheckpoint,
// byte for byte, all written into one buffer, and an error of the caller
// ends the encoding at that part.
func TestCheckpointPartsStream(t *testing.T) {
	ids := randomCompactIDs(rand.New(rand.NewPCG(9, 10)), 150_000)
	want, err := encodeWindowCheckpoint("plant-a", 4, goldenCheckpoint(t), blocksOf(ids))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 3 {
		t.Fatalf("%d parts; the test needs several", len(want))
	}
	var buffers []*byte
	n := 0
	err = eachWindowCheckpointPart("plant-a", 4, goldenCheckpoint(t), blocksOf(ids), func(p CheckpointPart) error {
		w := want[n]
		if p.Sequence != w.Sequence || p.Part != w.Part || p.Parts != w.Parts || !bytes.Equal(p.Data, w.Data) {
			t.Errorf("part %d: %d of %d, %d bytes; want %d of %d, %d bytes", n, p.Part, p.Parts, len(p.Data), w.Part, w.Parts, len(w.Data))
		}
		buffers = append(buffers, unsafe.SliceData(p.Data))
		n++
		return nil
	})
	if err != nil || n != len(want) {
		t.Fatalf("%d parts emitted, want %d: %v", n, len(want), err)
	}
	for i, b := range buffers {
		if b != buffers[0] {
			t.Errorf("part %d in a buffer of its own: the parts are not written into one", i)
		}
	}
	stop := errors.New("stop")
	n = 0
	err = eachWindowCheckpointPart("plant-a", 4, goldenCheckpoint(t), blocksOf(ids), func(CheckpointPart) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Fatalf("after an error at the second part: %d parts emitted, %v", n, err)
	}
}

// randomCompactIDs returns n compact IDs drawn from r, sorted by hash, with
// offsets and times anywhere a checkpoint takes them.
func randomCompactIDs(r *rand.Rand, n int) []compactID {
	ids := make([]compactID, n)
	for i := range ids {
		ids[i] = compactID{hash: r.Uint64(), first: r.Int64N(1 << 40), submitted: at.UnixMilli() - r.Int64N(1<<33) + 1<<32}
		ids[i].outcome = ids[i].first + r.Int64N(1<<20)
	}
	sortByHash(ids)
	return ids
}

// flat returns the IDs of blocks in one slice.
func flat(blocks idBlocks) []compactID { return blocks.all() }

// TestAssembleCheckpointHead checks the decoder of a lookup, which leaves
// the compact IDs for later: the head it returns and the IDs it decodes
// then are what assembleCheckpoint returns, for a full checkpoint and a
// delta, and IDs that do not decode fail when they are decoded, not before.
func TestAssembleCheckpointHead(t *testing.T) {
	full := goldenCheckpoint(t)
	delta := goldenCheckpoint(t)
	delta.Base = &CheckpointBase{Token: mustToken(t, 4001, 6), Sequence: 2, First: 3, Last: 5}
	for name, cp := range map[string]Checkpoint{"full": full, "delta": delta} {
		parts, err := EncodeCheckpoint("plant-a", 3, cp)
		if err != nil {
			t.Fatal(err)
		}
		wantCP, wantIDs, err := assembleCheckpoint("plant-a", slices.Clone(parts))
		if err != nil {
			t.Fatal(err)
		}
		head, ids, err := assembleCheckpointHead("plant-a", slices.Clone(parts))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(head, wantCP) {
			t.Errorf("%s: head %+v, want %+v", name, head, wantCP)
		}
		got, err := ids()
		if err != nil || !reflect.DeepEqual(got, wantIDs) {
			t.Errorf("%s: IDs %+v, %v; want %+v", name, got, err, wantIDs)
		}

		// A byte more after the IDs: the head decodes, the IDs do not.
		long := slices.Clone(parts)
		long[0].Data = append(slices.Clone(long[0].Data), 0)
		if _, ids, err = assembleCheckpointHead("plant-a", long); err != nil {
			t.Fatalf("%s: a trailing byte failed the head: %v", name, err)
		}
		var fe *LogFormatError
		if _, err := ids(); !errors.As(err, &fe) {
			t.Errorf("%s: IDs followed by a byte: %v, want a *LogFormatError", name, err)
		}
	}
}
