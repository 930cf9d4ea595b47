//go:build redis

package scaleout

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/internal/testoauth"
)

// Lifetimes of the OAuth server's access tokens: the login's expires
// inside the proxy's refresh margin (a minute), so that its first use
// refreshes it; the refreshed one lasts.
const (
	loginTokenSeconds     = 30
	refreshedTokenSeconds = 3600
)

// refreshHold is how long the token endpoint holds a refresh grant while
// it waits for one from each replica (when there are more than one):
// longer than the second within which every replica reads a login from the
// store, so that replicas that nothing serialized would all reach the
// endpoint before the first is answered. With the store's lock only one
// comes, and waits it out.
const refreshHold = 3 * time.Second

// oauthServer is an MCP server (go-sdk, Streamable HTTP) behind OAuth with
// its own authorization server, whose refresh tokens are single-use (see
// testoauth). Its tool whoami answers which grant issued the bearer token
// it was called with: "login" or "refresh".
type oauthServer struct {
	*testoauth.Server

	replicas   int // the proxies that use it (see holdRefresh)
	holdMu     sync.Mutex
	refreshing int           // refresh grants that arrived
	all        chan struct{} // closed when one came from each replica
}

// newOAuthServer starts the server for the given number of replicas: its
// token endpoint holds a refresh grant until one came from each (see
// refreshHold), which holds none when there is one replica.
func newOAuthServer(t *testing.T, replicas int) *oauthServer {
	t.Helper()
	o := &oauthServer{replicas: replicas, all: make(chan struct{})}
	ms := mcp.NewServer(&mcp.Implementation{Name: "oauth-upstream", Version: "1.0.0"}, nil)
	mcp.AddTool(ms, &mcp.Tool{Name: "whoami", Description: "Says which grant issued the caller's token."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			grant := o.Grant(req.Extra.Header.Get("Authorization"))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: grant}}}, nil, nil
		})
	o.Server = testoauth.New(t, testoauth.Options{
		MCP:                   mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil),
		RefreshTokens:         true,
		LoginTokenSeconds:     loginTokenSeconds,
		RefreshedTokenSeconds: refreshedTokenSeconds,
		BeforeRefresh:         o.holdRefresh,
	})
	return o
}

// holdRefresh holds a refresh grant until one has come from each replica,
// or refreshHold has passed.
func (o *oauthServer) holdRefresh() {
	o.holdMu.Lock()
	o.refreshing++
	if o.refreshing == o.replicas {
		close(o.all)
	}
	o.holdMu.Unlock()
	select {
	case <-o.all:
	case <-time.After(refreshHold):
	}
}

// oauthReplicaConfig is a replica's (or the CLI's) config: the Redis store
// srv, its metrics on metricsAddr ("" none), and the OAuth server o as
// "secure".
func oauthReplicaConfig(srv *redistest.Server, o *oauthServer, metricsAddr string) string {
	metrics := ""
	if metricsAddr != "" {
		metrics = fmt.Sprintf("metrics: {listen: %q}\n", metricsAddr)
	}
	return fmt.Sprintf(`log: {level: info, format: json}
store:
  type: redis
  url: %q
  encryption_key: ${MCP_PROXY_STORE_KEY}
%sservers:
%sbundles:
  all: {servers: [secure]}
agents:
  dev: {mcp_bundles: [all]}
default_agent: dev
`, srv.URL(), metrics, o.serverYAML())
}

// serverYAML is the config entry of o as server "secure", under servers.
func (o *oauthServer) serverYAML() string {
	return fmt.Sprintf("  secure:\n    url: %q\n    auth: {type: oauth, open: none}\n", o.URL("/mcp"))
}

// listsTool reports whether the replica at addr lists tool, through a new
// session.
func listsTool(ctx context.Context, t *testing.T, addr, tool string) bool {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1.0.0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list at %s: %v", addr, err)
	}
	for _, tl := range list.Tools {
		if tl.Name == tool {
			return true
		}
	}
	return false
}

