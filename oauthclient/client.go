package oauthclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// Auth types of a server (config auth.type) that this package handles.
const (
	KindOAuth             = "oauth"
	KindClientCredentials = "client_credentials"
)

const (
	// refreshMargin: a token that expires within this is refreshed before
	// it is sent, so a request never races its expiry.
	refreshMargin = 60 * time.Second
	// DefaultPollInterval is how often WaitForToken looks at the store for
	// a token written by another process.
	DefaultPollInterval = 2 * time.Second
	// storeCheckEvery bounds how often a request looks at the store file
	// (one stat) for tokens another process wrote.
	storeCheckEvery = time.Second
	// requestTimeout bounds each request to an authorization server
	// (metadata, registration, token): a server that never answers fails
	// the login or the refresh instead of hanging it.
	requestTimeout = 30 * time.Second
	// maxRedirects of a metadata request.
	maxRedirects = 5
)

// Options are a Client's dependencies. The zero value is usable: tokens
// kept in memory only, non-interactive, the default opener, a default HTTP
// client.
type Options struct {
	// Store keeps tokens across restarts and processes; nil: memory only.
	Store *Store
	// HTTPClient sends discovery, registration and token requests. nil: a
	// client with requestTimeout per request, at most maxRedirects
	// redirects and never from https to http. TLS is TLSConfig's.
	HTTPClient *http.Client
	// TLSConfig is used by the default HTTPClient (the server's CA bundle).
	TLSConfig *tls.Config
	// Logger gets the Client's few log lines (opener failures).
	Logger zerolog.Logger
	// LookPath finds the default opener; nil: exec.LookPath.
	LookPath func(string) (string, error)
	// OpenerOutput receives the output of the auth.open command; nil
	// discards it. It must never be the proxy's stdout in stdio mode.
	OpenerOutput io.Writer
	// LoginTimeout bounds one login; 0 means DefaultLoginTimeout.
	LoginTimeout time.Duration
	// PollInterval is WaitForToken's look at the store; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
}

func (o Options) loginTimeout() time.Duration {
	if o.LoginTimeout > 0 {
		return o.LoginTimeout
	}
	return DefaultLoginTimeout
}

func (o Options) pollInterval() time.Duration {
	if o.PollInterval > 0 {
		return o.PollInterval
	}
	return DefaultPollInterval
}

// Client authorizes the proxy at one server. It is safe for concurrent use.
type Client struct {
	server string
	kind   string
	cfg    config.ServerAuth
	url    string // canonical server URL
	origin string
	opts   Options
	store  *Store
	hc     *http.Client
	log    zerolog.Logger
	key    *signingKey // client_credentials with private_key_file

	life   context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the login goroutine and opener commands

	refreshMu sync.Mutex // one refresh or grant at a time

	mu        sync.Mutex // guards everything below
	entry     *Entry     // the current tokens, nil when none
	stamp     string     // the store file version entry was read from
	checked   time.Time  // last look at the store
	changed   chan struct{}
	login     *loginRun
	closed    bool      // Close was called: no new login goroutine
	challenge Challenge // the latest 401 challenge
}

// New returns the Client of server s, whose auth.type must be oauth or
// client_credentials; a client_credentials key file is read now. It
// starts nothing.
func New(s *config.Server, opts Options) (*Client, error) {
	if s.Auth == nil || (s.Auth.Type != KindOAuth && s.Auth.Type != KindClientCredentials) {
		return nil, fmt.Errorf("server %q: auth.type is not oauth or client_credentials", s.Name)
	}
	canon, err := CanonicalURL(s.URL)
	if err != nil {
		return nil, fmt.Errorf("server %q: url: %w", s.Name, err)
	}
	u, _ := url.Parse(canon)
	c := &Client{
		server: s.Name, kind: s.Auth.Type, cfg: *s.Auth, url: canon, origin: originOf(u),
		opts: opts, store: opts.Store, hc: opts.HTTPClient,
		log:     opts.Logger.With().Str("server", s.Name).Logger(),
		changed: make(chan struct{}),
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient(opts.TLSConfig)
	}
	if c.kind == KindClientCredentials && c.cfg.PrivateKeyFile != "" {
		if c.key, err = loadSigningKey(c.cfg.PrivateKeyFile, c.cfg.Alg); err != nil {
			return nil, fmt.Errorf("server %q: auth.%w", s.Name, err)
		}
	}
	c.life, c.cancel = context.WithCancel(context.Background())
	if err := c.reload(true); err != nil {
		c.log.Warn().Err(err).Msg("stored tokens unreadable; the server will need a new login")
	}
	return c, nil
}

