// Command fencing-device is an MQTT device that refuses commands from a
// deposed leader. It shows what device firmware or a gateway written in Go
// does with the envelopes of devices/mqtt and the fence package:
//
//  1. subscribe to the command topic, such as devices/valve-1/cmd;
//  2. decode each message with mqtt.DecodeEnvelope;
//  3. pass it to fence.Store.AdmitSigned, which drops a command whose MAC
//     does not verify under the device key before it reads anything else,
//     refuses a command past its deadline, a replay of a command already
//     admitted, and a command whose term is lower than the highest
//     admitted (durable in -state), and applies an authenticated fence
//     reset; the token may rotate to a lower producer id within a term, so
//     only the term orders leaderships;
//  4. act at most once per command ID (here: print the command);
//  5. reply on the reply topic with status ok, rejected or error, signed
//     with the device key.
//
// Run it against a broker, with the device key that the dispatcher's MQTT
// device names in its keys:
//
//	openssl rand -hex 32 > /tmp/valve-1.key
//	go run ./examples/fencing-device -broker tcp://127.0.0.1:1883 -device valve-1 \
//		-state /tmp/fence.json -key k1=/tmp/valve-1.key
//
// and configure the dispatcher's MQTT device with topic
// devices/{device}/cmd, reply_topic devices/{device}/reply and
// keys [{id: k1, key_file: /tmp/valve-1.key}]. During a key rotation give
// -key twice; the first signs the replies.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
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
	var keys []mqtt.KeyConfig
	flag.Func("key", "device key as id=file (a file of 64 hex digits); repeat during a rotation, the first signs", func(s string) error {
		id, file, ok := strings.Cut(s, "=")
		if !ok || id == "" || file == "" {
			return errors.New("want id=file")
		}
		keys = append(keys, mqtt.KeyConfig{ID: id, KeyFile: file})
		return nil
	})
	flag.Parse()
	if len(keys) == 0 {
		fmt.Fprintln(os.Stderr, "fencing-device: at least one -key id=file is required")
		os.Exit(2)
	}
	var err error
	if cfg.keys, err = mqtt.LoadVerifier(keys); err != nil {
		fmt.Fprintln(os.Stderr, "fencing-device:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, nil); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "fencing-device:", err)
		os.Exit(1)
	}
}
