// Package mqtt is a [dispatch.Device] that delivers commands to devices over
// an MQTT broker.
//
// Each command travels in a versioned JSON [Envelope] on a topic rendered
// from a template, such as devices/{device}/cmd. The envelope carries the
// command ID, so that a device can deduplicate, and the term and fencing
// token under which the command was issued, so that the device itself can
// refuse a deposed leader: the broker fences nothing, and a leader that was
// paused between its log commit and its publish may wake after a successor
// took over. The term orders leaderships; the token is what the broker
// enforced on the command's record, and may rotate to a lower producer id
// within a term. Package [github.com/krabka-io/krabka-dispatch/devices/fence]
// keeps the highest term a device has seen, for firmware and gateways in Go.
// The Device implements [dispatch.AuthorityDevice], so the dispatcher hands
// it the term; its Dispatch sends coordination.NoTerm. It implements
// [dispatch.CommandValidator] too: a command whose envelope it could never
// publish is refused at submission, before it is recorded.
//
// # When a dispatch is done
//
// Without a reply topic, Dispatch returns when the broker has the command:
// at PUBACK for QoS 1, at PUBCOMP for QoS 2. That proves delivery to the
// broker, not to the device. With a reply topic, Dispatch returns when the
// device publishes a [Reply] with the command's ID; a reply with status
// "rejected" makes the command rejected, one with status "error" leaves it
// in doubt. Each wait is bounded (Config.PublishTimeout,
// Config.ReplyTimeout) and ends at once when ctx ends.
//
// Errors follow the dispatch contract. Dispatch marks an error
// [dispatch.Retryable] only when the command was never published (no
// connection, ctx over before the publish), and [dispatch.Rejected] when it
// never can be (payload too large or malformed, command fields that cannot
// fill the topic) or the device replied rejected. Every error after the
// publish left leaves the command in doubt.
//
// # Connection
//
// [New] never waits for the network: it starts a goroutine that connects
// and reconnects with exponential backoff between
// Config.ReconnectMinInterval and Config.ReconnectMaxInterval, and [Close]
// ends it. A broker that is down at start delays nothing; a Dispatch waits
// up to Config.ConnectTimeout for a connection and then fails with a
// retryable [ErrNotConnected], which wraps the last failure: a
// [*ConnectError] that matches [ErrNotAuthorized] for refused credentials, or
// holds the TLS error for a certificate that does not verify.
// [Device.WaitConnected] waits for the first connection; [Device.CheckHealth]
// reports the state without waiting.
//
// Every connection starts a clean session, and paho's own reconnect, which
// would send an interrupted publish again after the reconnect, is not used:
// a command reaches the broker only while the Dispatch that carries it runs.
// QoS 1 may still deliver a command twice within that call, so a device
// should deduplicate by command ID. Set Config.RedispatchSafe when it does:
// the Device then reports, as a [dispatch.Redispatcher], that a new leader
// may dispatch a pending command again after a failover.
//
// # Broker settings
//
// With a reply topic, give Mosquitto "set_tcp_nodelay true". Without it
// the reply, written to the dispatcher's connection right after the PUBACK
// of the command, waits about 40 ms for the dispatcher's delayed TCP
// acknowledgement (Nagle's algorithm): a round trip of 0.3 ms on loopback
// becomes 44 ms.
//
// # Configuration
//
// The dispatcher loads a [Config] from YAML:
//
//	brokers:
//	  - ssl://mqtt-a.plant.example:8883
//	  - ssl://mqtt-b.plant.example:8883
//	client_id: krabka-dispatch-node-1   # unique per dispatcher member; empty = random
//	username: dispatcher
//	password: s3cret
//	tls:
//	  ca_file: /etc/krabka/mqtt-ca.pem
//	  cert_file: /etc/krabka/mqtt-client.pem
//	  key_file: /etc/krabka/mqtt-client.key
//	  server_name: mqtt.plant.example
//	  insecure_skip_verify: false      # tests only
//	qos: 1
//	topic: plant/{role}/{device}/cmd
//	reply_topic: plant/{role}/{device}/reply
//	reply_timeout: 15s
//	connect_timeout: 5s
//	publish_timeout: 10s
//	keep_alive: 30s
//	reconnect_min_interval: 100ms
//	reconnect_max_interval: 10s
//	max_payload_bytes: 262144
//	payload_encoding: auto             # auto, json or base64
//	redispatch_safe: true              # the firmware deduplicates by command id
//
// The same in Go:
//
//	dev, err := mqtt.New(mqtt.Config{
//		Brokers:  []string{"ssl://mqtt-a.plant.example:8883", "ssl://mqtt-b.plant.example:8883"},
//		ClientID: "krabka-dispatch-node-1",
//		Username: "dispatcher",
//		Password: "s3cret",
//		TLS: &mqtt.TLSConfig{
//			CAFile:     "/etc/krabka/mqtt-ca.pem",
//			CertFile:   "/etc/krabka/mqtt-client.pem",
//			KeyFile:    "/etc/krabka/mqtt-client.key",
//			ServerName: "mqtt.plant.example",
//		},
//		QoS:            1,
//		Topic:          "plant/{role}/{device}/cmd",
//		ReplyTopic:     "plant/{role}/{device}/reply",
//		ReplyTimeout:   15 * time.Second,
//		RedispatchSafe: true,
//	}, mqtt.WithLogger(logger))
//	if err != nil {
//		return err // a *mqtt.ConfigError names the field
//	}
//	defer dev.Close()
//	res, err := dev.DispatchUnder(ctx, cmd, authority) // the term and token of the command's record
//
// # The device side
//
// A device subscribes to its command topic, decodes each message with
// [DecodeEnvelope], refuses it when its term is lower than the highest it
// has seen or its deadline has passed, acts, and publishes a [Reply]
// encoded with [EncodeReply] on its reply topic. The program in
// examples/fencing-device does exactly that.
package mqtt
