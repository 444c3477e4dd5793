package dispatch

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// idleDevice acts on every command at once and does nothing.
type idleDevice struct{}

func (idleDevice) Dispatch(context.Context, Command, coordination.FencingToken) (Result, error) {
	return Result{}, nil
}

type closingDevice struct {
	idleDevice
	closed *[]string
	name   string
	err    error
}

func (d closingDevice) Close() error {
	*d.closed = append(*d.closed, d.name)
	return d.err
}

func TestRegistryRejectsBadRegistrations(t *testing.T) {
	r := NewRegistry()
	if err := r.Register("", idleDevice{}); !errors.Is(err, ErrDeviceNameEmpty) {
		t.Errorf("empty name: %v", err)
	}
	if err := r.Register("valve", nil); !errors.Is(err, ErrDeviceNil) {
		t.Errorf("nil device: %v", err)
	}
	if err := r.Register("valve", idleDevice{}); err != nil {
		t.Fatal(err)
	}
	var dup *DuplicateDeviceError
	if err := r.Register("valve", idleDevice{}); !errors.As(err, &dup) || dup.Name != "valve" {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := r.Lookup("valve"); err != nil {
		t.Errorf("Lookup: %v", err)
	}
	var unknown *UnknownDeviceError
	if _, err := r.Lookup("pump"); !errors.As(err, &unknown) || unknown.Name != "pump" {
		t.Errorf("unknown: %v", err)
	}
}

func TestRegistryNamesAndClose(t *testing.T) {
	r := NewRegistry()
	var closed []string
	failure := errors.New("stuck")
	for _, name := range []string{"b", "a", "c"} {
		var err error
		if name == "c" {
			err = failure
		}
		if err := r.Register(name, closingDevice{closed: &closed, name: name, err: err}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Register("plain", idleDevice{}); err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b", "c", "plain"}) {
		t.Errorf("Names %v", got)
	}
	if err := r.Close(); !errors.Is(err, failure) {
		t.Errorf("Close returned %v, want the device's error", err)
	}
	if !slices.Equal(closed, []string{"a", "b", "c"}) {
		t.Errorf("closed %v, want every closer in name order", closed)
	}
}

func TestRedispatchSafeDefaultsToNo(t *testing.T) {
	cmd := Command{ID: "c"}
	if redispatchSafe(idleDevice{}, cmd) {
		t.Error("a device without Redispatcher is redispatched")
	}
	if !redispatchSafe(redispatchDevice{&recordingDevice{}}, cmd) {
		t.Error("a device that declares redispatch safe is not")
	}
}
