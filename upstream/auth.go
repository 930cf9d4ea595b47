package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// AuthOptions configure how the servers with an oauth or client_credentials
// auth key are authorized (docs/security.md#oauth-upstreams). The zero value keeps tokens in
// memory only and never starts a login by itself.
type AuthOptions struct {
	// Client are the token client's options: Store (the token store under
	// <state_dir>/auth; nil keeps tokens in memory), LoginTimeout,
	// PollInterval, OpenerOutput, LookPath, Logger. HTTPClient and
	// TLSConfig are set per server from its tls_ca_cert_path.
	Client oauthclient.Options
	// Interactive: a server that needs authorization starts a login at
	// once, with its auth.open command (serve). false: it waits for a token
	// that `mcp-proxy auth login` stores (tools, call).
	Interactive bool
	// OnAuthorizationURL, if set, is called with the authorization URL of
	// every login the proxy starts by itself (Interactive), right after the
	// URL is logged and handed to auth.open. It is the hook for asking a
	// stdio host to open the URL by URL-mode elicitation (docs/security.md#oauth-upstreams; never
	// for HTTP sessions, which belong to other people). It runs on the
	// login's goroutine and must not block: the login waits for the
	// browser's callback, not for this function.
	OnAuthorizationURL func(server, url string)
}

// authPause separates two authorization episodes of one server, so that a
// token the server keeps refusing cannot spin a loop.
const authPause = time.Second

// newAuthClient builds the token client of a server with an oauth or
// client_credentials auth key; nil, nil for the others.
func newAuthClient(cfg *config.Server, opts Options) (*oauthclient.Client, error) {
	if cfg.Auth == nil || (cfg.Auth.Type != config.AuthOAuth && cfg.Auth.Type != config.AuthClientCredentials) {
		return nil, nil
	}
	co := opts.Auth.Client
	co.Logger = opts.Logger
	if cfg.TLSCACertPath != "" {
		pool, err := LoadCAPool(cfg.TLSCACertPath)
		if err != nil {
			return nil, err
		}
		co.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return oauthclient.New(cfg, co)
}

// Authorizer returns the token client of an oauth or client_credentials
// server, nil for other servers (and when it could not be built: the
// connection's error says why). A login completed through it (Login, or
// BeginLogin and BrowserLogin.Complete) wakes a connection waiting in
// StateNeedsAuth at once.
func (c *Conn) Authorizer() *oauthclient.Client { return c.auth }

// authorize wraps the HTTP client's transport of an http or sse session:
// the static bearer token goes into the headers (sent to the server's
// origin only), OAuth servers get the token client's Transport, which
// kills the session when it finds that a login is needed.
func (s *session) authorize(hc *http.Client, headers map[string]string) error {
	cfg := s.c.cfg
	switch {
	case cfg.Auth == nil:
		return nil
	case cfg.Auth.Type == config.AuthBearer:
		headers["Authorization"] = "Bearer " + cfg.Auth.Token
		return nil
	case s.c.authErr != nil:
		return s.c.authErr
	case s.c.auth == nil:
		return fmt.Errorf("auth type %q is not supported", cfg.Auth.Type)
	}
	t := &oauthclient.Transport{Base: hc.Transport, Client: s.c.auth, OnNeedsAuth: func(err error) { s.die(err) }}
	if s.c.opts.Auth.Interactive {
		t.Prompt = s.c.prompt
	}
	hc.Transport = t
	return nil
}

// prompt tells the user how to complete a login the proxy started: a log
// line with the login's local URL (the process log drops query strings,
// and this one redirects to the authorization URL) and the command, and
// the OnAuthorizationURL hook.
func (c *Conn) prompt(p oauthclient.LoginPrompt) {
	ev := c.log.Warn().Str("url", p.LocalURL).Str("command", p.Command)
	if args, _ := oauthclient.OpenerArgs(c.cfg.Auth.Open, c.opts.Auth.Client.LookPath); len(args) > 0 {
		ev.Str("opener", args[0]).Msg("authorization needed: opened the authorization page with auth.open; if no browser appeared, open the url yourself")
	} else {
		ev.Msg("authorization needed: open the url in a browser, or run the command")
	}
	if h := c.opts.Auth.OnAuthorizationURL; h != nil {
		h(c.name, p.URL)
	}
}

// awaitAuthorization holds a server that needs a login (err, a
// *NeedsAuthError, from the attempt or from the live session s) in
// StateNeedsAuth until a token arrives: from a login it starts itself when
// Interactive, or from the store. It reports false when ctx ended first.
func (c *Conn) awaitAuthorization(ctx context.Context, s *session, err error) bool {
	var na *oauthclient.NeedsAuthError
	errors.As(err, &na)
	c.publishNeedsAuth(s, err)
	c.markReady() // the first attempt has ended: `tools` and `call` report the state
	if s != nil {
		c.retire(ctx, s, false)
	}
	episode, end := context.WithCancel(ctx)
	defer end() // a login still waiting for the browser is abandoned once a token arrived
	if c.opts.Auth.Interactive && na != nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if lerr := c.auth.Login(episode, na.Challenge, c.prompt); lerr != nil && episode.Err() == nil {
				c.log.Warn().Err(safe(lerr)).Str("command", oauthclient.LoginCommand(c.name)).Msg("authorization failed")
				c.publishNeedsAuth(nil, fmt.Errorf("authorization failed: %w; run `%s`", lerr, oauthclient.LoginCommand(c.name)))
			}
		}()
	}
	if c.auth.WaitForToken(ctx) != nil {
		return false
	}
	return sleep(ctx, authPause) == nil
}

// publishNeedsAuth publishes StateNeedsAuth with err; s, if not nil, stops
// being the live session.
func (c *Conn) publishNeedsAuth(s *session, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s != nil && c.sess == s {
		c.sess = nil
	}
	if c.closed {
		return
	}
	c.publishLocked(func(snap *Snapshot) { *snap = Snapshot{State: StateNeedsAuth, Err: safe(err)} })
}

// notConnected is the error of a request with no live session: it names
// the login command when the server needs authorization.
func (c *Conn) notConnected() error {
	if snap := c.Snapshot(); snap.State == StateNeedsAuth && snap.Err != nil {
		return fmt.Errorf("%w: %w", ErrNotConnected, snap.Err)
	}
	return ErrNotConnected
}

// isNeedsAuth reports whether err means a login is needed.
func isNeedsAuth(err error) bool { return err != nil && errors.Is(err, ErrNeedsAuth) }

// firstNeedsAuth returns the *NeedsAuthError in err's chain (its text is
// the one a user should see), else err.
func firstNeedsAuth(err error) error {
	var na *oauthclient.NeedsAuthError
	if errors.As(err, &na) {
		return na
	}
	return err
}
