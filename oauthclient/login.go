package oauthclient

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
)

const (
	// DefaultLoginTimeout is how long a login waits for the browser: long
	// enough to sign in with a second factor, short enough that a forgotten
	// login frees its port.
	DefaultLoginTimeout = 10 * time.Minute
	// callbackPath is the redirect URI's path.
	callbackPath = "/callback"
	// callbackHeaderTimeout bounds a slow request to the loopback listener.
	callbackHeaderTimeout = 10 * time.Second
	// callbackShutdown lets the callback's answer reach the browser.
	callbackShutdown = 2 * time.Second
	// offlineAccess is the scope that asks for a refresh token (SEP-2207).
	offlineAccess = "offline_access"
)

// LoginPrompt is what a user needs to complete a login.
type LoginPrompt struct {
	Server string
	// URL is the authorization URL to open in a browser. Its query holds
	// the state and the PKCE challenge, no secret.
	URL string
	// LocalURL is http://127.0.0.1:<port>/ on the login's own listener,
	// which redirects to URL: a short address for places that drop query
	// strings, such as the proxy's log.
	LocalURL string
	// Command is the CLI command that starts a login of its own.
	Command string
}

// Prompt shows a login's URL to the user; it must not block.
type Prompt func(LoginPrompt)

// loginRun is a login in flight; waiters share its outcome. It runs on a
// context of its own (the Client's lifetime), cancelled when its last
// waiter has gone. waiters is guarded by Client.mu; err is set before done
// is closed.
type loginRun struct {
	done    chan struct{}
	err     error
	waiters int
	cancel  context.CancelFunc
}

// Login authorizes the proxy at the server with the authorization code
// grant and stores the tokens (client_credentials servers fetch a token
// instead, without a user). ch is the server's latest challenge (zero: the
// well-known URIs are used). prompt is told the URL once the loopback
// listener serves it; the configured auth.open command is run with it too.
// A login already under way for this Client is joined instead (its
// outcome is returned; its first caller's prompt was told).
//
// The login runs in a goroutine of the Client, not on any caller's ctx:
// a caller whose ctx ends returns ctx's error at once, and the login goes
// on for the others; it is cancelled when every caller has gone, or when
// the Client closes. It ends when the callback arrived and the code was
// exchanged, or with an error: cancellation, Options.LoginTimeout, a
// refused or mismatched callback, any failure of discovery, registration
// or the token endpoint. After Close, Login fails with ErrClosed.
func (c *Client) Login(ctx context.Context, ch Challenge, prompt Prompt) error {
	c.mu.Lock()
	run := c.login
	for run != nil && run.waiters == 0 {
		// An abandoned login is ending: wait until it frees its port.
		c.mu.Unlock()
		select {
		case <-run.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
		run = c.login
	}
	if run == nil {
		if c.closed {
			c.mu.Unlock()
			return fmt.Errorf("server %q: %w", c.server, ErrClosed)
		}
		if len(ch.Scopes) == 0 && ch.ResourceMetadata == "" {
			ch = c.challenge
		}
		run = c.startLogin(ch, prompt)
	}
	run.waiters++
	c.mu.Unlock()

	select {
	case <-run.done:
		return run.err
	case <-ctx.Done():
		c.mu.Lock()
		if run.waiters--; run.waiters == 0 {
			run.cancel()
		}
		c.mu.Unlock()
		return ctx.Err()
	}
}

// startLogin starts the login goroutine, which Close waits for. Called
// with c.mu held.
func (c *Client) startLogin(ch Challenge, prompt Prompt) *loginRun {
	ctx, cancel := context.WithCancel(c.life)
	run := &loginRun{done: make(chan struct{}), cancel: cancel}
	c.login = run
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := c.doLogin(ctx, ch, prompt)
		cancel()
		c.mu.Lock()
		run.err = err
		c.login = nil
		c.mu.Unlock()
		close(run.done)
	}()
	return run
}

