package oauthclient

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// CanonicalURL is the canonical form of an MCP server URL, its RFC 8707
// resource indicator and its key in the store: lowercase scheme and host,
// no default port, no user info, query or fragment, and no lone "/" path.
func CanonicalURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("not a valid URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", errors.New("scheme must be http or https")
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", errors.New("URL has no host")
	}
	port := u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	}
	path := u.EscapedPath()
	if path == "/" {
		path = ""
	}
	return scheme + "://" + hostport + path, nil
}

// originOf is scheme://host[:port] of u, lowercased, default port dropped.
func originOf(u *url.URL) string {
	c, err := CanonicalURL((&url.URL{Scheme: u.Scheme, Host: u.Host}).String())
	if err != nil {
		return ""
	}
	return c
}

// resourceCovers reports whether the protected resource metadata's
// resource identifier applies to the server (the check of RFC 9728 §3.3
// as the MCP authorization specification relaxes it): the same canonical
// URL, or the same origin with a path that is a whole-segment prefix of the
// server's (metadata at the root describing the whole host). An identifier
// with a fragment never applies: it cannot be sent as an RFC 8707 resource
// indicator.
func resourceCovers(resource, server string) bool {
	if strings.Contains(resource, "#") {
		return false // RFC 8707 §2: a resource indicator has no fragment
	}
	r, err := CanonicalURL(resource)
	if err != nil {
		return false
	}
	if r == server {
		return true
	}
	ru, _ := url.Parse(r)
	su, _ := url.Parse(server)
	if ru == nil || su == nil || originOf(ru) != originOf(su) {
		return false
	}
	rp := strings.TrimSuffix(ru.EscapedPath(), "/")
	return rp == "" || strings.HasPrefix(su.EscapedPath()+"/", rp+"/")
}

// redactURL is u without user info, query and fragment, for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = nil, "", "", "", false
	return u.String()
}
