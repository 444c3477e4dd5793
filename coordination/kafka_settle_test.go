package coordination

import (
	"context"
	"errors"
	"testing"
)

func TestEnding(t *testing.T) {
	for state, want := range map[string]bool{
		"PrepareCommit": true, "PrepareAbort": true, "PrepareEpochFence": true,
		"CompleteCommit": false, "CompleteAbort": false, "Empty": false, "Ongoing": false, "Dead": false, "": false,
	} {
		if got := ending(state); got != want {
			t.Errorf("ending(%q) = %t, want %t", state, got, want)
		}
	}
}

// TestWaitSettled checks the wait of a transaction for the settle of the one
// before: none when no settle ran, until its end when one runs, and no
// longer than the caller's context.
func TestWaitSettled(t *testing.T) {
	p := &roleProducer{}
	if err := p.waitSettled(context.Background()); err != nil {
		t.Fatalf("no settle ran: %v", err)
	}
	p.settled = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.waitSettled(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a settle that runs, ctx cancelled: %v, want context.Canceled", err)
	}
	close(p.settled)
	if err := p.waitSettled(context.Background()); err != nil {
		t.Fatalf("a settle that ended: %v", err)
	}
}

// TestStartSettleAfterEnd checks that a producer that ended starts no
// settle: its client is closed, and Close has stopped waiting.
func TestStartSettleAfterEnd(t *testing.T) {
	p := &roleProducer{ended: errors.New("ended")}
	p.startSettle()
	if p.settling() != nil {
		t.Fatal("an ended producer started a settle")
	}
}