// defaultHTTPClient bounds every request and refuses https→http redirects.
func defaultHTTPClient(tlsCfg *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg.Clone()
	}
	return &http.Client{
		Transport: tr,
		Timeout:   requestTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return errors.New("redirect from https to http refused")
			}
			return nil
		},
	}
}

// Server returns the server's name.
func (c *Client) Server() string { return c.server }

// Kind returns KindOAuth or KindClientCredentials.
func (c *Client) Kind() string { return c.kind }

// Close cancels a login under way (its callers get its error) and kills
// an auth.open command that still runs, and waits for both. It is
// idempotent.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// reload reads the store's entry for the server URL when the file changed
// since the last look (force: whatever the time of the last look).
func (c *Client) reload(force bool) error {
	c.mu.Lock()
	if c.store == nil || (!force && time.Since(c.checked) < storeCheckEvery) {
		c.mu.Unlock()
		return nil
	}
	c.checked = time.Now()
	old := c.stamp
	c.mu.Unlock()
	stamp, err := c.store.stamp(c.server)
	if err == nil && stamp == old && !force {
		return nil
	}
	var entries []Entry
	if err == nil {
		entries, err = c.store.Load(c.server)
	}
	if err != nil {
		c.mu.Lock()
		c.checked = time.Time{} // look again on the next request
		c.mu.Unlock()
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamp = stamp
	var e *Entry
	if found := find(entries, c.url, ""); found != nil {
		cp := *found
		e = &cp
	}
	if !sameTokens(c.entry, e) {
		c.entry = e
		c.signalLocked()
	}
	return nil
}

func sameTokens(a, b *Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.AccessToken == b.AccessToken && a.RefreshToken == b.RefreshToken && a.Issuer == b.Issuer
}

// signalLocked wakes WaitForToken.
func (c *Client) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// current returns a copy of the current entry, nil when none.
func (c *Client) current() *Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entry == nil {
		return nil
	}
	e := *c.entry
	return &e
}

// storedFor returns the stored entry for issuer, nil when none.
func (c *Client) storedFor(issuer string) *Entry {
	if c.store == nil {
		if e := c.current(); e != nil && SameIssuer(e.Issuer, issuer) {
			return e
		}
		return nil
	}
	entries, err := c.store.Load(c.server)
	if err != nil {
		return nil
	}
	return find(entries, c.url, issuer)
}

// commit stores e (whole, with its tokens) and makes it current.
func (c *Client) commit(e Entry) error {
	if e.Updated.IsZero() {
		e.Updated = time.Now().UTC()
	}
	stamp := ""
	if c.store != nil {
		var err error
		if stamp, err = c.store.update(c.server, func(entries []Entry) ([]Entry, error) { return replace(entries, e), nil }); err != nil {
			return err
		}
	}
	c.adopt(&e, stamp)
	return nil
}

// adopt makes e current (read from the store at stamp).
func (c *Client) adopt(e *Entry, stamp string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamp, c.checked = stamp, time.Now()
	if !sameTokens(c.entry, e) {
		c.entry = e
		c.signalLocked()
	}
}

// noteChallenge keeps the server's latest challenge for the next login.
func (c *Client) noteChallenge(ch Challenge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.challenge = ch
}

// accessToken returns the token to send now, refreshing it (or, for
// client_credentials, fetching a new one) when it expires within
// refreshMargin. "" with no error means there is none yet: the request
// goes without one, and the server's 401 starts the authorization.
func (c *Client) accessToken(ctx context.Context) (string, error) {
	if err := c.reload(false); err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			// No fallback to what this process read before: the token
			// may have been revoked or replaced by another replica.
			return "", fmt.Errorf("server %q: reading its OAuth token: %w", c.server, err)
		}
		c.log.Debug().Err(err).Msg("token store")
	}
	e := c.current()
	if !e.hasToken() {
		return "", nil
	}
	if e.Expiry.IsZero() || time.Until(e.Expiry) > refreshMargin {
		return e.AccessToken, nil
	}
	if err := c.renew(ctx, e.AccessToken); err != nil {
		if errors.Is(err, ErrNeedsAuth) {
			return "", err
		}
		if time.Now().Before(e.Expiry) {
			return e.AccessToken, nil // still valid a little: try it
		}
		return "", err
	}
	return c.current().AccessToken, nil
}

// recover401 answers a 401 to a request sent with token used ("" none). nil
// means a new token is current: re-send. A *NeedsAuthError means a user
// must log in.
func (c *Client) recover401(ctx context.Context, ch Challenge, used string) error {
	c.noteChallenge(ch)
	if c.kind == KindClientCredentials {
		return c.fetchClientCredentials(ctx, ch, used)
	}
	if used == "" {
		if e := c.current(); e.hasToken() {
			return nil // a token arrived meanwhile
		}
		return c.needsAuth("no token yet", ch)
	}
	if err := c.checkAuthorizationServer(ctx, ch, used); err != nil {
		return err
	}
	return c.renew(ctx, used)
}

