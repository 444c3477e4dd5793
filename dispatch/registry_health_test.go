package dispatch

import (
	"context"
	"errors"
	"testing"
)

type checkedDevice struct {
	idleDevice
	err error
}

func (d checkedDevice) CheckHealth(context.Context) error { return d.err }

func TestRegistryCheckHealth(t *testing.T) {
	unreachable := errors.New("no route to unit 3")
	r := NewRegistry()
	for name, dev := range map[string]Device{
		"plain": idleDevice{}, "good": checkedDevice{}, "bad": checkedDevice{err: unreachable},
	} {
		if err := r.Register(name, dev); err != nil {
			t.Fatal(err)
		}
	}
	got := r.CheckHealth(t.Context())
	if len(got) != 3 || got["plain"] != nil || got["good"] != nil || !errors.Is(got["bad"], unreachable) {
		t.Errorf("CheckHealth %v", got)
	}
}
