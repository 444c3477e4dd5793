package modbussim

import (
	"errors"
	"reflect"
	"testing"

	gmodbus "github.com/goburrow/modbus"
)

// The example frame of the Modbus serial line guide: read 10 holding
// registers of unit 1 from address 0 carries the CRC bytes C5 CD.
func TestCRC16(t *testing.T) {
	if got := CRC16([]byte{0x01, 0x03, 0x00, 0x00, 0x00, 0x0A}); got != 0xCDC5 {
		t.Fatalf("CRC16 = %#04x, want 0xcdc5", got)
	}
}

func TestRequestLogKeepsTheNewest(t *testing.T) {
	s := New()
	stop := make(chan struct{})
	for i := range DefaultLogSize + 10 {
		s.serve(Request{Unit: 1, Function: WriteSingleRegister, Address: uint16(i), Quantity: 1, Registers: []uint16{1}}, stop)
	}
	log := s.Requests()
	if len(log) != DefaultLogSize {
		t.Fatalf("%d requests kept, want %d", len(log), DefaultLogSize)
	}
	for i, r := range log {
		if want := uint16(i + 10); r.Address != want {
			t.Fatalf("request %d has address %d, want %d", i, r.Address, want)
		}
	}
}

func TestRTUDecode(t *testing.T) {
	// Write multiple coils 20..29 = 1,0,1,1,0,0,1,1, 1,0 of unit 17.
	body := []byte{17, 0x0F, 0x00, 0x14, 0x00, 0x0A, 0x02, 0xCD, 0x01}
	req, exc := decodeRTURequest(body)
	if exc != 0 {
		t.Fatalf("exception %d", exc)
	}
	want := []bool{true, false, true, true, false, false, true, true, true, false}
	if req.Unit != 17 || req.Address != 20 || req.Quantity != 10 || !reflect.DeepEqual(req.Coils, want) {
		t.Errorf("decoded %+v", req)
	}
	if _, exc := decodeRTURequest([]byte{1, 0x05, 0, 1, 0x12, 0x34}); exc != IllegalDataValue {
		t.Errorf("coil value 0x1234: exception %d, want illegal data value", exc)
	}
	if size, known := rtuRequestSize(append(body, 0, 0)); !known || size != 11 {
		t.Errorf("frame size %d %v, want 11", size, known)
	}
}

// The TCP server answers goburrow's client from memory, and the hooks and
// the size limit shape its answers.
func TestTCPServer(t *testing.T) {
	s := New(WithSize(10))
	srv, err := s.ListenTCP("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := gmodbus.NewTCPClientHandler(srv.Addr())
	h.SlaveId = 4
	defer h.Close()
	c := gmodbus.NewClient(h)

	if _, err := c.WriteMultipleRegisters(2, 2, []byte{0, 7, 0, 8}); err != nil {
		t.Fatal(err)
	}
	if got := s.HoldingRegisters(4, 2, 2); !reflect.DeepEqual(got, []uint16{7, 8}) {
		t.Errorf("memory = %v", got)
	}
	s.SetCoils(4, 1, true)
	if got, err := c.ReadCoils(0, 3); err != nil || !reflect.DeepEqual(got, []byte{0b010}) {
		t.Errorf("read coils = %08b, %v", got, err)
	}
	var me *gmodbus.ModbusError
	if _, err := c.WriteSingleRegister(10, 1); !errors.As(err, &me) || me.ExceptionCode != byte(IllegalDataAddress) {
		t.Errorf("write beyond the size: %v", err)
	}
	s.SetHook(func(Request) Fault { return Fault{Exception: ServerDeviceBusy} })
	if _, err := c.WriteSingleRegister(1, 1); !errors.As(err, &me) || me.ExceptionCode != byte(ServerDeviceBusy) {
		t.Errorf("hooked exception: %v", err)
	}
	if got := s.HoldingRegisters(4, 1, 1)[0]; got != 0 {
		t.Errorf("an exception answer changed memory to %d", got)
	}
}

// TestFenceRefusesALowerTerm writes fence registers as devices/modbus lays
// them out (term, producer id, epoch) and checks the unit's decisions.
func TestFenceRefusesALowerTerm(t *testing.T) {
	s := New()
	s.SetFence(1, 900)
	stop := make(chan struct{})
	fence := func(term int64, producerID int64, epoch uint16) Request {
		regs := []uint16{uint16(term >> 48), uint16(term >> 32), uint16(term >> 16), uint16(term),
			uint16(producerID >> 48), uint16(producerID >> 32), uint16(producerID >> 16), uint16(producerID), epoch}
		return Request{Unit: 1, Function: WriteMultipleRegisters, Address: 900, Quantity: 9, Registers: regs}
	}
	steps := []struct {
		req  Request
		want Exception
	}{
		{fence(1<<33+7, 50, 3), 0},
		{fence(1<<33+7, 2, 0), 0},                  // a rotation to a lower producer id within the term
		{fence(1<<33+6, 900, 9), IllegalDataValue}, // an earlier term with a higher token
		{fence(0, 60, 0), IllegalDataValue},        // no term
		{fence(1<<33+9, 1, 0), 0},                  // a later term with a lower token
		{Request{Unit: 2, Function: WriteMultipleRegisters, Address: 900, Quantity: 9, Registers: make([]uint16, 9)}, 0}, // another unit does not fence
		{Request{Unit: 1, Function: WriteMultipleRegisters, Address: 950, Quantity: 4, Registers: make([]uint16, 4)}, 0}, // not at the fence address
	}
	for i, st := range steps {
		out := s.serve(st.req, stop)
		if out.exception != st.want || !out.answer {
			t.Fatalf("step %d: exception %d (answer %v), want %d", i, out.exception, out.answer, st.want)
		}
	}
	if got := s.HighestTerm(1); got != 1<<33+9 {
		t.Fatalf("highest term %d", got)
	}
	// The refused writes left no trace in memory: the registers hold the
	// last admitted write.
	if got := s.HoldingRegisters(1, 900, 9); !reflect.DeepEqual(got, fence(1<<33+9, 1, 0).Registers) {
		t.Fatalf("fence registers %v", got)
	}
}
