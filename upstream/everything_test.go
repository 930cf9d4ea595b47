package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// everythingServerPkg is the official Go SDK's conformance server (the
// go-sdk version of go.mod), which speaks both protocol eras.
const everythingServerPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// buildEverythingServer builds the conformance everything-server into a
// temporary directory of t.
func buildEverythingServer(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "everything-server")
	if err := testproc.Build(root, bin, everythingServerPkg, false, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startEverythingHTTP runs bin on a free loopback port over Streamable HTTP
// (stateless: without sessions) until the test ends, and returns its URL.
func startEverythingHTTP(t *testing.T, bin string, stateless bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "-http="+addr, fmt.Sprintf("-stateless=%v", stateless))
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return "http://" + addr + "/"
		}
		if time.Now().After(deadline) {
			t.Fatalf("everything-server not listening on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEverythingServerEras: the official Go SDK's everything-server behind
// the proxy's upstream connection, over stdio and Streamable HTTP, with
// protocol pinned to 2025-11-25, pinned to 2026-07-28, and auto (which finds
// 2026-07-28): the era is the one asked for, calls work, the x-mcp-header
// tool is called with its header (the server validates it), the client's
// capabilities reach the server per call in the new era and over
// Streamable HTTP in either, and a resource subscription is updated.
func TestEverythingServerEras(t *testing.T) {
	bin := buildEverythingServer(t)
	for _, tc := range []struct {
		transport, protocol string
		stateless           bool   // http: the server's -stateless (without sessions it serves 2026-07-28)
		want                string // the protocol spoken
	}{
		{"stdio", "2025-11-25", false, "2025-11-25"},
		{"stdio", "2026-07-28", false, "2026-07-28"},
		{"stdio", "auto", false, "2026-07-28"},
		{"http", "2025-11-25", false, "2025-11-25"},
		{"http", "2026-07-28", true, "2026-07-28"},
		// With sessions the server's server/discover offers 2025-11-25 and older only.
		{"http", "auto", false, "2025-11-25"},
		{"http", "auto", true, "2026-07-28"},
	} {
		transport, protocol, want := tc.transport, tc.protocol, tc.want
		{
			t.Run(fmt.Sprintf("%s/%s/stateless=%v", transport, protocol, tc.stateless), func(t *testing.T) {
				cfg := &config.Server{
					Name: "everything", Transport: transport, Protocol: protocol,
					Timeout: dur(20 * time.Second), ConnectTimeout: dur(20 * time.Second), MaxResponseBytes: 1 << 20,
				}
				if transport == "stdio" {
					cfg.Command = bin
					cfg.Env = map[string]string{"HOME": t.TempDir()}
				} else {
					cfg.URL = startEverythingHTTP(t, bin, tc.stateless)
				}
				notes := make(chan string, 64)
				c := start(t, cfg, Options{
					OnRequest: noRelay,
					OnNotification: func(_, method string, params json.RawMessage) {
						select {
						case notes <- method + " " + string(params):
						default:
						}
					},
				})
				s := mustConnected(t, c)
				if s.ProtocolVersion != want {
					t.Fatalf("protocol %q, want %q", s.ProtocolVersion, want)
				}
				names := toolNames(s.Tools)
				for _, n := range []string{"test_simple_text", "test_x_mcp_header", "test_missing_capability"} {
					if !slices.Contains(names, n) {
						t.Fatalf("tool %s missing from %v", n, names)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				call := func(ctx context.Context, name, args string) (string, error) {
					raw, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"`+name+`","arguments":`+args+`}`))
					return string(raw), err
				}
				if res, err := call(ctx, "test_simple_text", `{}`); err != nil || !strings.Contains(res, "This is a simple text response for testing.") {
					t.Errorf("test_simple_text: %s, %v", res, err)
				}
				if res, err := call(ctx, "test_x_mcp_header", `{"region":"eu-west-1","level":2}`); err != nil || !strings.Contains(res, "region=eu-west-1") {
					t.Errorf("test_x_mcp_header: %s, %v", res, err)
				}
				if want == config.LatestProtocol || transport == "http" {
					// The capabilities of the client a call is made for: in
					// _meta, or over a session-era HTTP upstream on a session
					// declaring them (sidesession.go).
					res, err := call(WithClientCapabilities(ctx, json.RawMessage(`{"sampling":{}}`)), "test_missing_capability", `{}`)
					if err != nil || !strings.Contains(res, "tool executed") {
						t.Errorf("test_missing_capability for a client with sampling: %s, %v", res, err)
					}
					_, err = call(WithClientCapabilities(ctx, json.RawMessage(`{"elicitation":{}}`)), "test_missing_capability", `{}`)
					var rpc *RPCError
					if !errors.As(err, &rpc) || rpc.Code != -32021 {
						t.Errorf("test_missing_capability for a client without sampling: %v, want -32021", err)
					}
				}
				if _, err := c.Request(ctx, "resources/subscribe", json.RawMessage(`{"uri":"test://watched-resource"}`)); err != nil {
					t.Fatalf("subscribe: %v", err)
				}
				deadline := time.After(15 * time.Second)
				for {
					select {
					case n := <-notes:
						if strings.HasPrefix(n, "notifications/resources/updated ") && strings.Contains(n, "test://watched-resource") {
							return
						}
					case <-deadline:
						t.Fatal(fmt.Sprintf("no resources/updated for test://watched-resource within 15 s (protocol %s)", want))
					}
				}
			})
		}
	}
}
