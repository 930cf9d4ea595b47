package config

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
)

// listenAuthTypes are the values of listen.auth.type (docs/security.md#oauth-on-the-http-listener).
var listenAuthTypes = []string{DefaultListenAuthType}

// validateListenAuth checks listen.public_url, listen.auth and the agents'
// match rules (docs/security.md#oauth-on-the-http-listener). The rule that a non-loopback listener needs
// credentials for every agent lives with the other listen rules in
// validateListen.
func (c *Config) validateListenAuth(v *validator) {
	if c.Listen.PublicURL != "" {
		checkPublicURL(v, "listen.public_url", c.Listen.PublicURL)
	}
	a := c.Listen.Auth
	if a == nil {
		for _, name := range c.AgentNames() {
			if ag := c.Agents[name]; ag != nil && len(ag.Match) > 0 {
				v.add(joinPath(joinPath("agents", pathKey(name)), "match"),
					"needs listen.auth: without an OAuth issuer there are no token claims to match")
			}
		}
		return
	}
	v.oneOf("listen.auth.type", a.Type, listenAuthTypes)
	if a.Issuer == "" {
		v.add("listen.auth.issuer", "required: the OAuth authorization server whose tokens the listener accepts")
	} else if checkSecureURL(v, "listen.auth.issuer", a.Issuer) {
		if u, _ := url.Parse(a.Issuer); u.RawQuery != "" || u.Fragment != "" {
			v.add("listen.auth.issuer", "must not have a query or fragment (RFC 8414)")
		}
	}
	if a.JWKSURL != "" {
		checkSecureURL(v, "listen.auth.jwks_url", a.JWKSURL)
	}
	if strings.ContainsFunc(a.Audience, isSpaceOrControl) {
		v.add("listen.auth.audience", "must not contain spaces or control characters")
	}
	for i, s := range a.RequiredScopes {
		switch {
		case s == "":
			v.add(indexPath("listen.auth.required_scopes", i), "empty scope")
		case strings.ContainsFunc(s, isSpaceOrControl) || strings.ContainsAny(s, `"\`):
			v.add(indexPath("listen.auth.required_scopes", i), `a scope must not contain spaces, control characters, '"' or '\' (RFC 6749)`)
		}
	}
	if in := a.Introspection; in != nil {
		if in.URL == "" {
			v.add("listen.auth.introspection.url", "required: the RFC 7662 endpoint that checks opaque tokens")
		} else {
			checkSecureURL(v, "listen.auth.introspection.url", in.URL)
		}
		if in.ClientID == "" {
			v.add("listen.auth.introspection.client_id", "required: the introspection endpoint authenticates the proxy (RFC 7662)")
		}
	}
	if !c.HasAgents() && c.Listen.Transport == "http" {
		v.add("listen.auth", "no agent can be reached: the implicit agent "+strconv.Quote(ImplicitAgent)+
			" has neither tokens nor match; define agents with match")
	}
	for _, name := range c.AgentNames() {
		ag := c.Agents[name]
		if ag == nil {
			continue
		}
		mp := joinPath(joinPath("agents", pathKey(name)), "match")
		for _, claim := range sortedKeys(ag.Match) {
			switch {
			case claim == "":
				v.add(mp, "empty claim name")
			case len(ag.Match[claim]) == 0:
				v.add(joinPath(mp, pathKey(claim)), "needs at least one value")
			}
		}
	}
	if c.Listen.PublicURL == "" && c.Listen.Transport == "http" {
		if host, _, err := net.SplitHostPort(c.Listen.Addr); err == nil && isUnspecifiedHost(host) {
			v.add("listen.public_url", "required when listen.auth is set and listen.addr "+quoteValue(c.Listen.Addr)+
				" listens on every interface: set the URL clients use, which names the protected resources")
		}
	}
}

// listenAuthWarnings names the agents that listen.auth leaves unreachable
// over HTTP: those with neither tokens nor match.
func (c *Config) listenAuthWarnings() []string {
	if c.Listen.Auth == nil || c.Listen.Transport != "http" {
		return nil
	}
	var out []string
	for _, name := range c.AgentNames() {
		if a := c.Agents[name]; a != nil && len(a.Tokens) == 0 && len(a.Match) == 0 {
			out = append(out, joinPath("agents", pathKey(name))+
				": neither tokens nor match, so it cannot be reached over HTTP while listen.auth is set")
		}
	}
	return out
}

// hasHTTPCredentials reports whether agent a can authenticate on the HTTP
// listener: static tokens, or match rules under listen.auth.
func (c *Config) hasHTTPCredentials(a *Agent) bool {
	return len(a.Tokens) > 0 || (c.Listen.Auth != nil && len(a.Match) > 0)
}

// checkSecureURL checks the URL of an authorization server endpoint:
// absolute http(s) with a host, and https unless the host is loopback
// (tokens and their keys must not cross a network in clear text). It
// reports whether the URL parsed.
func checkSecureURL(v *validator, path, raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		v.add(path, "not a valid URL")
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !httpguard.IsLoopback(u.Hostname()) {
			v.add(path, "must be https:// (http:// only for a loopback host)")
		}
	default:
		v.add(path, "scheme must be https")
		return false
	}
	if u.Hostname() == "" {
		v.add(path, "must include a host")
	}
	return true
}

// checkPublicURL checks listen.public_url: an absolute http(s) URL with a
// host and no query, fragment or user info; the resource URLs of the
// listener are built from it.
func checkPublicURL(v *validator, path, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		v.add(path, "not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		v.add(path, "must be an absolute http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		v.add(path, "must include a host")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#"):
		v.add(path, "must not have user info, a query or a fragment")
	}
}

// isUnspecifiedHost reports whether a listen host binds every interface.
func isUnspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }
