package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/status"
)

// runStatus is `mcp-proxy status url` and `mcp-proxy status token`: the
// status page's sign-in address, or its token alone, for those who never
// see the proxy's stderr (a client that starts it over stdio). Both read
// the token of state_dir, and make it when there is none yet, so the
// proxy started later takes the same one.
func runStatus(cfg *config.Config, args []string, stdout io.Writer) error {
	if len(args) != 1 || (args[0] != "url" && args[0] != "token") {
		return usageErr("usage: mcp-proxy status url | mcp-proxy status token")
	}
	var base string
	if args[0] == "url" {
		if cfg.Metrics.Listen == "" {
			return configErr(errors.New("metrics.listen is not set: the proxy serves no status page"))
		}
		var err error
		if base, err = pageBase(cfg.Metrics.Listen); err != nil {
			return configErr(err)
		}
	}
	tok, err := status.LoadToken(cfg.StateDir)
	if err != nil {
		return &exitError{code: exitRuntime, err: err}
	}
	if args[0] == "token" {
		fmt.Fprintln(stdout, tok)
		return nil
	}
	fmt.Fprintln(stdout, signInURL(base, tok))
	return nil
}

// pageBase is the status page's origin for a browser on this host, from
// the metrics listener's address: an unspecified host (all addresses) is
// reached at 127.0.0.1. Port 0 is chosen at start, so it has no address
// here.
func pageBase(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics.listen %q: %w", addr, err)
	}
	if port == "0" {
		return "", fmt.Errorf("metrics.listen %q takes its port at start: the proxy's log line \"serving the status page\" has the address, and `mcp-proxy status token` prints the token", addr)
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// signInURL is the page's address that signs in with tok.
func signInURL(base, tok string) string {
	return base + "/?" + status.TokenParam + "=" + tok
}
