// Package status serves the proxy's status page on the metrics listener:
// every upstream at a glance (state, why it is down and when it is tried
// again, transport, protocol, tools exposed, excluded and quarantined,
// calls, errors and p95 latency over the last five minutes), the agents'
// sessions and policy denials, a "Log in" button for OAuth servers waiting
// for a login (docs/security.md#oauth-upstreams), and the quarantined tools with their diffs and
// scan findings, to approve or keep quarantined (docs/security.md#tool-integrity).
//
// The page is HTML rendered by html/template from embedded templates; a
// few lines of script reload it every SampleInterval while no diff is
// open. What it shows comes from Options.State, gathered for each view;
// the five-minute figures come from a Window, a ring of 31 samples of the
// proxy's own Prometheus registry taken every 10 s, never from the
// counters since start.
//
// Routes (GET page and callback, every action a POST answered with 303 to
// the page):
//
//	GET  /               the page (401 and a token form when metrics.tokens is set and the browser has no session)
//	GET  /?token=T       signs in with T as the form does, then 303 to /#act=K (the address keeps no token); refused unopened when another site's page asks for it
//	POST /login          the token form: a token that signs in sets the session cookie and answers 303 to /#act=K
//	POST /logout         ends the session
//	POST /auth/login     server=S: 303 to S's authorization server, redirect URI <page origin>/auth/callback
//	GET  /auth/callback  the authorization server's redirect: state checked, code exchanged, token stored
//	POST /tools/approve  server, tool, fingerprint: pins that pending definition (only while it is the one shown)
//	POST /tools/keep     server, tool, fingerprint: marks it reviewed and kept quarantined (in memory)
//
// Security, as on the MCP endpoint: the caller puts the listener's Host
// and Origin checks in front (internal/httpguard). Reading the page gives
// no right to act: every action needs a token, either the status token
// (LoadToken: 256 random bits kept 0600 in <state_dir>/status/token,
// printed in the page's address at start and by `mcp-proxy status url`)
// or one of metrics.tokens, in the Authorization header (scripts), or the
// action key of one in the action's form (the page). Signing in with the
// form or the address sets a session cookie (HttpOnly, SameSite=Strict, an
// HMAC of the token under a per-process key, never the token) that lets
// the browser read the page when metrics.tokens is set, and no more:
// browsers send a host's cookies to all its ports, so another local
// user's server may receive it. The action key (another HMAC of the token)
// goes to the page in its address's fragment, which browsers never send,
// and the page's script keeps it in the tab's sessionStorage (per origin:
// no other port reads it) and fills the action forms with it; without
// script the page is read-only. Without metrics.tokens anyone who reaches
// the listener may read the page; with them, reading needs a token too.
// Tokens are compared in constant time; wrong ones go through one throttle
// for the page (throttle.go), and are counted (OnSignIn); a sign-in
// address that another site's page requests (Sec-Fetch-Site cross-site or
// same-site) is refused before its token is checked, so that no page can
// empty the throttle. Every action carries a CSRF token, the HMAC of a
// random seed cookie under that key, and is refused when the browser says
// it came from another site (Sec-Fetch-Site). The OAuth callback needs no
// session (browsers do not send SameSite=Strict cookies on another site's
// redirect): the state, unguessable and good once, and PKCE stand for it.
// Every text from an upstream or the config is cleaned of the config's
// secrets and of secret-shaped values before it is rendered; tokens,
// client secrets and environment values are never rendered, nor logged.
// Responses carry a nonce-based Content-Security-Policy and are never
// framed or cached.
package status
