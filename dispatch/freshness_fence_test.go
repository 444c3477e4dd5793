package dispatch

import (
	"errors"
	"testing"
)

func TestTokenFenceRefusesRegression(t *testing.T) {
	var f TokenFence
	if _, ok := f.Highest(); ok {
		t.Error("a new fence reports a token")
	}
	for _, tok := range []struct {
		id    int64
		epoch int16
	}{{5, 1}, {5, 1}, {5, 2}, {6, 0}} {
		if err := f.Admit(fakeToken(t, tok.id, tok.epoch)); err != nil {
			t.Errorf("Admit %d:%d: %v", tok.id, tok.epoch, err)
		}
	}
	// A higher epoch of an older producer id is still older.
	err := f.Admit(fakeToken(t, 5, 9))
	var stale *StaleTokenError
	if !errors.As(err, &stale) || !IsRejected(err) || IsRetryable(err) {
		t.Fatalf("Admit 5:9 after 6:0: %v, want a rejected *StaleTokenError", err)
	}
	if stale.Highest != fakeToken(t, 6, 0) || stale.Token != fakeToken(t, 5, 9) {
		t.Errorf("error %+v", stale)
	}
	if h, _ := f.Highest(); h != fakeToken(t, 6, 0) {
		t.Errorf("highest %s after a refusal", h)
	}
}
