package mqtttest

import (
	"os"
	"testing"
)

// Shared describes the shared Mosquitto that scripts/services/20-mosquitto.sh
// runs, as its env file exports it.
type Shared struct {
	// URL is the plain, anonymous listener (KRABKA_MQTT_URL).
	URL string
	// AuthURL is the listener that requires User and Password
	// (KRABKA_MQTT_AUTH_URL, KRABKA_MQTT_USER, KRABKA_MQTT_PASSWORD).
	AuthURL, User, Password string
	// TLSURL is the TLS listener that requires a client certificate
	// (KRABKA_MQTT_TLS_URL); CA, ClientCert and ClientKey are PEM files
	// (KRABKA_MQTT_CA, KRABKA_MQTT_CLIENT_CERT, KRABKA_MQTT_CLIENT_KEY).
	TLSURL, CA, ClientCert, ClientKey string
	// Bin is the mosquitto executable (KRABKA_MOSQUITTO_BIN), for tests
	// that start a broker of their own.
	Bin string
}

// SharedBroker reads the shared broker's variables. A missing variable is a
// fatal test error that says how to start the broker.
func SharedBroker(t testing.TB) Shared {
	t.Helper()
	get := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("mqtttest: %s is not set; run `bash scripts/services/20-mosquitto.sh start` and source .run/mosquitto/env (make test does both)", name)
		}
		return v
	}
	return Shared{
		URL:        get("KRABKA_MQTT_URL"),
		AuthURL:    get("KRABKA_MQTT_AUTH_URL"),
		User:       get("KRABKA_MQTT_USER"),
		Password:   get("KRABKA_MQTT_PASSWORD"),
		TLSURL:     get("KRABKA_MQTT_TLS_URL"),
		CA:         get("KRABKA_MQTT_CA"),
		ClientCert: get("KRABKA_MQTT_CLIENT_CERT"),
		ClientKey:  get("KRABKA_MQTT_CLIENT_KEY"),
		Bin:        get("KRABKA_MOSQUITTO_BIN"),
	}
}
