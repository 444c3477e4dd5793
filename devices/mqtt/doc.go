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
//	authenticate: true                 # the default; false names a trusted broker
//	keys:                              # the first signs; every one verifies
//	  - {id: "2026-11", key_file: /etc/krabka/keys/valve.2026-11.hex}
//	  - {id: "2026-05", key_env: KRABKA_VALVE_KEY_2026_05}
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
//		Keys:           []mqtt.KeyConfig{{ID: "2026-11", KeyFile: "/etc/krabka/keys/valve.2026-11.hex"}},
//	}, mqtt.WithLogger(logger))
//	if err != nil {
//		return err // a *mqtt.ConfigError names the field
//	}
//	defer dev.Close()
//	res, err := dev.DispatchUnder(ctx, cmd, authority) // the term and token of the command's record
//
// # Authentication
//
// The broker checks who may connect, and with an ACL who may publish where,
// but a device cannot tell from a message who published it. Without more,
// anyone who may publish to a command topic drives the device, one forged
// envelope with the largest term makes a fencing device refuse every real
// leader for ever, and anyone who may publish to a reply topic settles an
// in-flight command as succeeded. So, by default (Config.Authenticate), the
// Device signs every envelope and verifies every reply with a per-device
// key, HMAC-SHA256, and the device verifies before it acts or replies.
//
// Keys are 32 bytes or more, written as hexadecimal text (64 hex digits or
// more; `openssl rand -hex 32` makes one), in a file (key_file) or an
// environment variable (key_env), never in the YAML itself. Each has an id,
// sent as "kid" in every envelope and reply. The first key of Config.Keys
// signs; every key verifies replies, and a device that holds several keys
// accepts any of them, so a key is rotated without a stop (docs/OPERATIONS.md,
// "Device keys").
//
// The MAC is computed over a canonical binary encoding, never over the
// JSON, whose spelling varies between encoders. All integers are
// big-endian; "bytes" is a uint32 length then the bytes; "time" is one byte
// 0 (unset) or 1 followed by the int64 Unix seconds and the uint32
// nanoseconds:
//
//	offset  size  field
//	0       4     uint32 25, the length of the domain
//	4       25    "krabka-dispatch/command/1"
//	29      2     uint16 envelope version (2)
//	31      8     int64 term
//	39      8     int64 producer id      (of the token)
//	47      2     int16 producer epoch   (of the token)
//	49      4+n   bytes role
//	…       4+n   bytes id
//	…       4+n   bytes device
//	…       4+n   bytes action
//	…       4+n   bytes payload          (as the device receives it, see below)
//	…       1/13  time deadline
//	…       1/13  time submitted_at
//
// and for a reply, with the device name that the reply's topic belongs to:
//
//	0       4     uint32 23
//	4       23    "krabka-dispatch/reply/1"
//	27      2     uint16 reply version (1)
//	29      4+n   bytes device
//	…       4+n   bytes id
//	…       4+n   bytes status
//	…       4+n   bytes detail
//	…       4+n   bytes data
//
// "mac" is HMAC-SHA256(key, encoding), 64 lowercase hex digits. The payload
// covered is the bytes the device decodes: those of "payload_base64" after
// base64 decoding, or the JSON value of "payload" exactly as it appears in
// the envelope text, from its first byte to its last (the Device strips
// white space around a JSON payload before it signs). Firmware whose JSON
// parser cannot give that span should use payload_encoding: base64.
// "attributes" are not covered. testdata/envelope-mac.json holds a key, an
// envelope, its canonical encoding and its MAC, for firmware in other
// languages to test against.
//
// A Device verifies the MAC of every reply before it lets the reply settle a
// command: a reply that does not verify is dropped, logged and counted
// ([Device.RefusedReplies]), and the command waits on for the real reply
// until its timeout. On the device, [fence.Store.AdmitSigned] verifies the
// envelope before it touches the fence's state, refuses a command past its
// deadline and the replay of a command ID it already admitted in the term,
// and applies an authenticated fence reset ([fence.ResetAction]).
//
// Authentication does not replace the broker's ACL: an ACL that lets only
// the dispatchers publish to command topics and only each device to its
// reply topic keeps forgeries off the wire, and the MAC keeps them from
// acting when the ACL is wrong. It does not hide commands: use TLS for that.
//
// # The device side
//
// A device subscribes to its command topic, decodes each message with
// [DecodeEnvelope], passes it to [fence.Store.AdmitSigned] (which verifies
// its MAC and refuses a forged, replayed, expired or stale command), acts,
// and publishes a [Reply] signed with [SignReply] and encoded with
// [EncodeReply] on its reply topic. The program in examples/fencing-device
// does exactly that.
package mqtt
