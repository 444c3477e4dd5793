package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
)

// config holds the program's flags.
type config struct {
	broker, device, state string
	topic, replyTopic     string
	username, password    string
	connectTimeout        time.Duration
	// keys verifies commands and signs replies; the first key signs.
	keys *fence.Verifier
}

// recentIDs remembers the replies to the last commands, so that a command
// delivered twice (QoS 1, or a redispatch after failover) is acted on once.
type recentIDs struct {
	limit int
	order []string
	reply map[string]mqtt.Reply
}

func (r *recentIDs) get(id string) (mqtt.Reply, bool) {
	rep, ok := r.reply[id]
	return rep, ok
}

func (r *recentIDs) put(id string, rep mqtt.Reply) {
	if _, ok := r.reply[id]; !ok {
		r.order = append(r.order, id)
	}
	r.reply[id] = rep
	if len(r.order) > r.limit {
		delete(r.reply, r.order[0])
		r.order = r.order[1:]
	}
}

func fill(template, device string) string {
	return strings.ReplaceAll(template, "{device}", device)
}

// run connects, serves commands until ctx ends, and disconnects. It writes
// one line per event to out. ready, when not nil, is called once the
// command subscription is in place.
func run(ctx context.Context, cfg config, out io.Writer, ready func()) error {
	store, err := fence.Open(cfg.state)
	if err != nil {
		return err
	}
	cmdTopic := fill(cfg.topic, cfg.device)
	replyTopic := fill(cfg.replyTopic, cfg.device)

	inbox := make(chan paho.Message, 64)
	subscribed := make(chan error, 1)
	opts := paho.NewClientOptions().
		AddBroker(cfg.broker).
		SetClientID("fencing-device-" + cfg.device).
		SetUsername(cfg.username).
		SetPassword(cfg.password).
		SetCleanSession(true).
		SetAutoReconnect(true).
		SetMaxReconnectInterval(2 * time.Second).
		SetConnectTimeout(cfg.connectTimeout).
		SetOnConnectHandler(func(c paho.Client) {
			// Subscribe again at every connection: a clean session
			// forgets subscriptions.
			tok := c.Subscribe(cmdTopic, 1, func(_ paho.Client, m paho.Message) {
				select {
				case inbox <- m:
				case <-ctx.Done():
				}
			})
			go func() {
				tok.Wait()
				select {
				case subscribed <- tok.Error():
				default:
				}
			}()
		})
	client := paho.NewClient(opts)
	tok := client.Connect()
	if !tok.WaitTimeout(cfg.connectTimeout) {
		client.Disconnect(0)
		return fmt.Errorf("connect to %s: no answer within %v", cfg.broker, cfg.connectTimeout)
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("connect to %s: %w", cfg.broker, err)
	}
	defer client.Disconnect(250)
	select {
	case err := <-subscribed:
		if err != nil {
			return fmt.Errorf("subscribe to %s: %w", cmdTopic, err)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Fprintf(out, "READY device=%s topic=%s state=%s\n", cfg.device, cmdTopic, cfg.state)
	if ready != nil {
		ready()
	}

	recent := &recentIDs{limit: 1024, reply: make(map[string]mqtt.Reply)}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-inbox:
			rep, ok := handle(cfg, store, recent, m.Payload(), out)
			if !ok || cfg.replyTopic == "" {
				continue
			}
			data, err := mqtt.EncodeReply(mqtt.SignReply(cfg.keys, cfg.device, rep))
			if err != nil {
				fmt.Fprintf(out, "REPLY-FAILED id=%s err=%v\n", rep.ID, err)
				continue
			}
			pub := client.Publish(replyTopic, 1, false, data)
			if !pub.WaitTimeout(cfg.connectTimeout) || pub.Error() != nil {
				fmt.Fprintf(out, "REPLY-FAILED id=%s err=%v\n", rep.ID, pub.Error())
			}
		}
	}
}

// handle decides about one command message. It returns the reply, and false
// when the message gets none: a malformed or unauthenticated message.
func handle(cfg config, store *fence.Store, recent *recentIDs, payload []byte, out io.Writer) (mqtt.Reply, bool) {
	env, err := mqtt.DecodeEnvelope(payload)
	if err != nil {
		fmt.Fprintf(out, "DROP malformed envelope: %v\n", err)
		return mqtt.Reply{}, false
	}
	reply := func(status, detail string) (mqtt.Reply, bool) {
		r := mqtt.Reply{ID: env.ID, Status: status, Detail: detail}
		recent.put(env.ID, r)
		return r, true
	}
	if env.Device != cfg.device {
		fmt.Fprintf(out, "REJECT id=%s device=%s: not this device\n", env.ID, env.Device)
		return reply(mqtt.StatusRejected, "command for device "+env.Device+", this is "+cfg.device)
	}
	// One call verifies the MAC before anything else, then the deadline,
	// a replay, a reset, and the term.
	adm, err := store.AdmitSigned(cfg.keys, env.Signed(), env.KeyID, env.MAC, time.Now())
	switch {
	case errors.Is(err, fence.ErrUnauthenticated):
		// No reply: whoever sent it may read the reply topic.
		fmt.Fprintf(out, "DROP id=%s term=%s: %v\n", env.ID, env.Term, err)
		return mqtt.Reply{}, false
	case errors.Is(err, fence.ErrReplayed):
		if prev, ok := recent.get(env.ID); ok {
			fmt.Fprintf(out, "DUPLICATE id=%s status=%s\n", env.ID, prev.Status)
			return prev, true
		}
		fmt.Fprintf(out, "DUPLICATE id=%s: %v\n", env.ID, err)
		return mqtt.Reply{ID: env.ID, Status: mqtt.StatusRejected, Detail: err.Error()}, true
	case errors.Is(err, fence.ErrStaleTerm), errors.Is(err, fence.ErrNoTerm), errors.Is(err, fence.ErrNoToken),
		errors.Is(err, fence.ErrExpired), errors.Is(err, fence.ErrBadReset):
		fmt.Fprintf(out, "REJECT id=%s term=%s token=%s: %v\n", env.ID, env.Term, env.Token, err)
		return reply(mqtt.StatusRejected, err.Error())
	case err != nil:
		// The term could not be made durable: do not act, and let an
		// operator look.
		fmt.Fprintf(out, "ERROR id=%s term=%s token=%s: %v\n", env.ID, env.Term, env.Token, err)
		return mqtt.Reply{ID: env.ID, Status: mqtt.StatusError, Detail: "not acted: " + err.Error()}, true
	}
	if adm.Reset {
		fmt.Fprintf(out, "RESET id=%s floor=%s reason=%q\n", env.ID, adm.Floor, adm.Reason)
		return reply(mqtt.StatusOK, fmt.Sprintf("fence reset to term %s: %s", adm.Floor, adm.Reason))
	}
	fmt.Fprintf(out, "ACT id=%s device=%s action=%s term=%s token=%s payload=%s\n", env.ID, env.Device, env.Action, env.Term, env.Token, env.Payload)
	return reply(mqtt.StatusOK, "done "+env.Action)
}
