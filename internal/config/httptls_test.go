package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/krabka-io/krabka-dispatch/test/tlstest"
)

// TestHTTPTLSFiles: a member's certificate, key and client authorities are
// read by CheckMemberSecrets, which names each one that is missing or does
// not fit; the server config it builds requires a client certificate when
// client_ca_file is set, over TLS 1.2 or later.
func TestHTTPTLSFiles(t *testing.T) {
	ca := tlstest.NewCA(t, "api")
	server := ca.Server(t, "node-1")
	other := ca.Server(t, "node-2")
	missing := filepath.Join(t.TempDir(), "absent.pem")
	load := func(cert, key, clientCA string) *Config {
		t.Helper()
		text := fmt.Sprintf("role: r\nmember: m\nkafka:\n  brokers: [h:1]\nhttp:\n  tls:\n    cert_file: %s\n    key_file: %s\n", cert, key)
		if clientCA != "" {
			text += "    client_ca_file: " + clientCA + "\n"
		}
		c, err := Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		c.Complete()
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate reads no member file, yet: %v", err)
		}
		return c
	}

	c := load(server.CertFile, server.KeyFile, ca.CertFile)
	if err := c.CheckMemberSecrets(); err != nil {
		t.Fatalf("CheckMemberSecrets: %v", err)
	}
	cfg, err := c.HTTP.TLS.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("server config: client auth %v, client CAs %v, min version %x", cfg.ClientAuth, cfg.ClientCAs != nil, cfg.MinVersion)
	}
	cfg, err = load(server.CertFile, server.KeyFile, "").HTTP.TLS.ServerConfig()
	if err != nil || cfg.ClientAuth != tls.NoClientCert {
		t.Errorf("without client_ca_file: client auth %v, %v", cfg.ClientAuth, err)
	}

	for _, tc := range []struct {
		name, cert, key, clientCA, field string
	}{
		{"key of another certificate", server.CertFile, other.KeyFile, "", "http.tls.cert_file"},
		{"missing key", server.CertFile, missing, "", "http.tls.key_file"},
		{"missing client authorities", server.CertFile, server.KeyFile, missing, "http.tls.client_ca_file"},
		{"client authorities without PEM", server.CertFile, server.KeyFile, server.KeyFile, "http.tls.client_ca_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := load(tc.cert, tc.key, tc.clientCA).CheckMemberSecrets()
			var verr *ValidationError
			if !errors.As(err, &verr) || verr.Field(tc.field) == nil {
				t.Fatalf("CheckMemberSecrets = %v, want a fault of %s", err, tc.field)
			}
		})
	}
}

// TestHTTPTLSOperatorFile: a file whose server is off needs no member
// certificate, so an operator's file may carry only what the commands use.
func TestHTTPTLSOperatorFile(t *testing.T) {
	const head = "role: r\nmember: m\nkafka:\n  brokers: [h:1]\nhttp:\n"
	tlsOnly := "  tls:\n    ca_file: ca.pem\n    client_cert_file: op.pem\n    client_key_file: op-key.pem\n"
	for _, tc := range []struct {
		text  string
		field string
	}{
		{head + "  listen: \"off\"\n" + tlsOnly, ""},
		{head + tlsOnly, "http.tls.cert_file"},
	} {
		c, err := Parse([]byte(tc.text))
		if err != nil {
			t.Fatal(err)
		}
		c.Complete()
		err = c.Validate()
		var verr *ValidationError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("server off: %v", err)
		case tc.field != "" && (!errors.As(err, &verr) || verr.Field(tc.field) == nil):
			t.Errorf("server on: Validate = %v, want a fault of %s", err, tc.field)
		}
	}
}
