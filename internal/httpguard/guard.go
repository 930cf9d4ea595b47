package httpguard

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// HostAllowed reports whether r may be served by its Host header: a request
// that reached the listener on a loopback address must name a loopback host
// (localhost, 127.0.0.0/8, ::1), so that a web page whose own name an
// attacker rebound to 127.0.0.1 cannot talk to a local listener. A request
// that reached another address passes; so does one whose local address is
// unknown (not served by net/http).
func HostAllowed(r *http.Request) bool {
	local, ok := localAddr(r)
	if !ok {
		return true
	}
	return !addrIsLoopback(local, false) || IsLoopback(hostOnly(r.Host))
}

// ReachedLoopback reports whether r reached the listener on a loopback
// address (an IP address and port); false when the local address is
// unknown (not served by net/http) or not one.
func ReachedLoopback(r *http.Request) bool {
	local, ok := localAddr(r)
	return ok && addrIsLoopback(local, true)
}

// localAddr is the address of the listener r reached, as net/http records
// it.
func localAddr(r *http.Request) (net.Addr, bool) {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return nil, false
	}
	return local, true
}

// addrIsLoopback reports whether a, a listener's address, is a loopback
// address: IsLoopback of the host of a.String(), which must have a port
// when needPort is set and is otherwise taken whole when it has none. A TCP
// address (what net/http records for every TCP listener) is read without
// being formatted, since this runs on every request; its zone does not
// matter (a listener on ::1%lo is on loopback all the same, and needs the
// Host check as much as any).
func addrIsLoopback(a net.Addr, needPort bool) bool {
	if t, ok := a.(*net.TCPAddr); ok {
		return t != nil && t.IP.IsLoopback()
	}
	s := a.String()
	host, _, err := net.SplitHostPort(s)
	switch {
	case err == nil:
		return IsLoopback(host)
	case needPort:
		return false
	}
	return IsLoopback(s)
}

// OriginAllowed reports whether r may be served by its Origin header: a
// request without Origin (not from a browser) passes; a browser request
// passes only from the listener's own origin, or from a loopback origin to a
// loopback host.
func OriginAllowed(r *http.Request) bool {
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
	return IsLoopback(u.Hostname()) && IsLoopback(hostOnly(r.Host))
}

// IsLoopback reports whether host (a name or an IP, brackets allowed) only
// reaches this machine: localhost, 127.0.0.0/8 or ::1.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	// What net.ParseIP accepts (no zone), read without allocating.
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil || a.Zone() != "" {
		return false
	}
	ip := a.As16()
	return net.IP(ip[:]).IsLoopback()
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}
