// Package modbussim simulates Modbus units for tests and for the demo: a
// Modbus TCP server on loopback, built on github.com/simonvetter/modbus, and a
// Modbus RTU responder on a serial port or pseudo-terminal, written here
// because that library serves TCP only. Both serve one in-memory model, a
// [Sim], so a test can write through one transport and read the result in
// memory.
//
// Every unit id has its own holding registers and coils, 65536 of each unless
// [WithSize] narrows them; a request beyond the size is answered with an
// illegal data address exception, as a small PLC would. Nothing else needs
// setting up: every unit id answers.
//
// A unit can fence as firmware would ([Sim.SetFence]): it keeps the highest
// term written to its fence registers and answers a lower one with an
// illegal data value exception, without acting. The highest term lives in
// memory only; it does not survive a new Sim, as it would survive a power
// cycle in firmware that stores it.
//
// Faults are injected through a [Hook], which sees each decoded request before
// the simulator acts and returns a [Fault]: an exception answer, a hold until
// a channel closes (a slow unit, released by the test rather than by the
// clock), or a missing answer (the unit never replies, with or without having
// acted). The simulator keeps a bounded log of the requests it received, in
// order, for tests that check what reached the unit.
//
// # What it does not model
//
//   - Only function codes 01 (read coils), 03 (read holding registers), 05
//     (write single coil), 06 (write single register), 15 (write multiple
//     coils) and 16 (write multiple registers) reach the memory. Discrete
//     inputs and input registers read as zero over TCP; over RTU they, and
//     every other function code, are answered with an illegal function
//     exception. Function 23 (read/write multiple registers) is among them:
//     the TCP server library does not serve it.
//   - No timing of the serial line: the RTU responder frames requests by
//     their function code and length, not by the 3.5-character silence of
//     the specification, and it answers as fast as it can. A partial frame
//     that stays incomplete for [RTUFrameGap] is discarded.
//   - No broadcast semantics over TCP (unit 0 is an ordinary unit there);
//     over RTU unit 0 acts and never answers, as the specification says.
//   - No gateway behaviour: no unit is ever missing, and exception 0x0B
//     (target device failed to respond) appears only when a hook asks for it.
//   - No connection limits, idle timeouts that matter to a test, TLS, or
//     diagnostics (function 08) and device identification (function 43).
//   - The TCP server hands a one-value write of either function code to the
//     simulator alike, so its log names a one-coil function 15 as function
//     05 and a one-register function 16 as function 06.
//   - The TCP server is the library's: its framing checks, its answers to
//     malformed requests and its connection handling are whatever it does.
package modbussim
