package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/config"
	"github.com/krabka-io/krabka-dispatch/test/tlstest"
)

// readPaths are the read endpoints ProtectReads guards.
var readPaths = []string{"/", "/v1/leadership", "/v1/commands", "/v1/commands/c1", "/metrics"}

// probePaths stay open whatever the options.
var probePaths = []string{"/livez", "/readyz", "/leaderz"}

func newProtectedHandler(protect bool) http.Handler {
	b := newFakeBackend(true)
	b.commands["c1"] = CommandState{ID: "c1", Device: "valve-1", State: dispatch.StatusSucceeded.String()}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "dispatches_total 1\n") })
	return NewHandler(b, Options{Token: "s3cret", ProtectReads: protect, Metrics: metrics})
}

func get(h http.Handler, path, authorization string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestProtectReads: with ProtectReads every read endpoint refuses a request
// without the token, or with a wrong one, and answers one that carries it
// under any case of the scheme's name; without it they are open. The
// health probes are open either way.
func TestProtectReads(t *testing.T) {
	protected := newProtectedHandler(true)
	for _, path := range readPaths {
		for _, bad := range []string{"", "Bearer wrong", "Basic czNjcmV0", "Bearer", "Bearers3cret", "s3cret"} {
			rec := get(protected, path, bad)
			if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s with %q: %d, want 401 with WWW-Authenticate", path, bad, rec.Code)
			}
		}
		for _, good := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR  s3cret"} {
			if rec := get(protected, path, good); rec.Code != http.StatusOK {
				t.Errorf("GET %s with %q: %d, want 200\n%s", path, good, rec.Code, rec.Body)
			}
		}
	}
	open := newProtectedHandler(false)
	for _, path := range readPaths {
		if rec := get(open, path, ""); rec.Code != http.StatusOK {
			t.Errorf("GET %s without protect_reads: %d, want 200", path, rec.Code)
		}
	}
	for _, h := range []http.Handler{protected, open} {
		for _, path := range probePaths {
			if rec := get(h, path, ""); rec.Code != http.StatusOK {
				t.Errorf("probe %s without a token: %d, want 200", path, rec.Code)
			}
		}
	}
}

// TestWritesTakeAnyCaseOfBearer: the write endpoints match the scheme's
// name without regard to case, as RFC 9110 has it.
func TestWritesTakeAnyCaseOfBearer(t *testing.T) {
	h := NewHandler(newFakeBackend(true), Options{Token: "s3cret"})
	req := httptest.NewRequest(http.MethodPost, "/v1/commands", strings.NewReader(`{"id":"c2","device":"valve-1","action":"open"}`))
	req.Header.Set("Authorization", "bearer s3cret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("lower-case bearer: %d %s", rec.Code, rec.Body)
	}
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc": "abc", "bearer abc": "abc", "BEARER  abc": "abc",
		"Bearer": "", "Bearer ": "", "Basic abc": "", "Bearerabc": "", "": "",
	} {
		got, ok := bearerToken(header)
		if got != want || ok != (want != "") {
			t.Errorf("bearerToken(%q) = %q, %v; want %q", header, got, ok, want)
		}
	}
}

// TestClientCertificateRequired serves the API over TLS with the member
// config's ServerConfig and client_ca_file set: a client without a
// certificate is refused at the handshake, one whose certificate another
// authority signed too, and one with a certificate the client CA signed
// reads the leadership.
func TestClientCertificateRequired(t *testing.T) {
	ca := tlstest.NewCA(t, "api")
	server := ca.Server(t, "node-1")
	client := ca.Client(t, "operator")
	stranger := tlstest.NewCA(t, "elsewhere").Client(t, "stranger")
	serverTLS, err := (&config.HTTPTLS{CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFile: ca.CertFile}).ServerConfig()
	if err != nil {
		t.Fatal(err)
	}

	var reached atomic.Int32
	h := NewHandler(newFakeBackend(true), Options{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		h.ServeHTTP(w, r)
	}))
	srv.TLS = serverTLS
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()

	call := func(certs []tls.Certificate, maxVersion uint16) error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: certs, MaxVersion: maxVersion}}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/leadership", nil)
		if err != nil {
			return err
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
	for name, certs := range map[string][]tls.Certificate{
		"no certificate":           nil,
		"another authority's cert": {stranger.Certificate},
	} {
		// TLS 1.2 fails the client's own handshake; under TLS 1.3 the
		// client learns of the refusal at its first read.
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			if err := call(certs, v); err == nil || reached.Load() != 0 {
				t.Errorf("%s, TLS %x: %v, and %d requests reached the handler; want a refused handshake", name, v, err, reached.Load())
			}
		}
	}
	if err := call([]tls.Certificate{client.Certificate}, 0); err != nil {
		t.Fatalf("a client certificate the CA signed: %v", err)
	}
	if err := call([]tls.Certificate{client.Certificate}, tls.VersionTLS11); err == nil {
		t.Fatal("TLS 1.1 was accepted")
	}
}
