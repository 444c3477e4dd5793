package modbussim

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sync"

	smodbus "github.com/simonvetter/modbus"
)

// maxTCPClients bounds the connections the TCP server accepts at once. A
// client that reconnects after every timeout leaves the served goroutine of
// the old connection held until its fault is released, so the bound is
// generous.
const maxTCPClients = 256

// errNoAnswer ends a request that must get no answer; the server never
// writes it, because the handler returns only once the server is stopping.
var errNoAnswer = errors.New("modbussim: no answer")

// TCPServer serves a [Sim] as a Modbus TCP server on a loopback port.
type TCPServer struct {
	sim  *Sim
	srv  *smodbus.ModbusServer
	addr string

	stop      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// ListenTCP starts a Modbus TCP server for s on addr, or on a free port of
// 127.0.0.1 when addr is empty. Passing the address of a closed server
// restarts it in place. The library's server runs an accept goroutine and
// one goroutine per connection; Close makes them end, and they exit as their
// listener and sockets close (the library does not wait for them).
func (s *Sim) ListenTCP(addr string) (*TCPServer, error) {
	var lastErr error
	for range 5 {
		addr := addr
		if addr == "" {
			var err error
			if addr, err = freeLoopbackAddr(); err != nil {
				return nil, err
			}
		}
		t := &TCPServer{sim: s, addr: addr, stop: make(chan struct{})}
		srv, err := smodbus.NewServer(&smodbus.ServerConfiguration{
			URL:        "tcp://" + addr,
			MaxClients: maxTCPClients,
			Logger:     log.New(io.Discard, "", 0),
		}, (*tcpHandler)(t))
		if err != nil {
			return nil, fmt.Errorf("modbussim: new server: %w", err)
		}
		if err := srv.Start(); err != nil {
			lastErr = err // the port was taken between the probe and the bind
			continue
		}
		t.srv = srv
		return t, nil
	}
	return nil, fmt.Errorf("modbussim: listen: %w", lastErr)
}

// freeLoopbackAddr returns an address of 127.0.0.1 whose port was free a
// moment ago. The library binds its own listener and hides it, so the port
// has to be chosen before.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("modbussim: find a free port: %w", err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// Addr returns the host:port the server listens on.
func (t *TCPServer) Addr() string { return t.addr }

// Close releases every held request, stops listening and closes every
// connection. It is safe to call more than once.
func (t *TCPServer) Close() error {
	t.closeOnce.Do(func() {
		close(t.stop)
		t.closeErr = t.srv.Stop()
	})
	return t.closeErr
}

// tcpHandler adapts the simulator to the library's request handler.
type tcpHandler TCPServer

// finish turns an outcome into the handler's error: nil to answer, a
// library error to answer with an exception, or, for no answer, a wait
// until the server stops.
func (h *tcpHandler) finish(out outcome) error {
	if !out.answer {
		<-h.stop
		return errNoAnswer
	}
	if out.exception != 0 {
		return exceptionError(out.exception)
	}
	return nil
}

// HandleCoils serves functions 01, 05 and 15.
func (h *tcpHandler) HandleCoils(req *smodbus.CoilsRequest) ([]bool, error) {
	r := Request{Unit: req.UnitId, Function: ReadCoils, Address: req.Addr, Quantity: req.Quantity}
	if req.IsWrite {
		r.Function = WriteMultipleCoils
		if req.Quantity == 1 {
			// The library hands both write functions over as one; a
			// single coil is what function 05 carries.
			r.Function = WriteSingleCoil
		}
		r.Coils = append([]bool(nil), req.Args...)
	}
	out := h.sim.serve(r, h.stop)
	if err := h.finish(out); err != nil {
		return nil, err
	}
	return out.coils, nil
}

// HandleDiscreteInputs answers function 02 with zeros.
func (h *tcpHandler) HandleDiscreteInputs(req *smodbus.DiscreteInputsRequest) ([]bool, error) {
	return make([]bool, req.Quantity), nil
}

// HandleHoldingRegisters serves functions 03, 06 and 16.
func (h *tcpHandler) HandleHoldingRegisters(req *smodbus.HoldingRegistersRequest) ([]uint16, error) {
	r := Request{Unit: req.UnitId, Function: ReadHoldingRegisters, Address: req.Addr, Quantity: req.Quantity}
	if req.IsWrite {
		r.Function = WriteMultipleRegisters
		if req.Quantity == 1 {
			r.Function = WriteSingleRegister
		}
		r.Registers = append([]uint16(nil), req.Args...)
	}
	out := h.sim.serve(r, h.stop)
	if err := h.finish(out); err != nil {
		return nil, err
	}
	return out.registers, nil
}

// HandleInputRegisters answers function 04 with zeros.
func (h *tcpHandler) HandleInputRegisters(req *smodbus.InputRegistersRequest) ([]uint16, error) {
	return make([]uint16, req.Quantity), nil
}

// exceptionError maps an exception code to the library error that makes its
// server send that code.
func exceptionError(e Exception) error {
	switch e {
	case IllegalFunction:
		return smodbus.ErrIllegalFunction
	case IllegalDataAddress:
		return smodbus.ErrIllegalDataAddress
	case IllegalDataValue:
		return smodbus.ErrIllegalDataValue
	case Acknowledge:
		return smodbus.ErrAcknowledge
	case ServerDeviceBusy:
		return smodbus.ErrServerDeviceBusy
	case MemoryParityError:
		return smodbus.ErrMemoryParityError
	case GatewayPathUnavailable:
		return smodbus.ErrGWPathUnavailable
	case GatewayTargetFailedToRespond:
		return smodbus.ErrGWTargetFailedToRespond
	}
	return smodbus.ErrServerDeviceFailure
}
