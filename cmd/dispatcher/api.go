package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/spf13/pflag"

	"github.com/krabka-io/krabka-dispatch/internal/config"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
)

// EnvToken is the environment variable --token defaults from.
const EnvToken = "DISPATCHER_TOKEN"

// APIOptions are the flags of a command that talks to a member's HTTP API.
type APIOptions struct {
	URL   string
	Token string

	// CACert, Cert and Key reach a member that serves https: the
	// authorities to trust instead of the host's roots, and the client
	// certificate and key to present when the member demands one.
	CACert string
	Cert   string
	Key    string

	// tlsConfig is built by complete from CACert, Cert and Key; nil for
	// Go's defaults.
	tlsConfig *tls.Config
}

// AddFlags registers the flags on fs.
func (o *APIOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "url", "", "base URL of any member's HTTP API, such as https://10.0.0.1:8080 (a standby redirects to the leader)")
	fs.StringVar(&o.Token, "token", "", "bearer token of the API (default $"+EnvToken+", then the http section of --config)")
	fs.StringVar(&o.CACert, "cacert", "", "PEM bundle of the authorities that sign the members' certificates (default http.tls.ca_file of --config, then the host's roots)")
	fs.StringVar(&o.Cert, "cert", "", "PEM client certificate for members that demand one (default http.tls.client_cert_file of --config)")
	fs.StringVar(&o.Key, "key", "", "PEM key of --cert (default http.tls.client_key_file of --config)")
}

// complete fills the URL and the token from the flags, then the
// environment, then the configuration c (nil when no -c was given): the
// URL of this member in c's members list, else its http.listen address, and
// the token from c's http section. The token is a member's secret; it is
// resolved here, and only by a command that goes over the HTTP API. The
// TLS files come from the flags, else from c's http.tls section.
func (o *APIOptions) complete(c *config.Config) error {
	if o.URL == "" && c != nil {
		o.URL = memberURL(c)
	}
	o.URL = strings.TrimRight(o.URL, "/")
	if c != nil && c.HTTP.TLS != nil {
		t := c.HTTP.TLS
		if o.CACert == "" {
			o.CACert = t.CAFile
		}
		if o.Cert == "" && o.Key == "" {
			o.Cert, o.Key = t.ClientCertFile, t.ClientKeyFile
		}
	}
	if err := o.completeTLS(); err != nil {
		return err
	}
	if o.Token == "" {
		o.Token = os.Getenv(EnvToken)
	}
	if o.Token == "" && c != nil && o.URL != "" {
		if err := c.CheckToken(); err != nil {
			return withCode(ExitUsage, err)
		}
		tok, err := c.HTTP.ResolveToken()
		if err != nil {
			return withCode(ExitUsage, err)
		}
		o.Token = tok
	}
	return nil
}