// checkAuthorizationServer answers a 401 to the token used: when the
// server's protected resource metadata no longer names the authorization
// server that issued it (the server moved to another one), the tokens are
// forgotten (the old issuer's registration stays, under its issuer) and a
// login is needed, as a first login: nothing of the old authorization
// server (refresh token, client id) is sent anywhere, and the login
// discovers and registers at the new one. nil when the metadata still names
// it, names none, or cannot be read: the refresh goes on as before.
func (c *Client) checkAuthorizationServer(ctx context.Context, ch Challenge, used string) error {
	e := c.current()
	if e == nil || e.AccessToken != used {
		return nil
	}
	prm, err := fetchResourceMetadata(ctx, c.hc, c.url, ch)
	if err != nil || prm == nil || len(prm.AuthorizationServers) == 0 {
		if err != nil {
			c.log.Debug().Err(err).Msg("protected resource metadata unreadable after a 401; refreshing the token")
		}
		return nil
	}
	for _, as := range prm.AuthorizationServers {
		if SameIssuer(as, e.Issuer) {
			return nil
		}
	}
	if err := c.updateEntry(func(x *Entry) *Entry {
		if x == nil || x.AccessToken != used {
			return nil
		}
		return forget(x)
	}); err != nil {
		return err
	}
	reason := fmt.Sprintf("its authorization server changed from %s to %s", redactURL(e.Issuer), redactURL(prm.AuthorizationServers[0]))
	return c.needsAuth(reason, ch)
}

// needsAuth builds the error a request gets when a login is needed.
func (c *Client) needsAuth(reason string, ch Challenge) error {
	return &NeedsAuthError{Server: c.server, Reason: reason, Challenge: ch}
}

// renew replaces the token used, which expired or was refused: with the
// token another caller or process stored meanwhile, else by the refresh
// token (or a new client_credentials grant). A refused refresh forgets the
// tokens and needs a login; an authorization server that does not answer
// is an error that keeps them.
func (c *Client) renew(ctx context.Context, used string) error {
	if c.kind == KindClientCredentials {
		return c.fetchClientCredentials(ctx, c.challengeNow(), used)
	}
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if e := c.current(); e.hasToken() && e.AccessToken != used && fresh(e) {
		return nil
	}
	var outcome error
	update := func(e *Entry) *Entry {
		if e == nil || !e.hasToken() {
			outcome = c.needsAuth("no token", c.challengeNow())
			return nil
		}
		if e.AccessToken != used && fresh(e) {
			return e // another process refreshed
		}
		if e.RefreshToken == "" {
			outcome = c.needsAuth("the access token expired or was refused, and there is no refresh token", c.challengeNow())
			return forget(e)
		}
		tok, err := refreshGrant(ctx, c.hc, e, e.identity(c))
		var te *TokenError
		switch {
		case errors.As(err, &te) && te.refused():
			outcome = c.needsAuth("the refresh token was refused: "+te.Error(), c.challengeNow())
			return forget(e)
		case err != nil:
			outcome = fmt.Errorf("refreshing the token: %w", err)
			return e
		}
		setToken(e, tok, e.Scopes)
		return e
	}
	if err := c.updateEntry(update); err != nil {
		return err
	}
	return outcome
}

// fresh reports whether e's token is not about to expire.
func fresh(e *Entry) bool { return e.Expiry.IsZero() || time.Until(e.Expiry) > refreshMargin }

// forget drops e's tokens, keeping the registration.
func forget(e *Entry) *Entry {
	e.AccessToken, e.RefreshToken, e.TokenType, e.Expiry = "", "", "", time.Time{}
	e.Updated = time.Now().UTC()
	return e
}

// updateEntry runs fn on the current entry for the server URL (under the
// store's lock when there is a store) and keeps what it returns.
func (c *Client) updateEntry(fn func(*Entry) *Entry) error {
	if c.store == nil {
		next := fn(c.current())
		if next != nil {
			c.adopt(next, "")
		}
		return nil
	}
	var kept *Entry
	stamp, err := c.store.update(c.server, func(entries []Entry) ([]Entry, error) {
		issuer := ""
		if cur := c.current(); cur != nil {
			issuer = cur.Issuer
		}
		var e *Entry
		if found := find(entries, c.url, issuer); found != nil {
			cp := *found
			e = &cp
		}
		next := fn(e)
		if next == nil {
			return entries, nil
		}
		kept = next
		return replace(entries, *next), nil
	})
	if err != nil {
		return err
	}
	if kept != nil {
		c.adopt(kept, stamp)
	}
	return nil
}

func (c *Client) challengeNow() Challenge {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.challenge
}

