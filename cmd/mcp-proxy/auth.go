package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	sharedstore "github.com/mcp-proxy/mcp-proxy/store"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// probeTimeout bounds the request `auth login` sends to learn the server's
// challenge.
const probeTimeout = 30 * time.Second

const authUsage = "usage: mcp-proxy auth login SERVER | auth status [--json] | auth logout SERVER"

// runAuth runs `mcp-proxy auth <sub> ...` (docs/security.md#oauth-upstreams). Exit codes: 0 done,
// 1 the login or the store failed, 2 usage or config error (unknown
// server, a server without OAuth).
func runAuth(ctx context.Context, cfg *config.Config, o options, rest []string, stdout, stderr io.Writer) error {
	if len(rest) == 0 {
		return usageErr(authUsage)
	}
	sub, rest := rest[0], rest[1:]
	st, err := openCLIStore(cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	store, err := tokenStore(cfg, st)
	if err != nil {
		return configErr(err)
	}
	switch sub {
	case "login":
		if len(rest) != 1 {
			return usageErr("usage: mcp-proxy auth login SERVER")
		}
		return authLogin(ctx, cfg, store, rest[0], stdout, stderr)
	case "status":
		if len(rest) != 0 {
			return usageErr("usage: mcp-proxy auth status [--json]")
		}
		return authStatus(cfg, store, o.json, stdout)
	case "logout":
		if len(rest) != 1 {
			return usageErr("usage: mcp-proxy auth logout SERVER")
		}
		return authLogout(cfg, store, rest[0], stdout)
	default:
		return usageErr("unknown auth command %q; %s", sub, authUsage)
	}
}

// oauthServer returns the server named name if its auth is oauth or
// client_credentials.
func oauthServer(cfg *config.Config, name string) (*config.Server, error) {
	s := cfg.Servers[name]
	if s == nil {
		return nil, usageErr("no server named %q in the config (servers: %s)", name, strings.Join(cfg.ServerNames(), ", "))
	}
	if s.Auth == nil || (s.Auth.Type != config.AuthOAuth && s.Auth.Type != config.AuthClientCredentials) {
		return nil, usageErr("server %q has no auth of type oauth or client_credentials; nothing to log in to", name)
	}
	return s, nil
}

// authClient builds the token client of s for the CLI: its messages go to
// stderr, its opener's output too.
func authClient(cfg *config.Config, s *config.Server, store *oauthclient.Store, stderr io.Writer) (*oauthclient.Client, *tls.Config, error) {
	var tlsCfg *tls.Config
	if s.TLSCACertPath != "" {
		pool, err := upstream.LoadCAPool(s.TLSCACertPath)
		if err != nil {
			return nil, nil, &exitError{code: exitRuntime, err: err}
		}
		tlsCfg = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	out := newScrubbedOutput(stderr, cfg.Secrets())
	c, err := oauthclient.New(s, oauthclient.Options{Store: store, TLSConfig: tlsCfg, Logger: newLogger(cfg, out), OpenerOutput: out})
	if err != nil {
		return nil, nil, configErr(err)
	}
	return c, tlsCfg, nil
}

func authLogin(ctx context.Context, cfg *config.Config, store *oauthclient.Store, name string, stdout, stderr io.Writer) error {
	s, err := oauthServer(cfg, name)
	if err != nil {
		return err
	}
	c, tlsCfg, err := authClient(cfg, s, store, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	ch, probeErr := probeChallenge(ctx, s, tlsCfg)
	if probeErr != nil {
		fmt.Fprintf(stderr, "mcp-proxy: could not ask %s for its challenge (%v); discovering through the well-known URIs\n", name, sanitize.Error(probeErr.Error()))
	}
	prompt := func(p oauthclient.LoginPrompt) {
		fmt.Fprintf(stdout, "To authorize mcp-proxy for server %q, open this URL in a browser:\n\n  %s\n\n", p.Server, sanitize.TerminalLine(p.URL))
		fmt.Fprintf(stdout, "Waiting for the browser to come back to %scallback (at most %s)...\n", p.LocalURL, oauthclient.DefaultLoginTimeout)
	}
	if err := c.Login(ctx, ch, prompt); err != nil {
		return &exitError{code: exitRuntime, err: fmt.Errorf("auth login %s: %s", name, sanitize.NewScrubber(cfg.Secrets()).Text(err.Error()))}
	}
	st := c.Status()
	fmt.Fprintf(stdout, "Server %q is authorized%s. A running mcp-proxy picks the token up within a few seconds.\n", name, describeExpiry(st.Expiry))
	return nil
}

// probeChallenge asks the server, without a token, for its 401 challenge:
// an initialize POST for Streamable HTTP, a GET of the stream for SSE,
// with the configured headers. A server that does not answer 401 gives a
// zero challenge (the login then uses the well-known URIs).
func probeChallenge(ctx context.Context, s *config.Server, tlsCfg *tls.Config) (oauthclient.Challenge, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var req *http.Request
	var err error
	if s.Transport == config.TransportSSE {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
		}
	} else {
		protocol := s.Protocol
		if protocol == "" || protocol == config.ProtocolAuto || protocol == config.LatestProtocol {
			protocol = config.LatestSessionProtocol // an initialize probe
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": protocol, "capabilities": map[string]any{},
			"clientInfo": map[string]string{"name": "mcp-proxy", "version": version},
		}})
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
	}
	if err != nil {
		return oauthclient.Challenge{}, err
	}
	for k, v := range s.Headers {
		if !strings.EqualFold(k, "Authorization") {
			req.Header.Set(k, v)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		return oauthclient.Challenge{}, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusUnauthorized {
		return oauthclient.Challenge{}, nil
	}
	return oauthclient.ParseChallenge(resp.Header.Values("WWW-Authenticate")), nil
}

func describeExpiry(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " (the access token expires " + t.Local().Format(time.RFC3339) + ")"
}

// authStatusRow is one server of `auth status`; it never holds a token.
type authStatusRow struct {
	Server  string   `json:"server"`
	Type    string   `json:"type"`
	State   string   `json:"state"`
	Expires string   `json:"expires,omitempty"`
	Refresh bool     `json:"refresh_token"`
	Issuer  string   `json:"issuer,omitempty"`
	Scopes  []string `json:"scopes,omitempty"`
	Error   string   `json:"error,omitempty"`
}

func authStatus(cfg *config.Config, store *oauthclient.Store, asJSON bool, stdout io.Writer) error {
	rows := []authStatusRow{}
	for _, name := range cfg.ServerNames() {
		s := cfg.Servers[name]
		if s.Auth == nil {
			continue
		}
		row := authStatusRow{Server: name, Type: s.Auth.Type}
		switch s.Auth.Type {
		case config.AuthBearer:
			row.State = "static_token"
		default:
			c, err := oauthclient.New(s, oauthclient.Options{Store: store})
			if err != nil {
				row.State, row.Error = "error", sanitize.Error(err.Error())
				break
			}
			st := c.Status()
			c.Close()
			row.State, row.Refresh, row.Issuer, row.Scopes = st.State, st.Refresh, st.Issuer, st.Scopes
			if !st.Expiry.IsZero() {
				row.Expires = st.Expiry.Local().Format(time.RFC3339)
			}
			if st.Err != nil {
				row.Error = sanitize.Error(st.Err.Error())
			}
		}
		rows = append(rows, row)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no server has an auth key")
		return nil
	}
	var t table // the issuer, its scopes and errors are the upstream's words
	t.add(0, "", "SERVER", "TYPE", "STATE", "EXPIRES", "ISSUER", "SCOPES")
	for _, r := range rows {
		state := r.State
		if r.Error != "" {
			state += ": " + r.Error
		}
		t.add(0, "", r.Server, r.Type, state, dash(r.Expires), dash(r.Issuer), dash(strings.Join(r.Scopes, " ")))
	}
	return t.write(stdout)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func authLogout(cfg *config.Config, store *oauthclient.Store, name string, stdout io.Writer) error {
	if cfg.Servers[name] == nil {
		return usageErr("no server named %q in the config (servers: %s)", name, strings.Join(cfg.ServerNames(), ", "))
	}
	if store == nil {
		return configErr(errors.New("no state_dir: there is no token store"))
	}
	entries, err := store.Load(name)
	if errors.Is(err, sharedstore.ErrUnavailable) {
		return &exitError{code: exitRuntime, err: err}
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "the stored data of %q is unreadable; removing it\n", name)
	}
	if err := store.Remove(name); err != nil {
		return &exitError{code: exitRuntime, err: err}
	}
	if len(entries) == 0 && err == nil {
		fmt.Fprintf(stdout, "nothing stored for server %q\n", name)
		return nil
	}
	fmt.Fprintf(stdout, "forgot the tokens and registration of server %q; a running mcp-proxy stops using them when the server next refuses one\n", name)
	return nil
}
