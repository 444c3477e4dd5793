package modbussim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/goburrow/serial"
)

// RTUFrameGap is how long the RTU responder keeps an incomplete frame that
// receives no further byte before it discards the bytes as line noise.
const RTUFrameGap = 100 * time.Millisecond

// rtuPoll is the longest a read of the port blocks, which bounds how long
// Close waits for the responder to notice.
const rtuPoll = 10 * time.Millisecond

// RTUServer answers Modbus RTU requests for a [Sim] on a serial port.
type RTUServer struct {
	sim  *Sim
	port serial.Port

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
	loopErr   error // written by the responder before done closes
}

// ServeRTU opens the serial port that cfg names (a pseudo-terminal in tests)
// and answers every unit id on it. It starts one goroutine, the responder,
// which Close stops and waits for. cfg.Timeout is ignored: the responder
// polls the port.
func (s *Sim) ServeRTU(cfg serial.Config) (*RTUServer, error) {
	cfg.Timeout = rtuPoll
	port, err := serial.Open(&cfg)
	if err != nil {
		return nil, fmt.Errorf("modbussim: open %s: %w", cfg.Address, err)
	}
	r := &RTUServer{sim: s, port: port, stop: make(chan struct{}), done: make(chan struct{})}
	go r.respond()
	return r, nil
}

// Close releases every held request, stops the responder, waits for it and
// closes the port. It reports the error that stopped the responder early, if
// one did. It is safe to call more than once.
func (r *RTUServer) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.closeErr = errors.Join(r.loopErr, r.port.Close())
	})
	return r.closeErr
}

// respond reads frames until stop closes or the port fails.
func (r *RTUServer) respond() {
	defer close(r.done)
	var (
		buf  []byte
		tmp  [256]byte
		last time.Time
	)
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		n, err := r.port.Read(tmp[:])
		if errors.Is(err, serial.ErrTimeout) || (err == nil && n == 0) {
			if len(buf) > 0 && time.Since(last) > RTUFrameGap {
				buf = buf[:0]
			}
			continue
		}
		if err != nil {
			r.loopErr = fmt.Errorf("modbussim: read: %w", err)
			return
		}
		buf = append(buf, tmp[:n]...)
		last = time.Now()
		for len(buf) > 0 {
			size, known := rtuRequestSize(buf)
			if !known {
				// An unknown function code leaves no way to find the end
				// of the frame: drop what arrived and say so.
				r.answer(rtuException(buf[0], buf[1], IllegalFunction))
				buf = buf[:0]
				break
			}
			if size == 0 || len(buf) < size {
				break // wait for the rest
			}
			r.handle(buf[:size])
			buf = append(buf[:0], buf[size:]...)
		}
	}
}

// rtuRequestSize returns the size of the request frame that buf starts, or 0
// while buf is too short to tell; known is false for a function code whose
// framing the responder does not know.
func rtuRequestSize(buf []byte) (size int, known bool) {
	if len(buf) < 2 {
		return 0, true
	}
	switch Function(buf[1]) {
	case ReadCoils, 0x02, ReadHoldingRegisters, 0x04, WriteSingleCoil, WriteSingleRegister:
		return 8, true
	case WriteMultipleCoils, WriteMultipleRegisters:
		if len(buf) < 7 {
			return 0, true
		}
		return 9 + int(buf[6]), true
	}
	return 0, false
}

// handle decodes one complete frame, serves it and answers.
func (r *RTUServer) handle(frame []byte) {
	body := frame[:len(frame)-2]
	if binary.LittleEndian.Uint16(frame[len(frame)-2:]) != CRC16(body) {
		return // a corrupt frame is ignored, as the specification says
	}
	unitID, fc := body[0], Function(body[1])
	req, exc := decodeRTURequest(body)
	var out outcome
	if exc != 0 {
		out = outcome{exception: exc, answer: true}
	} else {
		out = r.sim.serve(req, r.stop)
	}
	if unitID == 0 || !out.answer {
		return // broadcasts are never answered
	}
	if out.exception != 0 {
		r.answer(rtuException(unitID, byte(fc), out.exception))
		return
	}
	resp := []byte{unitID, byte(fc)}
	switch fc {
	case ReadCoils:
		packed := make([]byte, (len(out.coils)+7)/8)
		for i, c := range out.coils {
			if c {
				packed[i/8] |= 1 << (i % 8)
			}
		}
		resp = append(resp, byte(len(packed)))
		resp = append(resp, packed...)
	case ReadHoldingRegisters:
		resp = append(resp, byte(2*len(out.registers)))
		for _, v := range out.registers {
			resp = binary.BigEndian.AppendUint16(resp, v)
		}
	default: // the writes echo address and value, or address and quantity
		resp = append(resp, body[2:6]...)
	}
	r.answer(resp)
}

// decodeRTURequest decodes a frame body (without its CRC), or returns the
// exception that its content calls for.
func decodeRTURequest(body []byte) (Request, Exception) {
	req := Request{Unit: body[0], Function: Function(body[1])}
	req.Address = binary.BigEndian.Uint16(body[2:])
	word := binary.BigEndian.Uint16(body[4:])
	switch req.Function {
	case ReadCoils:
		if word < 1 || word > 2000 {
			return req, IllegalDataValue
		}
		req.Quantity = word
	case ReadHoldingRegisters:
		if word < 1 || word > 125 {
			return req, IllegalDataValue
		}
		req.Quantity = word
	case WriteSingleCoil:
		if word != 0xFF00 && word != 0x0000 {
			return req, IllegalDataValue
		}
		req.Quantity, req.Coils = 1, []bool{word == 0xFF00}
	case WriteSingleRegister:
		req.Quantity, req.Registers = 1, []uint16{word}
	case WriteMultipleCoils:
		data := body[7:]
		if word < 1 || word > 1968 || len(data) != (int(word)+7)/8 {
			return req, IllegalDataValue
		}
		req.Quantity = word
		for i := range int(word) {
			req.Coils = append(req.Coils, data[i/8]&(1<<(i%8)) != 0)
		}
	case WriteMultipleRegisters:
		data := body[7:]
		if word < 1 || word > 123 || len(data) != 2*int(word) {
			return req, IllegalDataValue
		}
		req.Quantity = word
		for i := range int(word) {
			req.Registers = append(req.Registers, binary.BigEndian.Uint16(data[2*i:]))
		}
	default:
		return req, IllegalFunction
	}
	return req, 0
}

func rtuException(unitID, fc byte, e Exception) []byte {
	return []byte{unitID, fc | 0x80, byte(e)}
}

// answer appends the CRC to resp and writes it. A failed write is the
// client's loss, as on a real line.
func (r *RTUServer) answer(resp []byte) {
	resp = binary.LittleEndian.AppendUint16(resp, CRC16(resp))
	_, _ = r.port.Write(resp)
}

// CRC16 returns the Modbus RTU checksum of b (polynomial 0xA001 reflected,
// initial value 0xFFFF). A frame carries it low byte first.
func CRC16(b []byte) uint16 {
	crc := uint16(0xFFFF)
	for _, c := range b {
		crc ^= uint16(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xA001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}
