package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// bearerGate answers 401 unless the request carries one of the accepted
// tokens, and records every Authorization header.
type bearerGate struct {
	mu     sync.Mutex
	tokens map[string]bool
	seen   []string
	next   http.Handler
}

func (g *bearerGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := r.Header.Get("Authorization")
	g.mu.Lock()
	g.seen = append(g.seen, h)
	ok := g.tokens[strings.TrimPrefix(h, "Bearer ")]
	g.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer scope="read"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	g.next.ServeHTTP(w, r)
}

// TestNeedsAuthState: a server without a token publishes needs_auth (no
// tools, no reconnect schedule), requests fail naming the login command,
// and a token another process writes to the store connects it.
func TestNeedsAuthState(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{config.TransportHTTP, config.TransportSSE} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testNeedsAuthState(t, kind)
		})
	}
}

func testNeedsAuthState(t *testing.T, kind string) {
	gate := &bearerGate{tokens: map[string]bool{}}
	ts := httptest.NewServer(gate)
	t.Cleanup(ts.Close)
	path := "/mcp"
	gate.next = server.NewStreamableHTTPServer(newMCPGoServer())
	if kind == config.TransportSSE {
		path = "/sse"
		gate.next = server.NewSSEServer(newMCPGoServer(), server.WithBaseURL(ts.URL))
	}
	dir := filepath.Join(t.TempDir(), "auth")
	store, err := oauthclient.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := httpServer("web", ts.URL+path)
	cfg.Transport = kind
	cfg.Auth = &config.ServerAuth{Type: config.AuthOAuth, Open: "none"}
	var snaps snapshots
	c := start(t, cfg, Options{
		Backoff:    fastRetry,
		OnSnapshot: snaps.add,
		Auth:       AuthOptions{Client: oauthclient.Options{Store: store, PollInterval: 20 * time.Millisecond}},
	})
	s := c.Snapshot()
	if s.State != StateNeedsAuth || len(s.Tools) != 0 || s.Err == nil || !strings.Contains(s.Err.Error(), "mcp-proxy auth login web") {
		t.Fatalf("snapshot %s %v tools %d; want needs_auth naming the command", s.State, s.Err, len(s.Tools))
	}
	_, err = c.Request(context.Background(), "tools/list", nil)
	if !errors.Is(err, ErrNotConnected) || !errors.Is(err, ErrNeedsAuth) || !strings.Contains(err.Error(), "mcp-proxy auth login web") {
		t.Errorf("request while needs_auth: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // six fastRetry periods
	for _, snap := range snaps.list() {
		if snap.State != StateNeedsAuth {
			t.Fatalf("snapshots %s: a server that needs authorization must not go through the reconnect schedule", snaps.describe())
		}
	}

	// `auth login` in another process: its own store handle.
	other, _ := oauthclient.OpenStore(dir)
	gate.mu.Lock()
	gate.tokens["fresh-token-123456"] = true
	gate.mu.Unlock()
	err = other.Update("web", func([]oauthclient.Entry) ([]oauthclient.Entry, error) {
		return []oauthclient.Entry{{ServerURL: ts.URL + path, Issuer: ts.URL, TokenEndpoint: ts.URL + "/token",
			AccessToken: "fresh-token-123456", Expiry: time.Now().Add(time.Hour), Updated: time.Now()}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, c, 10*time.Second, "connected after the token arrived", func(s *Snapshot) bool { return s.State == StateConnected })
	callTool(t, c, "hello", map[string]any{"who": "x"})
	gate.mu.Lock()
	last := gate.seen[len(gate.seen)-1]
	gate.mu.Unlock()
	if last != "Bearer fresh-token-123456" {
		t.Errorf("last Authorization %q", last)
	}
}

// TestStaticBearer: auth type bearer sends the token to the server's
// origin.
func TestStaticBearer(t *testing.T) {
	t.Parallel()
	gate := &bearerGate{tokens: map[string]bool{"static-token-7788": true}, next: server.NewStreamableHTTPServer(newMCPGoServer())}
	ts := httptest.NewServer(gate)
	t.Cleanup(ts.Close)
	cfg := httpServer("web", ts.URL+"/mcp")
	cfg.Auth = &config.ServerAuth{Type: config.AuthBearer, Token: "static-token-7788"}
	c := start(t, cfg, Options{})
	mustConnected(t, c)
}
