package oauthclient

import (
	"errors"
	"fmt"
)

// ErrNeedsAuth is matched (errors.Is) by every *NeedsAuthError.
var ErrNeedsAuth = errors.New("authorization required")

// Sentinels of the login and the token grants.
var (
	// ErrClosed: Login was called after Close.
	ErrClosed = errors.New("the OAuth client is closed")
	// ErrLoginTimeout: no callback reached the loopback listener in time.
	ErrLoginTimeout = errors.New("no answer from the browser in time")
	// ErrStateMismatch: the callback's state is not the one this login sent.
	ErrStateMismatch = errors.New("the callback's state does not match the login's (a stale or forged redirect)")
	// ErrNoPKCE: the authorization server does not offer PKCE with S256.
	ErrNoPKCE = errors.New("the authorization server does not support PKCE with S256")
	// ErrNoClientID: no way to identify the proxy to the authorization server.
	ErrNoClientID = errors.New("no client_id: the authorization server supports neither Client ID Metadata Documents nor Dynamic Client Registration")
	// ErrInsufficientScope: the server refused a token for lack of scope and
	// a new authorization cannot help (or was tried MaxTries times).
	ErrInsufficientScope = errors.New("insufficient_scope")
	// ErrResourceMismatch: the protected resource metadata describes
	// another resource than the configured server.
	ErrResourceMismatch = errors.New("protected resource metadata is for another resource")
	// ErrIssuerMismatch: authorization server metadata names another issuer.
	ErrIssuerMismatch = errors.New("authorization server metadata names another issuer")
	// ErrResponseIssuer: the authorization response's iss parameter (RFC
	// 9207) is missing where the authorization server promised it, or
	// names another issuer; its code is never redeemed.
	ErrResponseIssuer = errors.New("the authorization response does not come from the authorization server of this login (RFC 9207 iss)")
	// ErrNoAccessToken: the token endpoint answered with success but
	// without a usable access token (a body that does not parse, or no
	// access_token in it).
	ErrNoAccessToken = errors.New("answered without a usable access token")
)

// LoginCommand is the command a user runs to authorize server.
func LoginCommand(server string) string { return "mcp-proxy auth login " + server }

// NeedsAuthError says that a server cannot be used until a user authorizes
// the proxy, and how. Its text never holds a token.
type NeedsAuthError struct {
	Server string
	// Reason says what happened: "no token yet", "the refresh token was
	// refused (invalid_grant)", ...
	Reason string
	// Challenge is the server's WWW-Authenticate challenge, the starting
	// point of the login; zero when there was none.
	Challenge Challenge
}

func (e *NeedsAuthError) Error() string {
	return fmt.Sprintf("server %q needs authorization (%s): run `%s`", e.Server, e.Reason, LoginCommand(e.Server))
}

// Is makes errors.Is(err, ErrNeedsAuth) true.
func (e *NeedsAuthError) Is(target error) bool { return target == ErrNeedsAuth }

// TokenError is a refusal by the token endpoint (RFC 6749 §5.2) or another
// failed answer of it. It never holds the response body, which may echo
// credentials.
type TokenError struct {
	Status      int    // HTTP status, 0 when the request got no answer
	Code        string // RFC 6749 error code, "" if none
	Description string // error_description, cut to 200 characters
}

func (e *TokenError) Error() string {
	s := fmt.Sprintf("token endpoint answered HTTP %d", e.Status)
	if e.Code != "" {
		s += ": " + e.Code
		if e.Description != "" {
			s += " (" + e.Description + ")"
		}
	}
	return s
}

// refused reports whether the endpoint rejected the grant itself (a 4xx or
// an RFC 6749 error code), as opposed to failing to answer.
func (e *TokenError) refused() bool {
	return e.Code != "" || (e.Status >= 400 && e.Status < 500)
}