func (c *Client) doLogin(ctx context.Context, ch Challenge, prompt Prompt) error {
	if c.kind == KindClientCredentials {
		return c.fetchClientCredentials(ctx, ch, "")
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.loginTimeout())
	defer cancel()
	md, err := c.discoverForLogin(ctx, ch)
	if err != nil {
		return err
	}
	prev := c.storedFor(md.Issuer)
	ln, err := c.listen(prev)
	if err != nil {
		return err
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	req, err := c.newAuthRequest(ctx, md, ch, prev, "http://127.0.0.1:"+strconv.Itoa(port)+callbackPath)
	if err != nil {
		return err
	}

	cb := newCallback(c.server, req)
	srv := &http.Server{Handler: cb, ReadHeaderTimeout: callbackHeaderTimeout}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), callbackShutdown)
		defer scancel()
		_ = srv.Shutdown(sctx)
		<-served
	}()

	p := LoginPrompt{Server: c.server, URL: req.url, LocalURL: "http://127.0.0.1:" + strconv.Itoa(port) + "/", Command: LoginCommand(c.server)}
	if prompt != nil {
		prompt(p)
	}
	c.open(req.url)

	var code string
	select {
	case r := <-cb.result:
		code, err = r.code, r.err
	case <-ctx.Done():
		err = ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%s): run `%s` to try again", ErrLoginTimeout, c.opts.loginTimeout(), LoginCommand(c.server))
		}
	}
	if err != nil {
		return err
	}
	return c.finish(ctx, req, code)
}

// discoverForLogin finds the authorization server of a login from ch and
// checks what the proxy requires of it: PKCE with S256 and an
// authorization endpoint.
func (c *Client) discoverForLogin(ctx context.Context, ch Challenge) (*Metadata, error) {
	md, err := discover(ctx, c.hc, c.url, ch)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if !md.PKCE {
		return nil, fmt.Errorf("%w (code_challenge_methods_supported of %s): the proxy refuses to log in without it", ErrNoPKCE, redactURL(md.Issuer))
	}
	if md.AuthorizationEndpoint == "" {
		return nil, fmt.Errorf("authorization server metadata of %s has no authorization_endpoint", redactURL(md.Issuer))
	}
	return md, nil
}

// authRequest is one authorization request of a login: the authorization
// URL the browser opens, and what the token request needs when the browser
// comes back with a code.
type authRequest struct {
	md       *Metadata
	id       identity
	entry    Entry // the registration the tokens are stored with
	scopes   []string
	redirect string // the redirect URI, sent again with the code
	verifier string // the PKCE code verifier
	state    string
	url      string // the authorization URL
}

// newAuthRequest settles the client identity for redirect (registering it
// when needed), the scopes, a PKCE verifier and a state, and builds the
// authorization URL with the RFC 8707 resource.
func (c *Client) newAuthRequest(ctx context.Context, md *Metadata, ch Challenge, prev *Entry, redirect string) (*authRequest, error) {
	id, reg, err := c.identity(ctx, md, redirect, prev)
	if err != nil {
		return nil, err
	}
	req := &authRequest{md: md, id: id, entry: reg, scopes: c.loginScopes(ch, md, prev), redirect: redirect,
		verifier: oauth2.GenerateVerifier(), state: rand.Text()}
	cfg := &oauth2.Config{
		ClientID: id.clientID, RedirectURL: redirect, Scopes: req.scopes,
		Endpoint: oauth2.Endpoint{AuthURL: md.AuthorizationEndpoint, TokenURL: md.TokenEndpoint},
	}
	req.url = cfg.AuthCodeURL(req.state, oauth2.S256ChallengeOption(req.verifier), oauth2.SetAuthURLParam("resource", md.Resource))
	return req, nil
}

// finish redeems the code of req's callback and stores the tokens with
// req's registration.
func (c *Client) finish(ctx context.Context, req *authRequest, code string) error {
	tok, err := exchangeCode(ctx, c.hc, req.md, req.id, req.redirect, code, req.verifier)
	if err != nil {
		return fmt.Errorf("exchanging the authorization code: %w", err)
	}
	e := req.entry
	setToken(&e, tok, req.scopes)
	return c.commit(e)
}