// ccIdentity is the configured client_credentials identity.
func (c *Client) ccIdentity(e *Entry) identity {
	id := identity{clientID: c.cfg.ClientID, secret: c.cfg.ClientSecret, method: c.cfg.TokenEndpointAuth, key: c.key}
	switch {
	case c.key != nil:
		id.method = AuthPrivateKeyJWT
	case id.method != "":
	case e != nil && e.TokenEndpointAuth != "":
		id.method = e.TokenEndpointAuth
	default:
		id.method = AuthSecretBasic
	}
	return id
}

// fetchClientCredentials gets a new client_credentials token unless one
// other than used is current; extra scopes are added to the configured
// ones (step-up). Discovery runs when the token endpoint is not known yet.
func (c *Client) fetchClientCredentials(ctx context.Context, ch Challenge, used string, extra ...string) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	cur := c.current()
	if len(extra) == 0 && cur.hasToken() && cur.AccessToken != used && fresh(cur) {
		return nil
	}
	e := Entry{}
	if cur != nil {
		e = *cur
	}
	if e.TokenEndpoint == "" || len(ch.Scopes) > 0 || ch.ResourceMetadata != "" {
		md, err := discover(ctx, c.hc, c.url, ch)
		if err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		e.ServerURL, e.Issuer, e.Resource, e.TokenEndpoint = c.url, md.Issuer, md.Resource, md.TokenEndpoint
		e.ClientID, e.ClientKind = c.cfg.ClientID, clientConfigured
		e.TokenEndpointAuth = pickMethod(md.TokenAuthMethods, true)
	}
	scopes := c.cfg.Scopes
	if len(scopes) == 0 {
		scopes = ch.Scopes
	}
	scopes = union(scopes, extra)
	id := c.ccIdentity(&e)
	tok, err := clientCredentials(ctx, c.hc, &e, id, scopes)
	if err != nil {
		return fmt.Errorf("client_credentials grant: %w", err)
	}
	setToken(&e, tok, scopes)
	return c.commit(e)
}

// stepUp answers a 403 insufficient_scope: a new authorization with the
// union of the scopes held and asked for, unless the token already holds
// every scope asked for (a new authorization would get the same refusal).
func (c *Client) stepUp(ctx context.Context, ch Challenge, prompt Prompt) error {
	e := c.current()
	var held []string
	if e != nil {
		held = e.Scopes
	}
	if len(ch.Scopes) == 0 || covers(held, ch.Scopes) {
		return fmt.Errorf("%w: the server refused the token for lack of scope, and it already holds every scope the server named", ErrInsufficientScope)
	}
	want := Challenge{ResourceMetadata: ch.ResourceMetadata, Scopes: union(held, ch.Scopes)}
	c.noteChallenge(want)
	if c.kind == KindClientCredentials {
		return c.fetchClientCredentials(ctx, want, "", want.Scopes...)
	}
	if prompt == nil {
		return fmt.Errorf("%w: the server needs scope(s) %v: run `%s`", ErrInsufficientScope, want.Scopes, LoginCommand(c.server))
	}
	return c.Login(ctx, want, prompt)
}

// HasToken reports whether a token is at hand (it may still be refused).
func (c *Client) HasToken() bool {
	_ = c.reload(false)
	return c.current().hasToken()
}

// WaitForToken returns when a token is at hand: one from a login of this
// Client, or one another process (`mcp-proxy auth login`) wrote to the
// store, which it polls every PollInterval. It returns ctx's error if ctx
// ends first.
func (c *Client) WaitForToken(ctx context.Context) error {
	t := time.NewTicker(c.opts.pollInterval())
	defer t.Stop()
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		if err := c.reload(true); err != nil {
			c.log.Debug().Err(err).Msg("token store")
		}
		if c.current().hasToken() {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Status is what `mcp-proxy auth status` shows of a server. It holds no
// secret.
type Status struct {
	Server, Kind string
	// State is "authorized", "expired" (a refresh token may renew it),
	// "needs_login" or "error" (the store could not be read: Err).
	State   string
	Issuer  string
	Expiry  time.Time // zero: unknown or none
	Scopes  []string
	Refresh bool // a refresh token is stored
	Err     error
}

// Status reads the store's view of the server now.
func (c *Client) Status() Status {
	st := Status{Server: c.server, Kind: c.kind, State: "needs_login"}
	if err := c.reload(true); err != nil {
		st.State, st.Err = "error", err
		return st
	}
	e := c.current()
	if !e.hasToken() {
		return st
	}
	st.Issuer, st.Expiry, st.Scopes, st.Refresh = e.Issuer, e.Expiry, e.Scopes, e.RefreshToken != ""
	st.State = "authorized"
	if !e.Expiry.IsZero() && time.Now().After(e.Expiry) {
		st.State = "expired"
	}
	return st
}
