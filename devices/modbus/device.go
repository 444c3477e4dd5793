package modbus

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	gmodbus "github.com/goburrow/modbus"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Option configures a Device.
type Option func(*options)

type options struct {
	pool *Pool
}

// WithPool makes the device take its bus from p, shared with every other
// device of p on the same TCP address or serial port. Without it the device
// has a bus of its own, which is right only when no other device talks to
// the same address or port.
func WithPool(p *Pool) Option {
	return func(o *options) { o.pool = p }
}

// Device is one Modbus unit behind the dispatch.Device interface. It also
// implements dispatch.HealthChecker, dispatch.Redispatcher and io.Closer.
//
// A Device starts no goroutine. Its connection or serial port opens at the
// first dispatch or health check, and Close releases it.
type Device struct {
	cfg    Config
	pool   *Pool
	bus    *bus
	client gmodbus.Client

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var (
	_ dispatch.Device          = (*Device)(nil)
	_ dispatch.AuthorityDevice = (*Device)(nil)
	_ dispatch.HealthChecker   = (*Device)(nil)
	_ dispatch.Redispatcher    = (*Device)(nil)
)

// New validates cfg and returns its Device. It neither connects nor opens a
// port; that happens at the first dispatch or health check.
func New(cfg Config, opts ...Option) (*Device, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.pool == nil {
		o.pool = NewPool()
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	b, err := o.pool.acquire(&cfg)
	if err != nil {
		return nil, err
	}
	d := &Device{cfg: cfg, pool: o.pool, bus: b}
	// goburrow's packagers frame the requests and check the answers; the
	// bus's link moves the bytes.
	var packager gmodbus.Packager
	if cfg.Transport == TCP {
		h := gmodbus.NewTCPClientHandler(cfg.Address)
		h.SlaveId = byte(cfg.Unit)
		packager = h
	} else {
		h := gmodbus.NewRTUClientHandler(cfg.Serial.Device)
		h.SlaveId = byte(cfg.Unit)
		packager = h
	}
	d.client = gmodbus.NewClient2(packager, b.link)
	return d, nil
}

// Dispatch is DispatchUnder with token and no term: the fence registers,
// when configured, receive term 0 (coordination.NoTerm), which a fencing
// unit refuses. The dispatcher calls DispatchUnder.
func (d *Device) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	return d.DispatchUnder(ctx, cmd, coordination.Authority{Term: coordination.NoTerm, Token: token})
}

// DispatchUnder implements [dispatch.AuthorityDevice]. It performs cmd on
// the unit in one bus transaction: the write of the authority's term and
// token to the fence registers when a fence is configured, the command's
// write, and the read-back when the action verifies. Its error is classified
// as the package documentation describes. When ctx ends, the request in
// progress is abandoned at once; if its write had left, the command is in
// doubt.
func (d *Device) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	if d.closed.Load() {
		return dispatch.Result{}, dispatch.Retryable(ErrClosed)
	}
	ac, ok := d.cfg.Actions[Action(cmd.Action)]
	if !ok {
		return dispatch.Result{}, dispatch.Rejected(&UnknownActionError{Action: cmd.Action})
	}
	w, err := parsePayload(Action(cmd.Action), cmd.Payload)
	if err != nil {
		return dispatch.Result{}, dispatch.Rejected(err)
	}
	oneRequest := d.cfg.Fence != nil && d.cfg.Fence.Mode == FenceOneRequest
	if oneRequest {
		if err := d.checkLayout(w); err != nil {
			return dispatch.Result{}, dispatch.Rejected(err)
		}
	}
	var res dispatch.Result
	err = d.bus.transact(ctx, d.cfg.Unit, d.cfg.Timeout, func(tx *txn) error {
		switch {
		case oneRequest:
			if sent, err := tx.request(func() error { return d.fencedWrite(w, authority) }); err != nil {
				return d.unitErr(PhaseFencedWrite, sent, err)
			}
		case d.cfg.Fence != nil:
			if err := d.fence(tx, authority); err != nil {
				return err
			}
			fallthrough
		default:
			if sent, err := tx.request(func() error { return d.write(w) }); err != nil {
				return d.unitErr(PhaseWrite, sent, err)
			}
		}
		res.Detail = fmt.Sprintf("wrote %d %s at %d", w.quantity(), noun(w), w.address)
		if !ac.Verify {
			return nil
		}
		var data []byte
		sent, err := tx.request(func() error {
			var err error
			data, err = d.verify(w)
			return err
		})
		if err != nil {
			return d.unitErr(PhaseVerify, sent, err)
		}
		res.Detail += ", read back equal"
		res.Data = data
		return nil
	})
	if err != nil {
		return dispatch.Result{}, d.classify(err)
	}
	return res, nil
}

// fenceRegisters returns the fence registers' bytes for authority.
func fenceRegisters(authority coordination.Authority) []byte {
	regs := make([]byte, 2*FenceRegisterCount)
	binary.BigEndian.PutUint64(regs[0:], uint64(authority.Term))
	binary.BigEndian.PutUint64(regs[8:], uint64(authority.Token.ProducerID()))
	binary.BigEndian.PutUint16(regs[16:], uint16(authority.Token.ProducerEpoch()))
	return regs
}

// checkLayout reports whether w can travel in the fence's request.
func (d *Device) checkLayout(w write) error {
	want := int(d.cfg.Fence.Address) + FenceRegisterCount
	if w.registers == nil || int(w.address) != want || FenceRegisterCount+len(w.registers) > maxWriteRegisters {
		return &FenceLayoutError{Action: w.action, Address: w.address, Quantity: w.quantity(), Want: uint16(want),
			Max: maxWriteRegisters - FenceRegisterCount}
	}
	return nil
}

