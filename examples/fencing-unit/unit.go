package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"sync"

	smodbus "github.com/simonvetter/modbus"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
)

// fenceRegisters is the size of the fence block: term, producer id, epoch.
const fenceRegisters = 9

// fenceKey is the key of the unit's term in its fence store.
const fenceKey = "unit"

// config holds the program's flags.
type config struct {
	listen, state  string
	fenceAt        uint16
	oneRequestOnly bool
}

// unit is the unit's memory and its fence. Its handlers run on the
// server's connection goroutines, one request at a time.
type unit struct {
	cfg   config
	store *fence.Store
	out   io.Writer

	mu    sync.Mutex
	regs  []uint16
	coils []bool
}

// run serves the unit until ctx ends. ready, when not nil, is called once
// the server listens.
func run(ctx context.Context, cfg config, out io.Writer, ready func()) error {
	store, err := fence.Open(cfg.state)
	if err != nil {
		return err
	}
	u := &unit{cfg: cfg, store: store, out: out, regs: make([]uint16, 1<<16), coils: make([]bool, 1<<16)}
	srv, err := smodbus.NewServer(&smodbus.ServerConfiguration{
		URL: "tcp://" + cfg.listen, MaxClients: 16, Logger: log.New(io.Discard, "", 0),
	}, u)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	defer srv.Stop()
	fmt.Fprintf(out, "READY listen=%s fence=%d-%d one-request-only=%t state=%s\n",
		cfg.listen, cfg.fenceAt, int(cfg.fenceAt)+fenceRegisters-1, cfg.oneRequestOnly, cfg.state)
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	return ctx.Err()
}

// HandleHoldingRegisters reads and writes holding registers, fenced.
func (u *unit) HandleHoldingRegisters(req *smodbus.HoldingRegistersRequest) ([]uint16, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	lo, hi := int(req.Addr), int(req.Addr)+int(req.Quantity)
	if !req.IsWrite {
		return append([]uint16(nil), u.regs[lo:hi]...), nil
	}
	fenceLo, fenceHi := int(u.cfg.fenceAt), int(u.cfg.fenceAt)+fenceRegisters
	switch {
	case lo == fenceLo && hi >= fenceHi:
		authority, err := decodeFence(req.Args[:fenceRegisters])
		if err != nil {
			fmt.Fprintf(u.out, "REJECT malformed fence: %v\n", err)
			return nil, smodbus.ErrIllegalDataValue
		}
		if err := u.store.Admit(fenceKey, authority); err != nil {
			// A stale term, no term, or a term that could not be made
			// durable: act on nothing of the request.
			fmt.Fprintf(u.out, "REJECT %s: %v\n", authority, err)
			return nil, smodbus.ErrIllegalDataValue
		}
		if hi > fenceHi {
			fmt.Fprintf(u.out, "ACT %s registers %d-%d = %v\n", authority, fenceHi, hi-1, req.Args[fenceRegisters:])
		} else {
			fmt.Fprintf(u.out, "FENCE %s\n", authority)
		}
	case lo < fenceHi && hi > fenceLo:
		// A write that covers part of the fence block.
		return nil, smodbus.ErrIllegalDataAddress
	case u.cfg.oneRequestOnly:
		fmt.Fprintf(u.out, "REJECT registers %d-%d: no fence in the request\n", lo, hi-1)
		return nil, smodbus.ErrIllegalFunction
	default:
		fmt.Fprintf(u.out, "ACT (trusting the last fence write) registers %d-%d = %v\n", lo, hi-1, req.Args)
	}
	copy(u.regs[lo:hi], req.Args)
	return nil, nil
}

// HandleCoils reads and writes coils; a coil write never carries the
// fence, so a one-request-only unit refuses it.
func (u *unit) HandleCoils(req *smodbus.CoilsRequest) ([]bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	lo, hi := int(req.Addr), int(req.Addr)+int(req.Quantity)
	if !req.IsWrite {
		return append([]bool(nil), u.coils[lo:hi]...), nil
	}
	if u.cfg.oneRequestOnly {
		return nil, smodbus.ErrIllegalFunction
	}
	copy(u.coils[lo:hi], req.Args)
	return nil, nil
}

// HandleDiscreteInputs reads zeros.
func (u *unit) HandleDiscreteInputs(req *smodbus.DiscreteInputsRequest) ([]bool, error) {
	return make([]bool, req.Quantity), nil
}

// HandleInputRegisters reads zeros.
func (u *unit) HandleInputRegisters(req *smodbus.InputRegistersRequest) ([]uint16, error) {
	return make([]uint16, req.Quantity), nil
}

// decodeFence reads the term and the token from the nine fence registers.
func decodeFence(regs []uint16) (coordination.Authority, error) {
	var b [2 * fenceRegisters]byte
	for i, r := range regs {
		binary.BigEndian.PutUint16(b[2*i:], r)
	}
	tok, err := coordination.NewFencingToken(int64(binary.BigEndian.Uint64(b[8:])), int16(binary.BigEndian.Uint16(b[16:])))
	if err != nil {
		return coordination.Authority{}, err
	}
	return coordination.Authority{Term: coordination.Term(int64(binary.BigEndian.Uint64(b[0:]))), Token: tok}, nil
}
