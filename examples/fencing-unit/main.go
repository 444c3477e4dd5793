// Command fencing-unit is a Modbus TCP unit that refuses commands from a
// deposed leader. It shows what PLC firmware, or a gateway written in Go,
// does with the fence registers of devices/modbus:
//
//  1. keep the highest term admitted durably (fence.Store.Admit, in -state);
//  2. read a write of the nine fence registers at -fence as the term (four
//     registers, a big-endian int64), the producer id (four) and the
//     producer epoch (one), and refuse a lower term with exception 03
//     (illegal data value), changing nothing;
//  3. in the same request, apply the registers that follow the fence
//     block only when the term is admitted: the dispatcher's fence mode
//     one-request then carries the term and the command together, and no
//     pause of a deposed leader can separate them;
//  4. with -one-request-only, refuse every write that does not carry the
//     fence (exception 01), so that the weaker two-request mode cannot be
//     used against it.
//
// Run it:
//
//	go run ./examples/fencing-unit -listen 127.0.0.1:5020 -fence 100 -state /tmp/unit-fence.json -one-request-only
//
// and configure the dispatcher's Modbus device with address
// 127.0.0.1:5020, fence {address: 100, mode: one-request} and the action
// write-registers, whose commands write from register 109 on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.listen, "listen", "127.0.0.1:5020", "host:port to serve Modbus TCP on")
	var fenceAt uint
	flag.UintVar(&fenceAt, "fence", 100, "first of the nine fence registers")
	flag.StringVar(&cfg.state, "state", "unit-fence.json", "file that keeps the highest term seen")
	flag.BoolVar(&cfg.oneRequestOnly, "one-request-only", false, "refuse writes that do not carry the fence in the same request")
	flag.Parse()
	if fenceAt > 1<<16-fenceRegisters {
		fmt.Fprintln(os.Stderr, "fencing-unit: -fence leaves no room for nine registers")
		os.Exit(2)
	}
	cfg.fenceAt = uint16(fenceAt)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, nil); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "fencing-unit:", err)
		os.Exit(1)
	}
}
