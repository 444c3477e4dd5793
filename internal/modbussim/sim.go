package modbussim

import (
	"fmt"
	"sync"
)

// Function is a Modbus function code.
type Function uint8

// The function codes the simulator acts on.
const (
	ReadCoils              Function = 0x01
	ReadHoldingRegisters   Function = 0x03
	WriteSingleCoil        Function = 0x05
	WriteSingleRegister    Function = 0x06
	WriteMultipleCoils     Function = 0x0F
	WriteMultipleRegisters Function = 0x10
)

// Exception is a Modbus exception code, sent in place of a normal answer.
type Exception uint8

// The exception codes of the Modbus application protocol specification.
const (
	IllegalFunction              Exception = 0x01
	IllegalDataAddress           Exception = 0x02
	IllegalDataValue             Exception = 0x03
	ServerDeviceFailure          Exception = 0x04
	Acknowledge                  Exception = 0x05
	ServerDeviceBusy             Exception = 0x06
	MemoryParityError            Exception = 0x08
	GatewayPathUnavailable       Exception = 0x0A
	GatewayTargetFailedToRespond Exception = 0x0B
)

// DefaultSize is the number of holding registers, and of coils, that each
// unit has unless [WithSize] says otherwise: the whole 16-bit address space.
const DefaultSize = 65536

// DefaultLogSize is the number of requests that [Sim.Requests] keeps; older
// ones are forgotten.
const DefaultLogSize = 4096

// Request is one request that reached the simulator, decoded.
type Request struct {
	// Unit is the unit (slave) id the request addressed.
	Unit uint8
	// Function is the function code.
	Function Function
	// Address is the first register or coil.
	Address uint16
	// Quantity is the number of registers or coils.
	Quantity uint16
	// Registers holds the values of a register write, in address order.
	Registers []uint16
	// Coils holds the values of a coil write, in address order.
	Coils []bool
}

// IsWrite reports whether the request writes registers or coils.
func (r Request) IsWrite() bool {
	switch r.Function {
	case WriteSingleCoil, WriteSingleRegister, WriteMultipleCoils, WriteMultipleRegisters:
		return true
	}
	return false
}

// Reply says whether and when a unit answers a request.
type Reply int

const (
	// ReplyNormal acts on the request and answers it.
	ReplyNormal Reply = iota
	// ReplyNone neither acts on the request nor answers it: the request was
	// lost on its way to the unit.
	ReplyNone
	// ReplyLost acts on the request and never answers: the answer was lost
	// on its way back, so the client cannot know that the unit acted.
	ReplyLost
)

// Fault is what a [Hook] asks the simulator to do with one request. The zero
// Fault handles the request normally.
type Fault struct {
	// Hold, when not nil, delays the request until the channel is closed or
	// the server closes. Over RTU a held request holds the whole bus, as a
	// slow unit on a real serial line does.
	Hold <-chan struct{}
	// Exception, when not zero, answers with this exception code and leaves
	// the memory as it was.
	Exception Exception
	// Reply says whether the unit acts and answers. It is ignored when
	// Exception is set.
	Reply Reply
}

// Hook sees every decoded request before the simulator acts on it and
// decides its fault. It runs on the goroutine that serves the request and
// must not block: return a [Fault.Hold] channel instead.
type Hook func(Request) Fault

// Option configures a [Sim].
type Option func(*Sim)

// WithSize sets the number of holding registers and of coils of every unit,
// overriding [DefaultSize]. A request that reaches beyond it is answered with
// [IllegalDataAddress].
func WithSize(n int) Option {
	return func(s *Sim) { s.size = n }
}

// Sim is the memory and the fault hooks that the TCP and RTU servers share.
// It is safe for concurrent use.
type Sim struct {
	size int

	mu    sync.Mutex
	units map[uint8]*unit
	hook  Hook
	log   []Request // a ring of at most DefaultLogSize, oldest at next once full
	next  int
}

type unit struct {
	registers []uint16
	coils     []bool

	fenced      bool   // SetFence was called for the unit
	fenceAt     uint16 // the first fence register
	highestTerm int64  // the highest term the fence admitted
}

// New returns a simulator whose units hold zeros.
func New(opts ...Option) *Sim {
	s := &Sim{size: DefaultSize, units: make(map[uint8]*unit)}
	for _, o := range opts {
		o(s)
	}
	if s.size <= 0 || s.size > DefaultSize {
		s.size = DefaultSize
	}
	return s
}

// SetHook installs h for every later request; nil removes the hook.
func (s *Sim) SetHook(h Hook) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

// Requests returns the requests received so far, oldest first, at most
// [DefaultLogSize] of them.
func (s *Sim) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, 0, len(s.log))
	out = append(out, s.log[s.next:]...)
	return append(out, s.log[:s.next]...)
}

// HoldingRegisters returns n holding registers of unit from addr on.
func (s *Sim) HoldingRegisters(unitID uint8, addr uint16, n int) []uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.unitLocked(unitID)
	return append([]uint16(nil), u.registers[int(addr):int(addr)+n]...)
}

