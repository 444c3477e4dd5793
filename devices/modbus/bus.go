package modbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gmodbus "github.com/goburrow/modbus"
)

// link is one TCP connection or one serial port: the thing that carries one
// transaction at a time. It implements goburrow's Transporter, so goburrow's
// client encodes the requests and checks the answers while the link moves
// the bytes under the current transaction's deadline and cancellation.
type link interface {
	gmodbus.Transporter

	// begin makes tx the current transaction.
	begin(tx *txn)
	// end clears the current transaction. After a failure other than an
	// exception answer, reset is true and the link discards what it may
	// still hold: the TCP connection, or stray bytes on the line.
	end(reset bool)
	// open connects the TCP connection or opens the serial port, if that is
	// not already done, without sending anything.
	open(tx *txn) error
	// interrupt makes a blocked Send of tx return at once. It may be called
	// from any goroutine, also after tx ended, when it does nothing.
	interrupt(tx *txn)
	// close releases the connection or port.
	close() error
}

// txn is the state of one transaction: one dispatch or health check, holding
// the bus from its first request to its last.
type txn struct {
	// ctx is the caller's context, kept only for the duration of the
	// transaction so that the link, which goburrow calls without one, can
	// honour it.
	ctx     context.Context
	timeout time.Duration

	// sent reports whether a byte of the current request was written. Only
	// the goroutine that holds the bus touches it.
	sent bool
	// interrupted is set, before the link is interrupted, once ctx ends.
	interrupted atomic.Bool
}

// deadline returns the deadline of a request that starts now: the timeout
// from now, or the context's deadline when that comes first.
func (tx *txn) deadline() time.Time {
	d := time.Now().Add(tx.timeout)
	if cd, ok := tx.ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// request runs one request of the transaction and reports whether a byte of
// it left.
func (tx *txn) request(f func() error) (sent bool, err error) {
	tx.sent = false
	err = f()
	if err != nil && tx.interrupted.Load() {
		err = fmt.Errorf("%w: %w", tx.cause(), err)
	}
	return tx.sent, err
}

// cause returns why the transaction was interrupted: the context's cause, or
// ErrClosed when the bus closed under it.
func (tx *txn) cause() error {
	if err := context.Cause(tx.ctx); err != nil {
		return err
	}
	return ErrClosed
}

// bus serialises the transactions of every unit on one link. Units on
// different buses never wait for each other.
type bus struct {
	name   string // "tcp host:port" or "rtu /dev/tty…"
	serial Serial // the line settings, for RTU
	link   link

	// sem holds one token while a transaction runs; waiting for it honours
	// the caller's context.
	sem    chan struct{}
	closed chan struct{}
	cur    atomic.Pointer[txn] // the running transaction, for close

	refs int // guarded by the pool's mutex
}

func newBus(name string, serial Serial, l link) *bus {
	return &bus{name: name, serial: serial, link: l, sem: make(chan struct{}, 1), closed: make(chan struct{})}
}

// transact waits for the bus, connects, and runs fn as one transaction. The
// link is interrupted the moment ctx ends. A failure to get the bus or to
// connect is returned as a *UnitError of PhaseBus or PhaseConnect with the
// given unit.
func (b *bus) transact(ctx context.Context, unit int, timeout time.Duration, fn func(tx *txn) error) error {
	select {
	case <-b.closed:
		return ErrClosed
	default:
	}
	select {
	case b.sem <- struct{}{}:
	case <-b.closed:
		return ErrClosed
	case <-ctx.Done():
		return &UnitError{Bus: b.name, Unit: unit, Phase: PhaseBus, Err: context.Cause(ctx)}
	}
	defer func() { <-b.sem }()
	select {
	case <-b.closed:
		return ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return &UnitError{Bus: b.name, Unit: unit, Phase: PhaseBus, Err: context.Cause(ctx)}
	}

	tx := &txn{ctx: ctx, timeout: timeout}
	b.link.begin(tx)
	b.cur.Store(tx)
	stop := func() bool { return false }
	if ctx.Done() != nil { // a context that never ends needs no watch
		stop = context.AfterFunc(ctx, func() { b.interrupt(tx) })
	}
	err := b.link.open(tx)
	if err != nil {
		if tx.interrupted.Load() {
			err = fmt.Errorf("%w: %w", tx.cause(), err)
		}
		err = &UnitError{Bus: b.name, Unit: unit, Phase: PhaseConnect, Err: err}
	} else {
		err = fn(tx)
	}
	stop()
	b.cur.Store(nil)
	b.link.end(err != nil && !cleanExchange(err))
	return err
}

// interrupt marks tx interrupted and makes its blocked request return.
func (b *bus) interrupt(tx *txn) {
	tx.interrupted.Store(true)
	b.link.interrupt(tx)
}

// close interrupts a running transaction, waits for it to end, and closes
// the link. Later transactions fail with ErrClosed.
func (b *bus) close() error {
	close(b.closed)
	if tx := b.cur.Load(); tx != nil {
		b.interrupt(tx)
	}
	b.sem <- struct{}{} // wait for the running transaction to return
	return b.link.close()
}

// cleanExchange reports whether err ended a transaction with a complete,
// well-formed answer (an exception, or a read-back that differs), which
// leaves the link in step.
func cleanExchange(err error) bool {
	ue, ok := err.(*UnitError)
	if !ok {
		return false
	}
	var ve *VerifyError
	_, exc := ue.Exception()
	return exc || errors.As(ue.Err, &ve)
}

// Pool shares buses between devices: devices whose units sit on one TCP
// address (a gateway, or a PLC that serves several unit ids) or on one serial
// port get one bus, and so one connection and one transaction at a time.
// Devices on different addresses or ports never wait for each other.
//
// A bus is opened by the first device that needs it and closed by the Close
// of the last device on it; the Pool holds nothing else and needs no Close.
// A Pool is safe for concurrent use.
type Pool struct {
	mu    sync.Mutex
	buses map[string]*bus
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{buses: make(map[string]*bus)}
}

// acquire returns the bus of cfg, creating it on first use. cfg has been
// validated.
func (p *Pool) acquire(cfg *Config) (*bus, error) {
	var name string
	var serial Serial
	switch cfg.Transport {
	case TCP:
		name = "tcp " + cfg.Address
	case RTU:
		serial = cfg.Serial.withDefaults()
		name = "rtu " + serial.Device
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.buses[name]; ok {
		if b.serial != serial {
			return nil, configErr("serial", fmt.Sprintf("%+v", cfg.Serial),
				fmt.Sprintf("differs from the settings %+v of another unit on %s", b.serial, serial.Device))
		}
		b.refs++
		return b, nil
	}
	var l link
	if cfg.Transport == TCP {
		l = newTCPLink(cfg.Address)
	} else {
		l = newRTULink(serial)
	}
	b := newBus(name, serial, l)
	b.refs = 1
	p.buses[name] = b
	return b, nil
}

// release drops one device's hold on b and closes b after the last one.
func (p *Pool) release(b *bus) error {
	p.mu.Lock()
	b.refs--
	last := b.refs == 0
	if last {
		delete(p.buses, b.name)
	}
	p.mu.Unlock()
	if last {
		return b.close()
	}
	return nil
}