// callbackCode reads the query of a redirect back from the authorization
// server of req: the code, or why there is none (another login's state, an
// iss that does not name req's authorization server, the server's refusal,
// no code). The iss check is RFC 9207's: a response that carries iss must
// name the issuer of req's metadata exactly, and one without it is refused
// when the metadata says authorization_response_iss_parameter_supported; it
// applies to refusals too, which are then not shown as the server's.
func callbackCode(q url.Values, req *authRequest) (string, error) {
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(req.state)) != 1 {
		return "", ErrStateMismatch
	}
	if err := checkResponseIssuer(q, req.md); err != nil {
		return "", err
	}
	switch {
	case q.Get("error") != "":
		msg := cut(q.Get("error"), 100)
		if d := q.Get("error_description"); d != "" {
			msg += " (" + cut(d, 200) + ")"
		}
		return "", fmt.Errorf("the authorization server refused: %s", msg)
	case q.Get("code") == "":
		return "", errors.New("the callback carries no authorization code")
	}
	return q.Get("code"), nil
}

// checkResponseIssuer is RFC 9207's check of an authorization response's
// iss against md.
func checkResponseIssuer(q url.Values, md *Metadata) error {
	iss, has := q["iss"]
	switch {
	case has && (len(iss) != 1 || iss[0] != md.ResponseIssuer):
		return fmt.Errorf("%w: it names %q, the login went to %s", ErrResponseIssuer, cut(strings.Join(iss, " "), 200), md.ResponseIssuer)
	case !has && md.ResponseIssRequired:
		return fmt.Errorf("%w: it names none, though %s says it always does (authorization_response_iss_parameter_supported)", ErrResponseIssuer, md.ResponseIssuer)
	}
	return nil
}

// open runs the auth.open command with url, if there is one, in the
// background: a browser it starts must outlive the login. The command is
// killed only if it still runs when the Client closes.
func (c *Client) open(url string) {
	args, err := OpenerArgs(c.cfg.Open, c.opts.LookPath)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot open the authorization URL; open it yourself")
		return
	}
	if len(args) == 0 {
		return
	}
	out := c.opts.OpenerOutput
	if out == nil {
		out = io.Discard
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := runOpener(c.life, args, url, out); err != nil && c.life.Err() == nil {
			c.log.Warn().Err(err).Msg("auth.open failed; open the authorization URL yourself")
		}
	}()
}

