package ceiling

import (
	"encoding/binary"
	"time"

	gmodbus "github.com/goburrow/modbus"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/modbus"
)

// RawModbus is the ceiling of the Modbus device: goburrow's TCP client, the
// one the device uses, writing straight to a unit.
type RawModbus struct {
	handler *gmodbus.TCPClientHandler
	client  gmodbus.Client
}

// DialModbus connects a raw client to unit at addr.
func DialModbus(addr string, unit byte, timeout time.Duration) (*RawModbus, error) {
	h := gmodbus.NewTCPClientHandler(addr)
	h.SlaveId = unit
	h.Timeout = timeout
	if err := h.Connect(); err != nil {
		return nil, err
	}
	return &RawModbus{handler: h, client: gmodbus.NewClient(h)}, nil
}

// Close closes the connection.
func (m *RawModbus) Close() { _ = m.handler.Close() }

// WriteRegister writes one holding register (function 06).
func (m *RawModbus) WriteRegister(address, value uint16) error {
	_, err := m.client.WriteSingleRegister(address, value)
	return err
}

// WriteFence writes the fence registers as the device's two-request fence
// mode does (function 16, modbus.FenceRegisterCount registers at address):
// the term, the producer id and the producer epoch, big-endian.
func (m *RawModbus) WriteFence(address uint16, authority coordination.Authority) error {
	regs := make([]byte, 2*modbus.FenceRegisterCount)
	binary.BigEndian.PutUint64(regs[0:], uint64(authority.Term))
	binary.BigEndian.PutUint64(regs[8:], uint64(authority.Token.ProducerID()))
	binary.BigEndian.PutUint16(regs[16:], uint16(authority.Token.ProducerEpoch()))
	_, err := m.client.WriteMultipleRegisters(address, modbus.FenceRegisterCount, regs)
	return err
}
