package history

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLastRecovery(t *testing.T) {
	const (
		delta = `time=2026-12-03T09:00:00.000Z level=INFO msg="dispatch: recovered the role's log" partition=log/0 took=206ms records_read=1400 checkpoint_offset=2000190 base_offset=1780000 base_prefetched=false checkpoint_prefetched=false tail_records=12 end=2002200 compact_ids=1000000 taken_over=0 intake_next=1000000`
		full  = `time=2026-12-03T09:00:05.000Z level=INFO msg="dispatch: recovered the role's log" partition=log/0 took=42.5ms records_read=300 checkpoint_offset=2002100 base_offset=-1 base_prefetched=false checkpoint_prefetched=true tail_records=3 end=2002300 compact_ids=1000000 taken_over=0 intake_next=1000000`
		none  = `time=2026-12-03T09:00:09.000Z level=INFO msg="dispatch: recovered the role's log" partition=log/0 took=1ms records_read=0 checkpoint_offset=-1 base_offset=-1 base_prefetched=false checkpoint_prefetched=false tail_records=0 end=0 compact_ids=0 taken_over=0 intake_next=0`
	)
	const window = `time=2026-12-03T09:00:05.100Z level=INFO msg="dispatch: loaded the role's dedup window" partition=log/0 took=87ms compact_ids=1000000`
	path := filepath.Join(t.TempDir(), "node-1.log")
	first := "level=INFO msg=other\n" + delta + "\n"
	second := first + "level=INFO msg=after\n" + full + "\n" + window + "\n"
	if err := os.WriteFile(path, []byte(second+none+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from int64
		want recovery
	}{
		{0, recovery{Took: time.Millisecond, RecordsRead: 0, Below: -1}},
	} {
		if got, err := lastRecovery(path, tc.from); err != nil || got != tc.want {
			t.Errorf("from %d: %+v, %v; want %+v", tc.from, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		line string
		want recovery
	}{
		{delta, recovery{Took: 206 * time.Millisecond, RecordsRead: 1400, Below: 2002200 - 1780000}},
		{full, recovery{Took: 42500 * time.Microsecond, RecordsRead: 300, Below: 200}},
	} {
		if got, err := parseRecovery(tc.line); err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.line[:40], got, err, tc.want)
		}
	}
	// A window loaded behind intake belongs to the recovery before it.
	cut := filepath.Join(t.TempDir(), "node-2.log")
	if err := os.WriteFile(cut, []byte(second), 0o600); err != nil {
		t.Fatal(err)
	}
	want := recovery{Took: 42500 * time.Microsecond, RecordsRead: 300, Below: 200, WindowLoad: 87 * time.Millisecond}
	if got, err := lastRecovery(cut, 0); err != nil || got != want {
		t.Errorf("a recovery with its window loaded after it: %+v, %v; want %+v", got, err, want)
	}
	if _, err := lastRecovery(path, logSize(path)); err == nil {
		t.Error("a log with no recovery after the offset: no error")
	}
	if _, err := parseRecovery(`msg="dispatch: recovered the role's log" took=soon`); err == nil {
		t.Error("a line with a bad duration: no error")
	}
}