// fencedWrite writes the fence registers and w's registers, which follow
// them, in one function-16 request.
func (d *Device) fencedWrite(w write, authority coordination.Authority) error {
	regs := append(fenceRegisters(authority), packRegisters(w.registers)...)
	_, err := d.client.WriteMultipleRegisters(d.cfg.Fence.Address, uint16(len(regs)/2), regs)
	return err
}

// fence writes the term and the token to the fence registers.
func (d *Device) fence(tx *txn, authority coordination.Authority) error {
	regs := fenceRegisters(authority)
	sent, err := tx.request(func() error {
		_, err := d.client.WriteMultipleRegisters(d.cfg.Fence.Address, FenceRegisterCount, regs)
		return err
	})
	if err != nil {
		return d.unitErr(PhaseFence, sent, err)
	}
	return nil
}

// write sends w with its action's function code. goburrow checks that the
// answer echoes the address and the value or quantity.
func (d *Device) write(w write) error {
	var err error
	switch w.action {
	case WriteRegister:
		_, err = d.client.WriteSingleRegister(w.address, w.registers[0])
	case WriteRegisters:
		_, err = d.client.WriteMultipleRegisters(w.address, uint16(len(w.registers)), packRegisters(w.registers))
	case WriteCoil:
		v := uint16(0x0000)
		if w.coils[0] {
			v = 0xFF00
		}
		_, err = d.client.WriteSingleCoil(w.address, v)
	case WriteCoils:
		_, err = d.client.WriteMultipleCoils(w.address, uint16(len(w.coils)), packCoils(w.coils))
	}
	return err
}

// verify reads back what w wrote, compares, and returns the values read as
// JSON in the payload format of the plural action.
func (d *Device) verify(w write) ([]byte, error) {
	n := uint16(w.quantity())
	if w.registers != nil {
		raw, err := d.client.ReadHoldingRegisters(w.address, n)
		if err != nil {
			return nil, err
		}
		got := unpackRegisters(raw)
		wrote, _ := json.Marshal(w.registers)
		read, _ := json.Marshal(got)
		if string(wrote) != string(read) {
			return nil, &VerifyError{Address: w.address, Wrote: string(wrote), Read: string(read)}
		}
		return json.Marshal(RegisterValues{Address: w.address, Values: got})
	}
	raw, err := d.client.ReadCoils(w.address, n)
	if err != nil {
		return nil, err
	}
	got := unpackCoils(raw, int(n))
	wrote, _ := json.Marshal(w.coils)
	read, _ := json.Marshal(got)
	if string(wrote) != string(read) {
		return nil, &VerifyError{Address: w.address, Wrote: string(wrote), Read: string(read)}
	}
	return json.Marshal(CoilValues{Address: w.address, Values: got})
}

// CheckHealth connects to the unit's bus and, when [Config.Health] names a
// register, reads it. It waits for the bus like a dispatch does and returns
// by the time ctx ends.
func (d *Device) CheckHealth(ctx context.Context) error {
	if d.closed.Load() {
		return ErrClosed
	}
	return d.bus.transact(ctx, d.cfg.Unit, d.cfg.Timeout, func(tx *txn) error {
		if d.cfg.Health == nil {
			return nil
		}
		sent, err := tx.request(func() error {
			_, err := d.client.ReadHoldingRegisters(d.cfg.Health.Register, 1)
			return err
		})
		if err != nil {
			return d.unitErr(PhaseHealth, sent, err)
		}
		return nil
	})
}

// RedispatchSafe reports true for every enabled action whose
// [ActionConfig.NoRedispatch] is false: each writes absolute values, so a
// second write of the same command leaves the unit as one write does.
func (d *Device) RedispatchSafe(cmd dispatch.Command) bool {
	ac, ok := d.cfg.Actions[Action(cmd.Action)]
	return ok && !ac.NoRedispatch
}

// Close releases the device's hold on its bus; the last device on a bus
// closes its connection or port. A transaction in progress, such as a
// concurrent health check, is interrupted first. Close is idempotent, and a
// Dispatch after it fails with [ErrClosed], marked retryable.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		d.closeErr = d.pool.release(d.bus)
	})
	return d.closeErr
}

func (d *Device) unitErr(p Phase, sent bool, err error) *UnitError {
	return &UnitError{Bus: d.bus.name, Unit: d.cfg.Unit, Phase: p, Sent: sent, Err: err}
}

func (d *Device) classify(err error) error {
	if ue, ok := err.(*UnitError); ok {
		return classify(ue)
	}
	return dispatch.Retryable(err) // ErrClosed: nothing was sent
}

func noun(w write) string {
	switch {
	case len(w.registers) == 1:
		return "register"
	case w.registers != nil:
		return "registers"
	case len(w.coils) == 1:
		return "coil"
	}
	return "coils"
}

func packRegisters(v []uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, r := range v {
		binary.BigEndian.PutUint16(b[2*i:], r)
	}
	return b
}

func unpackRegisters(b []byte) []uint16 {
	v := make([]uint16, len(b)/2)
	for i := range v {
		v[i] = binary.BigEndian.Uint16(b[2*i:])
	}
	return v
}

// packCoils packs coils eight to a byte, the first coil in the lowest bit.
func packCoils(v []bool) []byte {
	b := make([]byte, (len(v)+7)/8)
	for i, c := range v {
		if c {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return b
}

func unpackCoils(b []byte, n int) []bool {
	v := make([]bool, n)
	for i := range v {
		if i/8 < len(b) {
			v[i] = b[i/8]&(1<<(i%8)) != 0
		}
	}
	return v
}
