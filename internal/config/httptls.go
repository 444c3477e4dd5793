package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrNoPEMCertificate reports a certificate bundle with no PEM certificate
// in it.
var ErrNoPEMCertificate = errors.New("holds no PEM certificate")

// ServerConfig builds the *tls.Config the member serves the API with:
// TLS 1.2 or later, the section's certificate, and, when ClientCAFile is
// set, a client certificate that one of its authorities signed is required
// at the handshake.
func (t *HTTPTLS) ServerConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("config: http.tls.cert_file and key_file: %w", err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}
	if t.ClientCAFile != "" {
		pool, err := LoadCertPool(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("config: http.tls.client_ca_file: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// LoadCertPool reads a PEM bundle of certificate authorities.
func LoadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %w", file, ErrNoPEMCertificate)
	}
	return pool, nil
}

// validate checks the combinations of the section; the member's files are
// read by checkServerFiles. With the server off (an operator's file) the
// member's certificate is not required.
func (t *HTTPTLS) validate(v *validator, serving bool) {
	switch {
	case t.ClientCAFile != "" && (t.CertFile == "" || t.KeyFile == ""):
		v.hint("http.tls.client_ca_file", t.ClientCAFile,
			"demands client certificates, which only a server with its own certificate can ask for",
			"set http.tls.cert_file and http.tls.key_file too")
	case t.CertFile == "" && t.KeyFile == "" && serving:
		v.add("http.tls.cert_file", "", "required with http.tls: the member's PEM certificate (and key_file its key)")
	default:
		bothOrNeither(v, "http.tls.cert_file", t.CertFile, "http.tls.key_file", t.KeyFile)
	}
	bothOrNeither(v, "http.tls.client_cert_file", t.ClientCertFile, "http.tls.client_key_file", t.ClientKeyFile)
}

// checkServerFiles reads the files the member serves with: the certificate
// and key must form a pair, and the client authorities must hold a
// certificate.
func (t *HTTPTLS) checkServerFiles(v *validator) {
	n := len(v.problems)
	fileReadable(v, "http.tls.cert_file", t.CertFile)
	fileReadable(v, "http.tls.key_file", t.KeyFile)
	fileReadable(v, "http.tls.client_ca_file", t.ClientCAFile)
	if len(v.problems) > n {
		return
	}
	if t.CertFile != "" && t.KeyFile != "" {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			v.add("http.tls.cert_file", t.CertFile, "with key_file %s: %v", t.KeyFile, err)
		}
	}
	if t.ClientCAFile != "" {
		if _, err := LoadCertPool(t.ClientCAFile); err != nil {
			v.add("http.tls.client_ca_file", t.ClientCAFile, "%v", ErrNoPEMCertificate)
		}
	}
}
