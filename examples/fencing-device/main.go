// Command fencing-device is an MQTT device that refuses commands from a
// deposed leader. It shows what device firmware or a gateway written in Go
// does with the envelopes of devices/mqtt and the fence package:
//
//  1. subscribe to the command topic, such as devices/valve-1/cmd;
//  2. decode each message with mqtt.DecodeEnvelope;
//  3. refuse a command past its deadline, and a command whose term is lower
//     than the highest admitted (fence.Store.Admit, durable in -state); the
//     token may rotate to a lower producer id within a term, so only the
//     term orders leaderships;
//  4. act at most once per command ID (here: print the command);
//  5. reply on the reply topic with status ok, rejected or error.
//
// Run it against a broker:
//
//	go run ./examples/fencing-device -broker tcp://127.0.0.1:1883 -device valve-1 -state /tmp/fence.json
//
// and configure the dispatcher's MQTT device with topic
// devices/{device}/cmd and reply_topic devices/{device}/reply.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.broker, "broker", "tcp://127.0.0.1:1883", "broker URL")
	flag.StringVar(&cfg.device, "device", "valve-1", "device name, the {device} of the topics")
	flag.StringVar(&cfg.state, "state", "fence.json", "file that keeps the highest term seen")
	flag.StringVar(&cfg.topic, "topic", "devices/{device}/cmd", "command topic template")
	flag.StringVar(&cfg.replyTopic, "reply-topic", "devices/{device}/reply", "reply topic template; empty for no replies")
	flag.StringVar(&cfg.username, "username", "", "broker username")
	flag.StringVar(&cfg.password, "password", "", "broker password")
	flag.DurationVar(&cfg.connectTimeout, "connect-timeout", 10*time.Second, "timeout of the first connection")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, nil); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "fencing-device:", err)
		os.Exit(1)
	}
}
