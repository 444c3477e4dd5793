package chaos

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

func TestDeviceServerFencesAndRecords(t *testing.T) {
	dir := t.TempDir()
	srv, err := StartDeviceServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	fenced := &HTTPDevice{BaseURL: srv.URL(), Name: FencedDevice, Member: "m1", Client: client}
	plain := &HTTPDevice{BaseURL: srv.URL(), Name: PlainDevice, Member: "m2", Client: client}
	ctx := context.Background()
	newer, older := token(t, 9, 3), token(t, 9, 2)

	if _, err := fenced.Dispatch(ctx, dispatch.Command{ID: "a"}, newer); err != nil {
		t.Fatalf("fenced device refused the first token: %v", err)
	}
	if _, err := fenced.Dispatch(ctx, dispatch.Command{ID: "b"}, older); !dispatch.IsRejected(err) {
		t.Fatalf("fenced device took a lower token: err %v, want a rejection", err)
	}
	if _, err := plain.Dispatch(ctx, dispatch.Command{ID: "b"}, older); err != nil {
		t.Fatalf("plain device refused: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	calls, err := ReadCalls(dir, FencedDevice)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].Verdict != VerdictObeyed || calls[1].Verdict != VerdictRefused ||
		calls[1].Token != older.String() || calls[0].Member != "m1" {
		t.Fatalf("fenced records %+v", calls)
	}
	calls, err = ReadCalls(dir, PlainDevice)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].ID != "b" || calls[0].Verdict != VerdictObeyed {
		t.Fatalf("plain records %+v", calls)
	}
}
