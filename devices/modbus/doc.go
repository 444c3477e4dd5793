// Package modbus drives Modbus units (PLCs, I/O modules, drives) as
// dispatch devices, over Modbus TCP and Modbus RTU, built on
// github.com/goburrow/modbus.
//
// A [Device] is one unit: a transport, an address or serial line, and a unit
// (slave) id. Each command writes holding registers or coils; the unit can be
// asked to read them back, and to receive the leader's term and fencing
// token in holding registers before every command, so that a PLC can refuse
// a deposed leader. The device implements dispatch.Device,
// dispatch.AuthorityDevice, dispatch.CommandValidator, dispatch.HealthChecker,
// dispatch.Redispatcher and io.Closer.
//
// # Configuration
//
// A unit's [Config] loads from YAML. This one is a valve PLC on a TCP
// gateway, which receives the term and token in registers 900 to 908 and
// keeps the highest term it has seen:
//
//	transport: tcp
//	address: 10.0.0.5:502
//	unit: 3
//	timeout: 500ms
//	fence:
//	  address: 900
//	  mode: two-request                   # or one-request; see Fencing
//	actions:
//	  write-register: {verify: true}
//	  write-coils: {verify: true}
//	  write-coil: {no_redispatch: true}   # a start pulse the PLC resets
//	health:
//	  register: 0
//
// and this one a drive on an RS-485 line:
//
//	transport: rtu
//	serial:
//	  device: /dev/ttyUSB0
//	  baud_rate: 19200
//	  data_bits: 8
//	  parity: E
//	  stop_bits: 1
//	unit: 17
//	actions:
//	  write-registers: {}
//
// The same in Go, with every device taken from one [Pool] so that units on
// one gateway or one serial line share it:
//
//	pool := modbus.NewPool()
//	valve, err := modbus.New(modbus.Config{
//		Transport: modbus.TCP,
//		Address:   "10.0.0.5:502",
//		Unit:      3,
//		Timeout:   500 * time.Millisecond,
//		Fence:     &modbus.Fence{Address: 900},
//		Actions: map[modbus.Action]modbus.ActionConfig{
//			modbus.WriteRegister: {Verify: true},
//			modbus.WriteCoils:    {Verify: true},
//			modbus.WriteCoil:     {NoRedispatch: true},
//		},
//		Health: &modbus.Health{Register: 0},
//	}, modbus.WithPool(pool))
//	if err != nil {
//		return err // a *modbus.ConfigError names the field
//	}
//	defer valve.Close()
//	err = registry.Register("valve-3", valve)
//
// A loader decodes each device's YAML into a Config and calls [New] with one
// shared Pool; New runs [Config.Validate] and returns its *[ConfigError]. New
// does not connect: the connection opens at the first dispatch or health
// check, so a unit that is down at start-up delays nothing.
//
// # Actions and payloads
//
// [dispatch.Command].Action names one of four actions, and Payload is a JSON
// object with every field required and no other field allowed. Register
// values are integers from 0 to 65535 (write a signed value as its two's
// complement: -1 is 65535); the written range must end at or below address
// 65535; a payload is at most [MaxPayloadBytes].
//
//	write-register   function 06   {"address": 10, "value": 1234}
//	write-registers  function 16   {"address": 10, "values": [1, 2, 3]}      1 to 123 values
//	write-coil       function 05   {"address": 3, "value": true}
//	write-coils      function 15   {"address": 3, "values": [true, false]}   1 to 1968 values
//
// The Go types [RegisterValue], [RegisterValues], [CoilValue] and
// [CoilValues] marshal to these forms. An action must also be listed in
// [Config.Actions]; with Verify set, the device reads the range back
// (function 03 for registers, 01 for coils) after the unit acknowledged the
// write, compares it, and returns what it read in dispatch.Result.Data, in the
// plural form above. A malformed payload, or an action that is not enabled,
// is rejected without touching the bus; ValidateCommand makes the same check
// when the command is submitted, so the dispatcher refuses it before
// recording it. docs/DEVICES.md lists the same table.
//
// # Fencing
//
// With [Config.Fence] set, every dispatch first writes the term and the
// token with function 16 to nine holding registers ([FenceRegisterCount]):
// the term as a big-endian int64 in the first four (most significant word
// first), the producer id as a big-endian int64 in the next four, the
// producer epoch in the ninth. The fence write and the command go in one bus
// transaction, so no other unit's request on the same line comes between
// them. A unit that keeps the highest term it has seen answers a lower term,
// or term 0 (no term), with an exception (illegal data value); the command
// is then rejected and never written. It must compare terms, not tokens: the
// term orders leaderships, while the token, which the broker enforced on the
// command's record, may rotate to a lower producer id within one term.
// Without such logic in the unit the registers are only a record of who
// wrote last.
//
// [Fence.Mode] chooses how the fence and the command travel:
//
//   - two-request ([FenceTwoRequests], the default): the fence write, then
//     the command's own request. Any fencing unit supports it, but it is the
//     weaker mode: the unit cannot tie the command to the fence write before
//     it. A leader paused between its two requests, while a successor
//     fences the unit with a higher term, slips through when it wakes: its
//     command lands after the successor's (the test
//     TestTwoRequestFenceLetsAPausedLeaderSlipThrough shows it).
//   - one-request ([FenceOneRequest]): one function-16 request at the
//     fence's address carries the nine fence registers and, from the tenth
//     register on, the command's registers. The unit checks the term and
//     applies the command's registers only when it admits it, so a stale
//     term is refused together with its command, whenever it arrives. It
//     takes write-register and write-registers actions whose registers
//     begin right after the fence block (Address+9, at most 114 of them);
//     [Config.Validate] refuses other actions in this mode, and a command
//     to another address is rejected without a request
//     (*[FenceLayoutError]). Place the unit's command registers after its
//     fence block to use it. Function 23 (read/write multiple registers)
//     does not help with other addresses: it writes one contiguous block
//     too, so this package does not use it.
//
// A unit behind a Modbus link receives the term in the clear and takes it
// on trust; give a fencing unit a link that only the dispatchers reach (a
// serial line, or a TCP gateway on a closed network).
//
// # Errors
//
// Dispatch errors are *[UnitError] values that say at which [Phase] the
// dispatch failed and whether the request of that phase had left, marked
// with the dispatch class that follows from that:
//
//   - Retryable (the unit certainly did not act): the wait for the bus ended
//     with the context; the connect or port open failed (connection refused,
//     no route, dial timeout, no such device); the fence write failed in any
//     way but an exception, since the command was not yet sent; the command's
//     request was not written at all (the context ended first, or the write
//     failed before its first byte); the device was closed ([ErrClosed]).
//   - Rejected (the unit did not act and will not): the payload or action is
//     invalid ([PayloadError], [UnknownActionError]); the unit answered the
//     fence write with any exception, refusing the term; the unit answered
//     the command, or the one request of one-request fencing, with exception
//     01 (illegal function), 02 (illegal data address) or 03 (illegal data
//     value); a command that cannot share one-request fencing's request.
//   - In doubt (unmarked; the unit may have acted): any failure after a byte
//     of the command's request was written, that is a timeout waiting for
//     the answer ([ErrNoAnswer]), a cancelled context, a reset or closed
//     connection, a garbled or mismatched answer; any other exception to the
//     command, such as 04 (server device failure), 05 (acknowledge: the unit
//     accepted a long action), 06 (server device busy) and the gateway
//     exceptions 0A and 0B. Exceptions are never retryable: a unit that
//     answered was reached, and what it did is for an operator to judge from
//     the exception code, which errors.As finds as a
//     *github.com/goburrow/modbus.ModbusError. A failed or differing
//     read-back ([VerifyError]) is in doubt as well: the write was
//     acknowledged, and the read shows that the value did not stay.
//
// # Cancellation
//
// goburrow's client takes no context, so the device moves the bytes itself,
// under goburrow's framing and checks. Each request's deadline is the unit's
// timeout or the context's deadline, whichever comes first, and when the
// context ends the device interrupts the request at once: a TCP connection
// gets a deadline in the past, which ends a blocked read or write; a serial
// read notices within 20 ms, because it polls. An interrupted request leaves
// the command in doubt if its first byte had been written (a cancel in the
// middle of a write may leave a partial frame, which a unit discards, or a
// whole one, which it acts on); the connection is then closed, or the
// serial line drained before its next request, so that a late answer is
// never read as the answer to another request.
//
// # Buses
//
// Modbus allows one outstanding request per serial line, and most gateways
// and PLCs handle one per TCP connection. A Pool keeps one bus per TCP
// address (as written in the configuration) and per serial device path: a
// bus carries one transaction at a time (fence, write, read-back) for all of
// its units, and a unit waiting for a busy bus gives up, retryable, when its
// context ends. Buses are independent, so a slow or dead unit delays only
// the units on its own bus, by at most its timeout per request. Units of
// one serial line must agree on its settings; New refuses a unit whose
// settings differ from an earlier unit on the same device path.
//
// Between two transactions a TCP connection is checked without blocking: a
// connection that the unit closed, or on which stray bytes wait, is replaced
// before the next request, so a unit that drops idle connections does not
// turn the next command into one in doubt. An RTU bus keeps the line silent
// for 3.5 character times between frames, and a serial port that fails (an
// unplugged USB adapter) is closed and opened again at the next transaction.
//
// # Redispatch
//
// Every action writes absolute values, so writing the same command twice
// leaves the unit as writing it once: RedispatchSafe reports true for each
// enabled action, and a new leader dispatches such a command again after a
// failover. Two cases break that: a register or coil that the unit acts on
// and resets (a trigger), where a second write acts twice, and a value that
// another writer changed in between, which the second write overwrites. Set
// [ActionConfig.NoRedispatch] for the first; the second is a matter of who
// else writes the unit.
package modbus
