package dispatch

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
)

// ErrDeviceNameEmpty reports a registration without a device name.
var ErrDeviceNameEmpty = errors.New("dispatch: device name is empty")

// ErrDeviceNil reports a registration of a nil Device.
var ErrDeviceNil = errors.New("dispatch: device is nil")

// DuplicateDeviceError reports a registration under a name that the registry
// already holds. The first registration stays in place.
type DuplicateDeviceError struct {
	// Name is the device name registered twice.
	Name string
}

// Error names the device.
func (e *DuplicateDeviceError) Error() string {
	return fmt.Sprintf("dispatch: device %q is already registered", e.Name)
}

// UnknownDeviceError reports a command for a device name that the registry
// does not hold. [Dispatcher.Submit] refuses such a command before writing
// anything; the dispatcher records one from the requests topic as rejected.
type UnknownDeviceError struct {
	// Name is the device name the command asked for.
	Name string
}

// Error names the device.
func (e *UnknownDeviceError) Error() string {
	return fmt.Sprintf("dispatch: no device is registered as %q", e.Name)
}

// Registry maps device names to Device implementations. A Command names its
// device by the name it was registered under.
//
// Register checks a registration when it is made, so a bad one fails at
// configuration time, not at the first dispatch. A Registry is safe for
// concurrent use; a device registered while a Dispatcher runs receives the
// commands issued after the registration.
type Registry struct {
	mu      sync.RWMutex
	devices map[string]Device
	// health holds the last answer of each device's health check.
	health map[string]DeviceHealth
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{devices: make(map[string]Device)}
}

// Register adds device under name. It returns [ErrDeviceNameEmpty] for an
// empty name, [ErrDeviceNil] for a nil device, and a *[DuplicateDeviceError]
// for a name that is already taken.
func (r *Registry) Register(name string, device Device) error {
	if name == "" {
		return ErrDeviceNameEmpty
	}
	if device == nil {
		return fmt.Errorf("register %q: %w", name, ErrDeviceNil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.devices[name]; ok {
		return &DuplicateDeviceError{Name: name}
	}
	r.devices[name] = device
	return nil
}

// Lookup returns the device registered under name. It returns a
// *[UnknownDeviceError] for a name the registry does not hold.
func (r *Registry) Lookup(name string) (Device, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	device, ok := r.devices[name]
	if !ok {
		return nil, &UnknownDeviceError{Name: name}
	}
	return device, nil
}

// Names returns the registered device names in sorted order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.devices))
	for name := range r.devices {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Close closes every registered device that implements io.Closer, in name
// order, and returns the errors joined. The owner of the registry calls it
// once, after every Dispatcher that used the registry has returned from Run.
func (r *Registry) Close() error {
	var errs []error
	for _, name := range r.Names() {
		device, _ := r.Lookup(name)
		if closer, ok := device.(io.Closer); ok {
			if err := closer.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close device %q: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// redispatchSafe reports whether device accepts cmd again after a failover.
// A device that does not implement [Redispatcher] gets nothing twice.
func redispatchSafe(device Device, cmd Command) bool {
	if r, ok := device.(Redispatcher); ok {
		return r.RedispatchSafe(cmd)
	}
	return false
}
