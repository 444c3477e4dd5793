package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/internal/config"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
	"github.com/krabka-io/krabka-dispatch/test/tlstest"
)

// serveTLS serves h over TLS with the member's server config for pair,
// client certificates signed by clientCA required, and returns its URL.
func serveTLS(t *testing.T, h http.Handler, pair tlstest.Pair, clientCA string) string {
	t.Helper()
	cfg, err := (&config.HTTPTLS{CertFile: pair.CertFile, KeyFile: pair.KeyFile, ClientCAFile: clientCA}).ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestResolveOverHTTPS: the CLI reaches a standby over https with --cacert
// and a client certificate, follows its redirect to the leader over https
// with the token, and fails without the authority or the certificate.
func TestResolveOverHTTPS(t *testing.T) {
	ca := tlstest.NewCA(t, "api")
	client := ca.Client(t, "operator")
	leader := serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(httpapi.CommandState{ID: r.PathValue("id"), State: "cancelled"})
	}), ca.Server(t, "leader"), ca.CertFile)
	standby := serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", leader+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	}), ca.Server(t, "standby"), ca.CertFile)

	ctx := context.Background()
	base := []string{"resolve", "c-1", "--action", "cancel", "--url", standby, "--token", "tok", "--timeout", "5s"}
	code, out, errOut := runCLI(t, ctx, append(base, "--cacert", ca.CertFile, "--cert", client.CertFile, "--key", client.KeyFile)...)
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("with --cacert and a client certificate: exit %d\n%s\n%s", code, out, errOut)
	}
	for name, extra := range map[string][]string{
		"without --cacert":             {"--cert", client.CertFile, "--key", client.KeyFile},
		"without a client certificate": {"--cacert", ca.CertFile},
	} {
		if code, _, errOut := runCLI(t, ctx, append(base, extra...)...); code != int(ExitUnavailable) {
			t.Errorf("%s: exit %d, want %d\n%s", name, code, ExitUnavailable, errOut)
		}
	}
	other := tlstest.NewCA(t, "other").Client(t, "other")
	if code, _, errOut := runCLI(t, ctx, append(base, "--cacert", ca.CertFile, "--cert", other.CertFile, "--key", client.KeyFile)...); code != int(ExitUsage) {
		t.Errorf("a key that does not fit --cert: exit %d, want %d\n%s", code, ExitUsage, errOut)
	}
	if code, _, errOut := runCLI(t, ctx, append(base, "--cacert", ca.CertFile, "--cert", client.CertFile)...); code != int(ExitUsage) {
		t.Errorf("--cert without --key: exit %d\n%s", code, errOut)
	}
}

// TestRunServesHTTPSWithClientCertificates runs a member whose API demands
// TLS with client certificates and the token for reads too, on a fake
// cluster: submit --url over https with --cacert, --cert and --key
// succeeds; the reads refuse a request without the token; the health
// probes answer without it; resolve -c takes the authority, the client
// certificate and the URL from the file.
func TestRunServesHTTPSWithClientCertificates(t *testing.T) {
	_, brokers := newFakeCluster(t)
	broker := mqtttest.StartInProcess(t, "127.0.0.1:0")
	ctx := context.Background()
	if code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers); code != 0 {
		t.Fatalf("topics: %d\n%s%s", code, out, errOut)
	}
	ca := tlstest.NewCA(t, "api")
	server := ca.Server(t, "node-1")
	client := ca.Client(t, "operator")
	tlsSection := fmt.Sprintf("  protect_reads: true\n  tls:\n    cert_file: %s\n    key_file: %s\n    client_ca_file: %s\n", server.CertFile, server.KeyFile, ca.CertFile)
	cfg := writeConfig(t, brokers, "node-1", broker.URL(), "")
	rewrite(t, cfg, "  token: s3cret\n", "  token: s3cret\n"+tlsSection)
	addr, logs, _ := startRun(t, cfg)
	base := "https://" + addr

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{client.Certificate}}}}
	defer hc.CloseIdleConnections()
	status := func(path, token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(30 * time.Second)
	for status("/leaderz", "") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("the member did not lead in time\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := status("/v1/leadership", ""); got != http.StatusUnauthorized {
		t.Errorf("leadership without the token: %d, want 401", got)
	}
	if got := status("/v1/leadership", "s3cret"); got != http.StatusOK {
		t.Errorf("leadership with the token: %d, want 200", got)
	}
	// A leader is ready once it has read its role's log, a moment after it
	// took the lease; the probe needs no token either way.
	for status("/readyz", "") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("readyz without the token never answered 200\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}

	submit := []string{"submit", "--url", base, "--token", "s3cret", "--device", "valve-1", "--action", "open", "--wait", "--timeout", "20s"}
	code, out, errOut := runCLI(t, ctx, append(submit, "--id", "c-tls", "--cacert", ca.CertFile, "--cert", client.CertFile, "--key", client.KeyFile)...)
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("submit over https: exit %d\n%s\n%s\n%s", code, out, errOut, logs)
	}
	if code, _, errOut := runCLI(t, ctx, append(submit, "--id", "c-nocert", "--cacert", ca.CertFile, "--timeout", "2s")...); code != int(ExitUnavailable) {
		t.Errorf("submit without a client certificate: exit %d, want %d\n%s", code, ExitUnavailable, errOut)
	}

	// An operator's file names the member's https URL, the authority and
	// a client certificate; the member's own certificate is not read.
	op := fmt.Sprintf("role: controller\nmember: node-1\nkafka:\n  brokers: [%s]\nhttp:\n  token: s3cret\n  tls:\n    cert_file: %s\n    key_file: %s\n    ca_file: %s\n    client_cert_file: %s\n    client_key_file: %s\nmembers:\n  node-1: %s\n",
		brokers, filepath.Join(t.TempDir(), "not-here.pem"), filepath.Join(t.TempDir(), "not-here-key.pem"), ca.CertFile, client.CertFile, client.KeyFile, base)
	opFile := filepath.Join(t.TempDir(), "operator.yaml")
	if err := os.WriteFile(opFile, []byte(op), 0o600); err != nil {
		t.Fatal(err)
	}
	// c-tls succeeded, so it is not in doubt: the leader's 409 proves the
	// request went through TLS, the client certificate and the token.
	code, _, errOut = runCLI(t, ctx, "resolve", "c-tls", "--action", "cancel", "-c", opFile)
	if code == 0 || !strings.Contains(errOut, "409") {
		t.Fatalf("resolve -c over https: exit %d, want the leader's 409\n%s", code, errOut)
	}
}

// rewrite replaces old with new in the file at path.
func rewrite(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s lacks %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}
