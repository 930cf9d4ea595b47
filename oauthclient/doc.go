// Package oauthclient makes mcp-proxy an OAuth 2.1 client of its HTTP and
// SSE upstreams, as the MCP authorization specification (2025-11-25, back to
// 2025-03-26) describes it and docs/security.md#oauth-upstreams configures it.
//
// One Client serves one configured server. Its Transport (an
// http.RoundTripper decorator) puts the server's access token on every
// request to the server's own origin, refreshes it shortly before it
// expires, and answers the server's refusals:
//
//   - 401 with a token: when the server's protected resource metadata no
//     longer names the token's authorization server (the server moved), a
//     *NeedsAuthError: a login at the new one, as a first login. Else
//     refresh once (or, for client_credentials, fetch a new token) and
//     re-send once; when that is impossible or refused, the request fails
//     with a *NeedsAuthError.
//   - 401 without a token: a *NeedsAuthError carrying the parsed
//     WWW-Authenticate challenge, which the login starts from.
//   - 403 with error="insufficient_scope": a new authorization with the union
//     of the scopes held and the scopes asked for (step-up), at most
//     MaxTries sends of one request; no new authorization when the token
//     already holds every scope asked for.
//
// A login (Client.Login) is the authorization code grant with PKCE S256:
// discovery from the challenge (RFC 9728 protected resource metadata from
// resource_metadata, else the well-known URI at the server's path, else at
// its root; RFC 8414 then OpenID discovery, path-inserted then root forms;
// for 2025-03-26 servers without resource metadata the metadata at the
// server's origin, else the default /authorize, /token and /register
// endpoints), the issuer check, client identity (configured client_id, else
// a Client ID Metadata Document, else Dynamic Client Registration with
// application_type native), a loopback redirect
// http://127.0.0.1:<port>/callback served for this one login, the state
// and iss (RFC 9207) checks of the response, and the exchange with the RFC
// 8707 resource parameter (the protected resource metadata's resource as
// written, else the canonical server URL). BeginLogin and
// BrowserLogin.Complete run the same login for a browser that comes back to
// a page the caller serves (the status page's /auth/callback on the metrics
// listener) instead of the loopback listener.
// client_credentials servers get their tokens without a user,
// with client_secret_basic, client_secret_post or a private_key_jwt
// assertion signed with a PEM key.
//
// Tokens and registrations live in a Store: one JSON file per server under
// <state_dir>/auth (folder 0700, files 0600, written whole through a
// temporary file and a rename), keyed by canonical server URL and issuer,
// and updated under an exclusive lock file, so that a `serve` and an
// `auth login` sharing the folder never lose each other's writes nor spend
// one refresh token twice. A Client notices a token written by another
// process by polling its file (WaitForToken).
//
// With a Redis store (OpenShared) the same documents live in Redis instead,
// sealed with the store's secrets key, and the lock is a lease in Redis: one
// replica at a time refreshes a server's token, and the others, waiting for
// the lock, find and use the token it stored.
//
// What comes from libraries: the WWW-Authenticate parser, the metadata
// document types and Dynamic Client Registration are go-sdk's oauthex; the
// authorization URL, PKCE, the code exchange, the refresh and the
// client_credentials grants are golang.org/x/oauth2 (the refresh and the
// assertion go through its clientcredentials package, whose endpoint
// parameters carry the resource indicator that Config.TokenSource cannot);
// JWT signing is go-jose. This package adds the discovery order and the
// older specification's fallbacks, Client ID Metadata Documents, step-up,
// the loopback callback, the store and the state machine around them.
//
// No token, client secret or private key reaches an error text or a log
// line of this package.
package oauthclient
