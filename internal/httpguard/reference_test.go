package httpguard

import (
	"net"
	"strings"
	"testing"
)

// refIsLoopback is IsLoopback as it was written first, with net.ParseIP:
// the reference the allocation-free one is held to.
func refIsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// refAddrIsLoopback is addrIsLoopback by formatting the address, as
// HostAllowed (needPort false) and ReachedLoopback (needPort true) read it
// first.
func refAddrIsLoopback(a net.Addr, needPort bool) bool {
	if t, ok := a.(*net.TCPAddr); ok && t != nil {
		// A zone does not make a loopback address another: formatted
		// without it.
		plain := *t
		plain.Zone = ""
		a = &plain
	}
	s := a.String()
	if needPort {
		host, _, err := net.SplitHostPort(s)
		return err == nil && refIsLoopback(host)
	}
	return refIsLoopback(hostOnly(s))
}

// strAddr is a listener address of another kind than TCP.
type strAddr string

func (strAddr) Network() string  { return "test" }
func (a strAddr) String() string { return string(a) }

func FuzzIsLoopbackReference(f *testing.F) {
	for _, s := range []string{"localhost", "LocalHost", "127.0.0.1", "127.255.0.9", "[::1]", "::1", "::ffff:127.0.0.1",
		"[::ffff:7f00:1]", "::1%lo", "127.0.0.1%eth0", "0:0:0:0:0:0:0:1", "128.0.0.1", "::2", "", "[", "[]", "[[::1]]",
		"0127.0.0.1", "127.1", "1.2.3.4.5", "localhost.", "example.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if got, want := IsLoopback(host), refIsLoopback(host); got != want {
			t.Fatalf("IsLoopback(%q) = %v, want %v (net.ParseIP)", host, got, want)
		}
	})
}

func FuzzAddrIsLoopbackReference(f *testing.F) {
	for _, c := range []struct {
		ip   []byte
		zone string
	}{
		{net.IPv4(127, 0, 0, 1), ""},
		{net.IPv4(127, 0, 0, 1).To4(), ""},
		{net.IPv6loopback, ""},
		{net.IPv6loopback, "lo"},
		{net.IPv4(127, 0, 0, 1), "eth0"},
		{net.IPv4(10, 0, 0, 1), ""},
		{net.IPv6zero, ""},
		{nil, ""},
		{[]byte{127, 0, 0}, ""},
		{[]byte{127, 0, 0, 1, 0}, ""},
	} {
		f.Add(c.ip, c.zone, 8080, "127.0.0.1:1")
	}
	f.Add([]byte(nil), "", 0, "localhost")
	f.Add([]byte(nil), "", 0, "[::1]:9")
	f.Add([]byte(nil), "", 0, "/run/mcp.sock")
	f.Add([]byte(nil), "", 0, "<nil>")
	f.Fuzz(func(t *testing.T, ip []byte, zone string, port int, other string) {
		for _, needPort := range []bool{false, true} {
			a := &net.TCPAddr{IP: ip, Zone: zone, Port: port}
			if got, want := addrIsLoopback(a, needPort), refAddrIsLoopback(a, needPort); got != want {
				t.Fatalf("addrIsLoopback(%q, %v) = %v, want %v", a, needPort, got, want)
			}
			if got, want := addrIsLoopback(strAddr(other), needPort), refAddrIsLoopback(strAddr(other), needPort); got != want {
				t.Fatalf("addrIsLoopback(%q, %v) = %v, want %v", other, needPort, got, want)
			}
		}
		var nilTCP *net.TCPAddr
		if addrIsLoopback(nilTCP, false) || addrIsLoopback(nilTCP, true) {
			t.Fatal("a nil *net.TCPAddr is loopback")
		}
	})
}
