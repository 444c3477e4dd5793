// Command dispatcher runs and operates krabka-dispatch: fenced command
// dispatch to external devices.
//
// `dispatcher run -c dispatcher.yaml` is one member of a role; run it on
// several machines and one of them leads. `dispatcher demo` runs a whole
// system in one process, with nothing but Go. The other subcommands operate a
// cluster: status, log, submit, resolve, topics. `dispatcher --help` lists
// the exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, os.Args[1:], Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
