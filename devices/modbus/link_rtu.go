package modbus

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/goburrow/serial"
)

// RTU framing: address, function, data, two CRC bytes; at most 256 bytes.
const (
	rtuMaxADU       = 256
	rtuExceptionADU = 5
)

// rtuPoll is the longest one read of the serial port blocks. It bounds how
// late a cancelled transaction notices, because a blocked select on a serial
// port cannot be woken from another goroutine.
const rtuPoll = 20 * time.Millisecond

// errHangup is returned when a read of a readable port returns nothing: the
// other end hung up.
var errHangup = errors.New("modbus: the serial port hung up")

// rtuLink is one serial port, opened on first use and shared by the units
// on its line.
type rtuLink struct {
	cfg serial.Config
	// silence is the 3.5-character gap the line must stay quiet between two
	// frames.
	silence time.Duration

	// mu guards cur and port against interrupt and close.
	mu   sync.Mutex
	port serial.Port
	cur  *txn

	// Only the transaction that holds the bus touches these.
	dirty  bool      // stray bytes may wait on the line: drain before writing
	broken bool      // the port failed (a USB adapter unplugged): reopen it
	last   time.Time // when the last frame ended
}

func newRTULink(s Serial) *rtuLink {
	return &rtuLink{
		cfg: serial.Config{
			Address:  s.Device,
			BaudRate: s.BaudRate,
			DataBits: s.DataBits,
			StopBits: s.StopBits,
			Parity:   s.Parity,
			Timeout:  rtuPoll,
		},
		silence: frameSilence(s.BaudRate, s.DataBits, s.StopBits, s.Parity),
	}
}

// frameSilence returns 3.5 character times at the line's settings, or the
// fixed 1.75 ms that the Modbus serial line specification prescribes above
// 19200 baud.
func frameSilence(baud, dataBits, stopBits int, parity string) time.Duration {
	if baud > 19200 {
		return 1750 * time.Microsecond
	}
	bits := 1 + dataBits + stopBits
	if parity != "N" {
		bits++
	}
	return time.Duration(float64(time.Second) * 3.5 * float64(bits) / float64(baud))
}

func (l *rtuLink) begin(tx *txn) {
	l.mu.Lock()
	l.cur = tx
	l.mu.Unlock()
}

func (l *rtuLink) end(reset bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur = nil
	if l.broken {
		_ = l.closeLocked()
		l.broken, l.dirty = false, false
		return
	}
	if reset {
		l.dirty = true
	}
}

func (l *rtuLink) open(*txn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.port != nil {
		return nil
	}
	port, err := serial.Open(&l.cfg)
	if err != nil {
		return err
	}
	l.port = port
	return nil
}

// interrupt needs no action: Send polls the interrupt flag between reads.
func (l *rtuLink) interrupt(*txn) {}

func (l *rtuLink) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closeLocked()
}

func (l *rtuLink) closeLocked() error {
	if l.port == nil {
		return nil
	}
	err := l.port.Close()
	l.port = nil
	return err
}

// Send waits out the line's silence, drains stray bytes after a failure,
// writes the request frame and reads one answer frame, framing it by its
// function code. goburrow's client checks the CRC and the content.
func (l *rtuLink) Send(adu []byte) ([]byte, error) {
	l.mu.Lock()
	port, tx := l.port, l.cur
	l.mu.Unlock()
	if port == nil || tx == nil {
		return nil, errNotConnected
	}
	deadline := tx.deadline()
	if wait := l.silence - time.Since(l.last); wait > 0 {
		time.Sleep(wait)
	}
	if l.dirty {
		if err := l.drain(port, tx, deadline); err != nil {
			return nil, err
		}
	}
	if tx.interrupted.Load() {
		return nil, tx.cause()
	}
	n, err := port.Write(adu)
	if n > 0 {
		tx.sent = true
	}
	if err != nil {
		l.broken = true
		return nil, err
	}
	defer func() { l.last = time.Now() }()

	var buf [rtuMaxADU + 1]byte
	got, need := 0, rtuExceptionADU
	for got < need {
		if tx.interrupted.Load() {
			return nil, tx.cause()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w within %v (%d bytes of the answer arrived)", ErrNoAnswer, tx.timeout, got)
		}
		n, err := port.Read(buf[got:need])
		if errors.Is(err, serial.ErrTimeout) {
			continue
		}
		if err == nil && n == 0 {
			err = errHangup
		}
		if err != nil {
			l.broken = true
			return nil, err
		}
		got += n
		if got >= 3 {
			if need, err = rtuAnswerSize(adu[1], buf[:got]); err != nil {
				return nil, err
			}
		}
	}
	return append([]byte(nil), buf[:need]...), nil
}

// rtuAnswerSize returns the size of the answer frame that head (at least
// three bytes) starts, for a request of function fc.
func rtuAnswerSize(fc byte, head []byte) (int, error) {
	switch {
	case head[1] == fc|0x80:
		return rtuExceptionADU, nil
	case head[1] != fc:
		return 0, fmt.Errorf("modbus: answer function 0x%02x to a request of 0x%02x", head[1], fc)
	}
	switch fc {
	case 0x01, 0x02, 0x03, 0x04: // byte count, data, CRC
		return 5 + int(head[2]), nil
	case 0x05, 0x06, 0x0F, 0x10: // address and value or quantity, CRC
		return 8, nil
	}
	return 0, fmt.Errorf("modbus: no framing known for function 0x%02x", fc)
}

// drain reads and discards what waits on the line until it stays quiet for
// one poll, so that a late answer to an abandoned request is not taken for
// the next one's.
func (l *rtuLink) drain(port serial.Port, tx *txn, deadline time.Time) error {
	var buf [rtuMaxADU]byte
	for {
		if tx.interrupted.Load() {
			return tx.cause()
		}
		if time.Now().After(deadline) {
			return errors.New("modbus: the line did not go quiet")
		}
		n, err := port.Read(buf[:])
		if errors.Is(err, serial.ErrTimeout) {
			l.dirty = false
			return nil
		}
		if err == nil && n == 0 {
			err = errHangup
		}
		if err != nil {
			l.broken = true
			return err
		}
	}
}