// waitListsTool waits until r lists tool, failing t after startTimeout.
func waitListsTool(ctx context.Context, t *testing.T, r *replica, tool string) {
	t.Helper()
	start := time.Now()
	for !listsTool(ctx, t, r.addr, tool) {
		if time.Since(start) > startTimeout {
			t.Fatalf("replica %s does not list %s after %s\n%s", r.name, tool, startTimeout, tail(r.proc.stderr.String(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cliLogin runs `mcp-proxy auth login secure` with cfg in dir and follows
// the authorization URL it prints, as the user's browser would.
func cliLogin(t *testing.T, proxyBin, dir, cfg string) string {
	t.Helper()
	path := filepath.Join(dir, "mcp-proxy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, proxyBin, "auth", "login", "secure", "--config", path)
	cmd.Env = proxyEnv(dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &logBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	sc := bufio.NewScanner(stdout)
	hc := &http.Client{Timeout: callTimeout}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		printed.WriteString(line + "\n")
		if strings.HasPrefix(line, "http") && strings.Contains(line, "/authorize?") {
			res, err := hc.Get(line)
			if err != nil {
				t.Errorf("following the printed URL: %v", err)
				continue
			}
			body, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("following the printed URL: %d %s", res.StatusCode, body)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("auth login: %v\nstdout:\n%s\nstderr:\n%s", err, printed.String(), stderr.String())
	}
	return printed.String()
}

// TestOneLoginServesThreeReplicas: three replicas on one Redis, each with
// a state directory of its own, wait for a login to their OAuth upstream;
// one `mcp-proxy auth login` run beside them, with the same store config,
// serves all three (a token kept per process would leave two of them, or
// all three, waiting). The login's token expires within the refresh
// margin: the replicas refresh it once between them (the authorization
// server, whose refresh tokens are single-use, sees one refresh grant and
// no refused one), and a go-sdk session's calls through nginx round robin
// land on every replica, each sent upstream with the refreshed token.
func TestOneLoginServesThreeReplicas(t *testing.T) {
	nginxBinary(t)
	srv := redistest.Start(t)
	proxyBin, _ := buildBinaries(t)
	t.Setenv("MCP_PROXY_STORE_KEY", sharedStoreKey)
	o := newOAuthServer(t, 3)
	type oauthReplica struct {
		*replica
		metrics string
	}
	var reps []oauthReplica
	var addrs []string
	for _, name := range []string{"a", "b", "c"} {
		dir := t.TempDir()
		m := freeAddr(t)
		r := startProxy(t, proxyBin, name, dir, filepath.Join(dir, "record.jsonl"), oauthReplicaConfig(srv, o, m))
		reps = append(reps, oauthReplica{r, m})
		addrs = append(addrs, r.addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, r := range reps {
		if listsTool(ctx, t, r.addr, "secure__whoami") {
			t.Fatalf("replica %s lists secure__whoami before any login", r.name)
		}
	}

	printed := cliLogin(t, proxyBin, t.TempDir(), oauthReplicaConfig(srv, o, ""))
	if !strings.Contains(printed, `Server "secure" is authorized`) {
		t.Errorf("auth login printed:\n%s", printed)
	}
	start := time.Now()
	for _, r := range reps {
		waitListsTool(ctx, t, r.replica, "secure__whoami")
	}
	t.Logf("the login reached all three replicas in %s", time.Since(start).Round(10*time.Millisecond))

	ng := startRoundRobin(t, addrs)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1.0.0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + ng.addr + "/mcp", MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const calls = 9
	for i := range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "secure__whoami", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; res.IsError || got != "refresh" {
			t.Errorf("call %d answered %q (isError %v); want the upstream to have seen the refreshed token", i+1, got, res.IsError)
		}
	}
	total := 0
	for _, r := range reps {
		n := requestsCounted(t, &sharedReplica{replica: r.replica, metrics: r.metrics}, "dev", "tools/call")
		if n == 0 {
			t.Errorf("replica %s served none of the session's calls; round robin should reach every replica", r.name)
		}
		total += n
	}
	if total != calls {
		t.Errorf("%d calls counted across the replicas, want %d", total, calls)
	}
	grants, refused := o.Counts()
	if grants["authorization_code"] != 1 || grants["refresh_token"] != 1 || len(refused) != 0 {
		t.Errorf("the authorization server issued %v and refused %v; want one login and one refresh, nothing refused", grants, refused)
	}
}
