package chaos

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
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
	newer := coordination.Authority{Term: 30, Token: token(t, 9, 3)}
	rotated := coordination.Authority{Term: 30, Token: token(t, 2, 0)}
	older := coordination.Authority{Term: 21, Token: token(t, 40, 2)}

	if _, err := fenced.DispatchUnder(ctx, dispatch.Command{ID: "a"}, newer); err != nil {
		t.Fatalf("fenced device refused the first term: %v", err)
	}
	if _, err := fenced.DispatchUnder(ctx, dispatch.Command{ID: "r"}, rotated); err != nil {
		t.Fatalf("fenced device refused a rotation within the term: %v", err)
	}
	if _, err := fenced.DispatchUnder(ctx, dispatch.Command{ID: "b"}, older); !dispatch.IsRejected(err) {
		t.Fatalf("fenced device took an earlier term: err %v, want a rejection", err)
	}
	if _, err := fenced.Dispatch(ctx, dispatch.Command{ID: "n"}, newer.Token); !dispatch.IsRejected(err) {
		t.Fatalf("fenced device took a call without a term: err %v, want a rejection", err)
	}
	if _, err := plain.DispatchUnder(ctx, dispatch.Command{ID: "b"}, older); err != nil {
		t.Fatalf("plain device refused: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	calls, err := ReadCalls(dir, FencedDevice)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 4 || calls[0].Verdict != VerdictObeyed || calls[1].Verdict != VerdictObeyed ||
		calls[2].Verdict != VerdictRefused || calls[3].Verdict != VerdictRefused ||
		calls[2].Term != 21 || calls[2].Token != older.Token.String() || calls[0].Member != "m1" {
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