// memberURL is the base URL of the HTTP API of c's member: its entry in the
// members list, or else its listen address ("" when the API is off).
func memberURL(c *config.Config) string {
	if u := c.Members[c.Member]; u != "" {
		return u
	}
	if c.HTTP.Listen == "" || c.HTTP.Listen == config.HTTPOff {
		return ""
	}
	host, port, err := net.SplitHostPort(c.HTTP.Listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	if c.HTTP.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// completeTLS reads the TLS files the options name into the client's
// *tls.Config: TLS 1.2 or later, as the members serve.
func (o *APIOptions) completeTLS() error {
	if o.CACert == "" && o.Cert == "" && o.Key == "" {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CACert != "" {
		pool, err := config.LoadCertPool(o.CACert)
		if err != nil {
			return usageErrorf("--cacert: %v", err)
		}
		cfg.RootCAs = pool
	}
	switch {
	case (o.Cert == "") != (o.Key == ""):
		return usageErrorf("give --cert and --key together, or neither")
	case o.Cert != "":
		cert, err := tls.LoadX509KeyPair(o.Cert, o.Key)
		if err != nil {
			return usageErrorf("--cert and --key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	o.tlsConfig = cfg
	return nil
}

// The backoff of a request that a member answered 503 Service Unavailable:
// no leader is known yet (a member that just started, a failover under way)
// or the leader is halting. Such a request was not accepted, so it is sent
// again until ctx ends.
const (
	unavailableBackoffMin = 100 * time.Millisecond
	unavailableBackoffMax = time.Second
)

// post sends body to path on the member, follows a redirect to the leader,
// and decodes a 2xx answer into out. It returns the URL that answered. An
// answer of 503 is tried again with backoff until ctx ends, because the
// member accepted nothing: a command ID makes the retry safe in any case.
func (o *APIOptions) post(ctx context.Context, timeout time.Duration, path string, body, out any) (string, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	waits := &backoff.ExponentialBackOff{InitialInterval: unavailableBackoffMin, Multiplier: 2, MaxInterval: unavailableBackoffMax}
	for {
		answered, err := o.postOnce(ctx, timeout, path, data, out)
		if !errors.Is(err, errUnavailable) {
			return answered, err
		}
		select {
		case <-ctx.Done():
			return answered, err
		case <-time.After(waits.NextBackOff()):
		}
	}
}

// redirectedTo returns the base URL of the request that err failed, when a
// redirect led it away from the server of asked.
func redirectedTo(err error, asked *url.URL) (string, bool) {
	var uerr *url.Error
	if !errors.As(err, &uerr) {
		return "", false
	}
	failed, perr := url.Parse(uerr.URL)
	if perr != nil || (failed.Scheme == asked.Scheme && failed.Host == asked.Host) {
		return "", false
	}
	return failed.Scheme + "://" + failed.Host, true
}

// errUnavailable marks a 503 answer, which post tries again.
var errUnavailable = errors.New("still unavailable when the time ran out")

func (o *APIOptions) postOnce(ctx context.Context, timeout time.Duration, path string, data []byte, out any) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL+path, bytes.NewReader(data))
	if err != nil {
		return "", withCode(ExitUsage, fmt.Errorf("--url %q: %w", o.URL, err))
	}
	req.Header.Set("Content-Type", "application/json")
	token := o.Token
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = o.tlsConfig
	defer transport.CloseIdleConnections()
	hc := &http.Client{
		Transport: transport,
		Timeout:   timeout,
		// The leader's URL comes from the members list; the token goes
		// along to it, as the members share it.
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) > 3 {
				return errors.New("too many redirects")
			}
			if token != "" {
				r.Header.Set("Authorization", "Bearer "+token)
			}
			return nil
		},
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return "", err // interrupted
		}
		if leader, ok := redirectedTo(err, req.URL); ok {
			// The member answered, with a redirect to the leader that
			// its lease names; the leader is what cannot be reached.
			return "", withCode(ExitUnavailable, fmt.Errorf("the member at %s sent the request on to the leader at %s, which cannot be reached: %s: %w",
				o.URL, leader, causeOf(ctx, err, timeout), err))
		}
		return "", withCode(ExitUnavailable, fmt.Errorf("cannot reach the member's HTTP API at %s (--url, or the config's http section): %s: %w",
			o.URL, causeOf(ctx, err, timeout), err))
	}
	defer resp.Body.Close()
	answered := resp.Request.URL.Scheme + "://" + resp.Request.URL.Host
	if resp.StatusCode/100 != 2 {
		var e httpapi.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&e)
		err := fmt.Errorf("%s answered %s: %s", answered, resp.Status, e.Error)
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable:
			return answered, withCode(ExitUnavailable, fmt.Errorf("%w: %w", err, errUnavailable))
		case resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusConflict, resp.StatusCode == http.StatusUnprocessableEntity:
			// A malformed command, an ID taken by another command, a
			// device or action that does not exist: the arguments are
			// at fault, and nothing was recorded.
			return answered, withCode(ExitUsage, err)
		}
		return answered, err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return answered, fmt.Errorf("%s: %w", answered, err)
	}
	return answered, nil
}
