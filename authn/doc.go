// Package authn decides who is calling the MCP endpoints of the HTTP
// listener (docs/agents.md#over-http, docs/security.md#oauth-on-the-http-listener): static bearer tokens per agent, and OAuth 2.1
// access tokens from one authorization server (listen.auth), whose claims
// choose the agent.
//
// The front calls Authenticator.Authenticate once per request of an MCP
// endpoint (listen.path, or /agents/<a>/mcp) and gets either a Principal
// (the agent to serve, and who) or a Failure that carries the exact status,
// headers and body to send: 401 with a WWW-Authenticate challenge naming
// the endpoint's protected resource metadata, 403 for a token lacking a
// scope or matching no agent (or not the route's agent), 404 for an agent
// that does not exist, 503 when the authorization server cannot be asked.
// MetadataHandler serves the protected resource metadata (RFC 9728) of every
// endpoint at both well-known forms.
//
// Without listen.auth the rules are those of docs/agents.md#over-http exactly: an agent with
// tokens needs one of them (constant-time compare); an agent without needs
// none. With listen.auth every request needs a credential: a static token of
// the endpoint's agent, or an access token — a JWT checked against the
// issuer's keys (go-jose, an allow-list of asymmetric algorithms; keys from
// jwks_url or the issuer's metadata, cached and refetched on an unknown key
// at most once a minute), or an opaque token checked by introspection
// (RFC 7662, cached until it expires).
//
// A client's token goes nowhere but the comparison, the signature check and,
// for opaque tokens, the configured introspection endpoint. Authenticate
// does not modify the request, and neither the Principal nor a Failure nor a
// log line nor a metric holds the token; the front must not forward the
// request's Authorization header upstream (no token passthrough, docs/security.md#oauth-on-the-http-listener).
//
// An Authenticator belongs to one config generation: build a new one on
// reload. It starts no goroutine and holds no connection; it is safe for
// concurrent use.
package authn