// listen opens the loopback listener of the redirect URI: on redirect_port
// when configured, else on the port of a stored registration when free,
// else on any free port.
func (c *Client) listen(prev *Entry) (net.Listener, error) {
	port := c.cfg.RedirectPort
	if port == 0 && prev != nil && prev.ClientKind == clientRegistered {
		if u, err := url.Parse(prev.RedirectURI); err == nil {
			if p, err := strconv.Atoi(u.Port()); err == nil {
				if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
					return ln, nil
				}
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("login callback: cannot listen on 127.0.0.1:%d (%w); is another login for this server waiting?", port, err)
	}
	return ln, nil
}

// loginScopes chooses the scopes to ask for: the configured ones, else the
// challenge's, else the resource metadata's scopes_supported, else none;
// then those granted before (step-up keeps what it had). offline_access
// is asked for exactly when the authorization server lists it in its
// scopes_supported (SEP-2207: the proxy keeps refresh tokens, safely),
// whichever of those named it: a server that does not list it would
// refuse the scope or ignore it.
func (c *Client) loginScopes(ch Challenge, md *Metadata, prev *Entry) []string {
	var scopes []string
	switch {
	case len(c.cfg.Scopes) > 0:
		scopes = union(c.cfg.Scopes, ch.Scopes)
	case len(ch.Scopes) > 0:
		scopes = ch.Scopes
	default:
		scopes = md.ScopesSupported
	}
	if prev != nil && prev.hasToken() {
		scopes = union(scopes, prev.Scopes)
	}
	out := make([]string, 0, len(scopes)+1)
	for _, s := range scopes {
		if s != offlineAccess {
			out = append(out, s)
		}
	}
	if contains(md.ASScopesSupported, offlineAccess) {
		out = append(out, offlineAccess)
	}
	return out
}

// Kinds of client identity kept in Entry.ClientKind.
const (
	clientConfigured = "configured"
	clientMetadata   = "metadata_document"
	clientRegistered = "registered"
)

// identity settles the client identity at md's authorization server, in
// The documented order (docs/security.md#oauth-upstreams): the configured client_id, a Client ID Metadata Document, a
// registration (a stored one for the same redirect URI, else a new one).
// It returns the identity and the entry to store the tokens in.
func (c *Client) identity(ctx context.Context, md *Metadata, redirect string, prev *Entry) (identity, Entry, error) {
	e := Entry{
		ServerURL: c.url, Issuer: md.Issuer, Resource: md.Resource,
		AuthorizationEndpoint: md.AuthorizationEndpoint, TokenEndpoint: md.TokenEndpoint,
	}
	switch {
	case c.cfg.ClientID != "":
		id := identity{clientID: c.cfg.ClientID, secret: c.cfg.ClientSecret, method: c.cfg.TokenEndpointAuth}
		if id.method == "" {
			id.method = pickMethod(md.TokenAuthMethods, id.secret != "")
		}
		e.ClientID, e.TokenEndpointAuth, e.ClientKind = id.clientID, id.method, clientConfigured
		return id, e, nil
	case c.cfg.ClientMetadataURL != "" && md.CIMDSupported:
		e.ClientID, e.TokenEndpointAuth, e.ClientKind = c.cfg.ClientMetadataURL, AuthNone, clientMetadata
		return identity{clientID: c.cfg.ClientMetadataURL, method: AuthNone}, e, nil
	case md.RegistrationEndpoint == "":
		how := "set auth.client_id (register mcp-proxy with the authorization server, redirect URI http://127.0.0.1:<auth.redirect_port>/callback)"
		if c.cfg.ClientMetadataURL == "" && md.CIMDSupported {
			how += ", or auth.client_metadata_url"
		}
		return identity{}, e, fmt.Errorf("%w at %s: %s", ErrNoClientID, redactURL(md.Issuer), how)
	}
	if prev != nil && prev.ClientKind == clientRegistered && prev.RedirectURI == redirect &&
		(prev.SecretExpiresAt.IsZero() || time.Until(prev.SecretExpiresAt) > time.Minute) {
		e.ClientID, e.ClientSecret, e.TokenEndpointAuth = prev.ClientID, prev.ClientSecret, prev.TokenEndpointAuth
		e.ClientKind, e.RedirectURI, e.SecretExpiresAt = clientRegistered, redirect, prev.SecretExpiresAt
		return e.identity(nil), e, nil
	}
	hc, answer := recordStatus(c.hc)
	resp, err := oauthex.RegisterClient(ctx, md.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirect},
		TokenEndpointAuthMethod: pickMethod(md.TokenAuthMethods, false),
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              "mcp-proxy (" + c.server + ")",
		ApplicationType:         applicationType(redirect),
	}, hc)
	if err != nil {
		return identity{}, e, fmt.Errorf("dynamic client registration at %s: %s", redactURL(md.RegistrationEndpoint), registrationErr(err, answer()))
	}
	method := resp.TokenEndpointAuthMethod
	if method == "" {
		method = AuthNone
		if resp.ClientSecret != "" {
			method = AuthSecretBasic // RFC 7591 §2's default
		}
	}
	e.ClientID, e.ClientSecret, e.TokenEndpointAuth = resp.ClientID, resp.ClientSecret, method
	e.ClientKind, e.RedirectURI, e.SecretExpiresAt = clientRegistered, redirect, resp.ClientSecretExpiresAt
	return e.identity(nil), e, nil
}

// applicationType is the application_type a registration declares
// (OpenID Connect Dynamic Client Registration §2, which the MCP
// authorization specification asks clients to send): "native" for a
// redirect URI on a loopback host (the login's own listener, or a status
// page served on loopback), where the proxy runs on the user's machine;
// "web" for any other host, a status page reached over the network, which
// an authorization server may then hold to the rules of web clients
// (https redirect URIs).
func applicationType(redirect string) string {
	if u, err := url.Parse(redirect); err == nil && httpguard.IsLoopback(u.Hostname()) {
		return "native"
	}
	return "web"
}

