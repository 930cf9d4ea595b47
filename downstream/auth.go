package downstream

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// originAllowed validates the Origin header against DNS rebinding (MCP
// Streamable HTTP transport, security warning): a request without Origin
// (not from a browser) passes; a browser request passes only from the
// proxy's own origin, or from a loopback origin to a loopback host.
func originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return isLoopback(u.Hostname()) && isLoopback(hostOnly(r.Host))
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// hostAllowed guards against DNS rebinding (MCP transport spec): on a
// listener bound to a loopback address, the Host header must name a
// loopback host too; a rebinding page's request names its own domain.
func hostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return true
	}
	host, _, err := net.SplitHostPort(local.String())
	if err != nil || !isLoopback(host) {
		return true
	}
	return isLoopback(hostOnly(r.Host))
}