// Coils returns n coils of unit from addr on.
func (s *Sim) Coils(unitID uint8, addr uint16, n int) []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.unitLocked(unitID)
	return append([]bool(nil), u.coils[int(addr):int(addr)+n]...)
}

// SetHoldingRegisters stores values in the holding registers of unit from
// addr on.
func (s *Sim) SetHoldingRegisters(unitID uint8, addr uint16, values ...uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	copy(s.unitLocked(unitID).registers[addr:], values)
}

// SetCoils stores values in the coils of unit from addr on.
func (s *Sim) SetCoils(unitID uint8, addr uint16, values ...bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	copy(s.unitLocked(unitID).coils[addr:], values)
}

// SetFence makes unit fence as firmware would, at the fence registers that
// begin at addr: a write-multiple-registers request at addr of at least four
// registers carries a term in its first four (a big-endian int64, most
// significant word first). The unit admits a term at least as high as the
// highest it admitted, and answers a lower term, or a term that is not
// positive, with [IllegalDataValue] and no change to its memory. A later
// term is admitted whatever the registers after it hold: within one term
// the token may rotate to a lower producer id.
//
// The registers after the term in the same request, the token and any
// command's registers that follow the fence block, are written only when
// the term is admitted: the unit serves devices/modbus's one-request
// fencing, refusing a stale term and its command in one answer.
func (s *Sim) SetFence(unitID uint8, addr uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.unitLocked(unitID)
	u.fenced, u.fenceAt = true, addr
}

// HighestTerm returns the highest term the fence of unit admitted, and 0
// before the first or without a fence.
func (s *Sim) HighestTerm(unitID uint8) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unitLocked(unitID).highestTerm
}

// admitFence applies the fence of u to req. It reports false when req is a
// fence write that u refuses.
func (u *unit) admitFence(req Request) bool {
	if !u.fenced || req.Function != WriteMultipleRegisters || req.Address != u.fenceAt || len(req.Registers) < 4 {
		return true
	}
	var term int64
	for _, r := range req.Registers[:4] {
		term = term<<16 | int64(r)
	}
	if term <= 0 || term < u.highestTerm {
		return false
	}
	u.highestTerm = term
	return true
}

func (s *Sim) unitLocked(id uint8) *unit {
	u, ok := s.units[id]
	if !ok {
		u = &unit{registers: make([]uint16, s.size), coils: make([]bool, s.size)}
		s.units[id] = u
	}
	return u
}

// outcome is the simulator's decision on one request.
type outcome struct {
	exception Exception // not zero: answer with this exception
	answer    bool      // false: send nothing
	registers []uint16  // read results
	coils     []bool    // read results
}

// serve logs req, asks the hook, waits out a hold (or until stop closes) and
// acts on the memory. A request that stop interrupted gets no answer.
func (s *Sim) serve(req Request, stop <-chan struct{}) outcome {
	s.mu.Lock()
	if len(s.log) < DefaultLogSize {
		s.log = append(s.log, req)
	} else {
		s.log[s.next] = req
		s.next = (s.next + 1) % DefaultLogSize
	}
	hook := s.hook
	s.mu.Unlock()

	var f Fault
	if hook != nil {
		f = hook(req)
	}
	if f.Hold != nil {
		select {
		case <-f.Hold:
		case <-stop:
			return outcome{}
		}
	}
	if f.Exception != 0 {
		return outcome{exception: f.Exception, answer: true}
	}
	if f.Reply == ReplyNone {
		return outcome{}
	}
	out := s.act(req)
	if f.Reply == ReplyLost && out.exception == 0 {
		out.answer = false
	}
	return out
}

// act applies req to the memory.
func (s *Sim) act(req Request) outcome {
	if int(req.Address)+int(req.Quantity) > s.size {
		return outcome{exception: IllegalDataAddress, answer: true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.unitLocked(req.Unit)
	lo, hi := int(req.Address), int(req.Address)+int(req.Quantity)
	switch req.Function {
	case ReadCoils:
		return outcome{answer: true, coils: append([]bool(nil), u.coils[lo:hi]...)}
	case ReadHoldingRegisters:
		return outcome{answer: true, registers: append([]uint16(nil), u.registers[lo:hi]...)}
	case WriteSingleCoil, WriteMultipleCoils:
		copy(u.coils[lo:hi], req.Coils)
		return outcome{answer: true}
	case WriteSingleRegister, WriteMultipleRegisters:
		if !u.admitFence(req) {
			return outcome{exception: IllegalDataValue, answer: true}
		}
		copy(u.registers[lo:hi], req.Registers)
		return outcome{answer: true}
	}
	return outcome{exception: IllegalFunction, answer: true}
}

// String returns the function's name, or its code in hex for one the
// simulator does not know.
func (f Function) String() string {
	switch f {
	case ReadCoils:
		return "read-coils"
	case ReadHoldingRegisters:
		return "read-holding-registers"
	case WriteSingleCoil:
		return "write-single-coil"
	case WriteSingleRegister:
		return "write-single-register"
	case WriteMultipleCoils:
		return "write-multiple-coils"
	case WriteMultipleRegisters:
		return "write-multiple-registers"
	}
	return fmt.Sprintf("function-0x%02x", uint8(f))
}
