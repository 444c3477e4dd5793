package modbus

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// The Modbus TCP framing: a 7-byte MBAP header (transaction id, protocol id,
// length, unit id) and at most 253 bytes of PDU.
const (
	mbapHeaderSize = 7
	tcpMaxADU      = 260
)

// errNotConnected is returned by a Send on a link whose connection an
// earlier failure of the same transaction closed. Nothing is sent.
var errNotConnected = errors.New("modbus: not connected")

// tcpLink is one Modbus TCP connection, opened on first use and after every
// failure, and shared by the units at its address.
type tcpLink struct {
	address string

	// mu guards conn and cur against interrupt and close, which come from
	// other goroutines; the transaction that holds the bus does the I/O.
	mu   sync.Mutex
	conn net.Conn
	cur  *txn
}

func newTCPLink(address string) *tcpLink { return &tcpLink{address: address} }

func (l *tcpLink) begin(tx *txn) {
	l.mu.Lock()
	l.cur = tx
	l.mu.Unlock()
}

func (l *tcpLink) end(reset bool) {
	l.mu.Lock()
	l.cur = nil
	if reset {
		l.dropLocked()
	}
	l.mu.Unlock()
}

// open reuses the connection when the peer has not closed it, and dials
// otherwise. A unit that closes idle connections would otherwise turn the
// next command into one written to a dead socket, in doubt; the check keeps
// that case retryable.
func (l *tcpLink) open(tx *txn) error {
	l.mu.Lock()
	conn := l.conn
	l.mu.Unlock()
	if conn != nil {
		if usable(conn) {
			return nil
		}
		l.mu.Lock()
		l.dropLocked()
		l.mu.Unlock()
	}
	ctx, cancel := context.WithDeadline(tx.ctx, tx.deadline())
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", l.address)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if tx.interrupted.Load() {
		conn.Close()
		return tx.cause()
	}
	l.conn = conn
	return nil
}

// interrupt sets a deadline in the past on the connection of tx, which makes
// a blocked read or write return at once.
func (l *tcpLink) interrupt(tx *txn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == tx && l.conn != nil {
		_ = l.conn.SetDeadline(time.Unix(1, 0))
	}
}

func (l *tcpLink) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropLocked()
}

func (l *tcpLink) dropLocked() error {
	if l.conn == nil {
		return nil
	}
	err := l.conn.Close()
	l.conn = nil
	return err
}

// Send writes one request ADU and reads its answer, within the current
// transaction's deadline; goburrow's client calls it and checks the answer.
// It marks the transaction sent as soon as a byte is written.
func (l *tcpLink) Send(adu []byte) ([]byte, error) {
	l.mu.Lock()
	conn, tx := l.conn, l.cur
	if conn == nil || tx == nil {
		l.mu.Unlock()
		return nil, errNotConnected
	}
	// The deadline is set under the lock, and the interrupt flag read after
	// it: an interrupt either sees this deadline and overrides it, or
	// happened before and is seen here.
	if err := conn.SetDeadline(tx.deadline()); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	if tx.interrupted.Load() {
		l.mu.Unlock()
		return nil, tx.cause()
	}
	l.mu.Unlock()

	n, err := conn.Write(adu)
	if n > 0 {
		tx.sent = true
	}
	if err != nil {
		return nil, ioErr(err)
	}
	var head [mbapHeaderSize]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return nil, ioErr(err)
	}
	length := int(binary.BigEndian.Uint16(head[4:]))
	if length < 2 || mbapHeaderSize-1+length > tcpMaxADU {
		return nil, fmt.Errorf("modbus: answer length %d out of range", length)
	}
	resp := make([]byte, mbapHeaderSize-1+length)
	copy(resp, head[:])
	if _, err := io.ReadFull(conn, resp[mbapHeaderSize:]); err != nil {
		return nil, ioErr(err)
	}
	return resp, nil
}

// ioErr marks a deadline that passed while waiting as ErrNoAnswer, keeping
// the cause.
func ioErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	return err
}