// registrationErr describes a failed registration without quoting a
// response body: oauthex quotes bodies, and a successful registration's
// body holds the client secret. It goes by what is known to carry no body:
// the server's RFC 7591 error code and description, a transport error, and
// status, the endpoint's last answer (nil: none came), never by oauthex's
// wording.
func registrationErr(err error, status *httpStatus) string {
	var re *oauthex.ClientRegistrationError
	var ue *url.Error
	switch {
	case errors.As(err, &re):
		return "refused: " + cut(re.ErrorCode, 100) + " (" + cut(re.ErrorDescription, 200) + ")"
	case status == nil && errors.As(err, &ue):
		return "the request failed: " + cut(ue.Err.Error(), 300)
	case status == nil:
		return "failed (the response is not shown: it may hold a client secret)"
	case status.code == http.StatusOK || status.code == http.StatusCreated:
		return "the registration response is unusable (not JSON, no client_id, or an invalid URL in it; it is not shown: it may hold a client secret)"
	default:
		return "answered HTTP " + cut(status.line, 40)
	}
}

// httpStatus is the status of an HTTP answer: 201 and "201 Created".
type httpStatus struct {
	code int
	line string
}

// recordStatus returns a copy of hc that remembers the status of the last
// answer it got, for answer (nil until one came).
func recordStatus(hc *http.Client) (*http.Client, func() *httpStatus) {
	rec := &statusRecorder{next: hc.Transport}
	if rec.next == nil {
		rec.next = http.DefaultTransport
	}
	cp := *hc
	cp.Transport = rec
	return &cp, func() *httpStatus {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.last
	}
}

type statusRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	last *httpStatus
}

func (r *statusRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if resp != nil {
		r.mu.Lock()
		r.last = &httpStatus{code: resp.StatusCode, line: resp.Status}
		r.mu.Unlock()
	}
	return resp, err
}

// pickMethod chooses a token endpoint authentication method among the
// supported ones: none for a client without a secret when allowed (or when
// the list is empty), else client_secret_basic, else client_secret_post.
func pickMethod(supported []string, hasSecret bool) string {
	if !hasSecret && (len(supported) == 0 || contains(supported, AuthNone)) {
		return AuthNone
	}
	for _, m := range []string{AuthSecretBasic, AuthSecretPost, AuthNone} {
		if contains(supported, m) {
			return m
		}
	}
	return AuthSecretBasic
}

// identity is the entry's client identity; configured clients take their
// secret from the config (it is never stored).
func (e *Entry) identity(c *Client) identity {
	id := identity{clientID: e.ClientID, secret: e.ClientSecret, method: e.TokenEndpointAuth}
	if c != nil && e.ClientKind == clientConfigured {
		id.secret = c.cfg.ClientSecret
	}
	if c != nil && c.kind == KindClientCredentials {
		id = c.ccIdentity(e)
	}
	return id
}

// setToken puts tok into e; requested are the scopes asked for.
func setToken(e *Entry, tok *oauth2.Token, requested []string) {
	e.AccessToken, e.TokenType, e.Expiry = tok.AccessToken, tok.TokenType, tok.Expiry
	if tok.RefreshToken != "" {
		e.RefreshToken = tok.RefreshToken
	}
	e.Scopes = grantedScopes(tok, requested)
	e.Updated = time.Now().UTC()
}

// callback serves the loopback redirect of one login: /callback takes the
// first answer, / redirects to the authorization URL.
type callback struct {
	server string
	req    *authRequest
	result chan callbackResult
	once   sync.Once
}

type callbackResult struct {
	code string
	err  error
}

func newCallback(server string, req *authRequest) *callback {
	return &callback{server: server, req: req, result: make(chan callbackResult, 1)}
}

func (cb *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	switch r.URL.Path {
	case "/":
		http.Redirect(w, r, cb.req.url, http.StatusFound)
		return
	case callbackPath:
	default:
		http.NotFound(w, r)
		return
	}
	var res callbackResult
	res.code, res.err = callbackCode(r.URL.Query(), cb.req)
	first := false
	cb.once.Do(func() {
		first = true
		cb.result <- res
	})
	switch {
	case !first:
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, "mcp-proxy: this login is already over.\n")
	case res.err != nil:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, "mcp-proxy: authorizing server %q failed: %v\nRun `%s` to try again.\n", cb.server, res.err, LoginCommand(cb.server))
	default:
		_, _ = fmt.Fprintf(w, "mcp-proxy: server %q is authorized. You can close this tab.\n", cb.server)
	}
}
