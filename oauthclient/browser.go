package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"
)

// ErrLoginOver: Complete was called a second time, or after the login's
// time ran out.
var ErrLoginOver = errors.New("this login is already over")

// BrowserLogin is an authorization code login whose redirect comes back to
// a page the caller serves (the status page's /auth/callback) instead of a
// loopback listener of the login's own: BeginLogin prepares the
// authorization request, the caller sends the browser to URL, finds the
// login again by the state of the redirect, and hands the redirect's query
// to Complete. Its fields hold no secret; it is safe for concurrent use.
type BrowserLogin struct {
	// Server is the configured server name.
	Server string
	// URL is the authorization URL to send the browser to; its query holds
	// the state and the PKCE challenge, no secret.
	URL string
	// State is the state parameter, which comes back in the redirect.
	State string
	// Expires is when the login stops accepting a redirect
	// (Options.LoginTimeout after BeginLogin).
	Expires time.Time

	c    *Client
	req  *authRequest
	over atomic.Bool
}

// BeginLogin prepares a login of an oauth server (docs/security.md#oauth-upstreams) whose
// browser comes back to redirectURI, an absolute http or https URL the
// caller serves: discovery from the server's latest challenge, the
// authorization server's checks (PKCE S256), the client identity
// (configured client_id, a Client ID Metadata Document, or a registration
// of redirectURI: a stored registration is reused only for the same
// redirect URI), the scopes, a PKCE verifier and a state. It contacts the
// authorization server (metadata, registration) but opens nothing and
// serves nothing; ctx bounds that. client_credentials servers need no
// browser and are refused.
func (c *Client) BeginLogin(ctx context.Context, redirectURI string) (*BrowserLogin, error) {
	if c.kind != KindOAuth {
		return nil, fmt.Errorf("server %q: auth type %s gets its tokens without a browser", c.server, c.kind)
	}
	if err := checkRedirectURI(redirectURI); err != nil {
		return nil, err
	}
	ch := c.challengeNow()
	md, err := c.discoverForLogin(ctx, ch)
	if err != nil {
		return nil, err
	}
	req, err := c.newAuthRequest(ctx, md, ch, c.storedFor(md.Issuer), redirectURI)
	if err != nil {
		return nil, err
	}
	return &BrowserLogin{Server: c.server, URL: req.url, State: req.state, Expires: time.Now().Add(c.opts.loginTimeout()), c: c, req: req}, nil
}

// Complete ends the login with the query of the redirect to its redirect
// URI: it checks the state and the iss (RFC 9207), takes the code (or the
// authorization server's refusal), redeems it with the PKCE verifier and
// the resource, and stores the tokens, where the server's connection picks
// them up at once (same Client) or within PollInterval (another Client on
// the same store). A login completes once: a second call, or a call after
// Expires, fails with ErrLoginOver.
func (l *BrowserLogin) Complete(ctx context.Context, query url.Values) error {
	if time.Now().After(l.Expires) || !l.over.CompareAndSwap(false, true) {
		return ErrLoginOver
	}
	code, err := callbackCode(query, l.req)
	if err != nil {
		return err
	}
	return l.c.finish(ctx, l.req, code)
}

// checkRedirectURI accepts an absolute http or https URL without user
// information or fragment (RFC 6749 §3.1.2).
func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("redirect URI: %w", unwrapURLError(err))
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return fmt.Errorf("redirect URI %q is not an absolute http or https URL", redactURL(raw))
	case u.User != nil, u.Fragment != "", u.RawFragment != "":
		return fmt.Errorf("redirect URI %q must have neither user information nor a fragment", redactURL(raw))
	}
	return nil
}
