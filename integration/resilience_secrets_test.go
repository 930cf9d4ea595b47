package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The secrets of TestSecretsNeverLeak. None matches a generic token shape
// (sk-…, ghp_…), so only the proxy's knowledge of its config can hide the
// custom header and the env value; the bearer token is also caught by the
// `Bearer …` rule.
const (
	rsSecretToken  = "rsTok-5e1f0c2a9b7d"
	rsSecretHeader = "rsHdr-93ad7c61e0f4"
	rsSecretEnv    = "rsEnv-4b8e2d17c6a9"
)

// rsLeakyUpstream is a minimal Streamable HTTP MCP server whose tools echo
// the credentials it received: `leak` in its result text, `leak_error` in a
// JSON-RPC error's message and data. On the path /deny it answers
// tools/list with a 500 whose body echoes them, so that connecting fails.
func rsLeakyUpstream(t testing.TB) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
		case http.MethodDelete:
			return
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		seen := fmt.Sprintf("Authorization: %s; custom credential (%s)", r.Header.Get("Authorization"), r.Header.Get("X-Upstream-Cred"))
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name            string `json:"name"`
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		if len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if r.URL.Path == "/deny" && m.Method == "tools/list" {
			http.Error(w, "bad credentials: "+seen, http.StatusInternalServerError)
			return
		}
		var result, rpcErr any
		switch m.Method {
		case "initialize":
			v := m.Params.ProtocolVersion
			if v == "" {
				v = "2025-11-25"
			}
			w.Header().Set("Mcp-Session-Id", "leaky-session-1")
			result = map[string]any{"protocolVersion": v, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "leaky", "version": "1.0.0"}}
		case "ping":
			result = map[string]any{}
		case "tools/list":
			schema := map[string]any{"type": "object"}
			result = map[string]any{"tools": []any{
				map[string]any{"name": "leak", "description": "echoes credentials in its result", "inputSchema": schema},
				map[string]any{"name": "leak_error", "description": "echoes credentials in an error", "inputSchema": schema},
			}}
		case "tools/call":
			switch m.Params.Name {
			case "leak":
				result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "upstream saw " + seen}}}
			default:
				rpcErr = map[string]any{"code": -32050, "message": "upstream refused the credentials: " + seen,
					"data": map[string]any{"seen": seen}}
			}
		default:
			rpcErr = map[string]any{"code": -32601, "message": "method not found"}
		}
		out := map[string]any{"jsonrpc": "2.0", "id": m.ID}
		if rpcErr != nil {
			out["error"] = rpcErr
		} else {
			out["result"] = result
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// rsSecretsIn returns the secrets that s holds.
func rsSecretsIn(s string) []string {
	var out []string
	for _, secret := range []string{rsSecretToken, rsSecretHeader, rsSecretEnv} {
		if strings.Contains(s, secret) {
			out = append(out, secret)
		}
	}
	return out
}

// TestSecretsNeverLeak: a bearer token and a custom header of an HTTP server
// and an env value of a stdio server never appear in the proxy's debug log
// nor in an error sent to a client, even when the upstream echoes them in a
// JSON-RPC error (message and data) and the stdio server prints its env
// value on stderr, or a server fails discovery with a 500 whose body
// echoes them. A tool result that holds them is content and passes
// unchanged to the client, but stays out of the log. Over stdio and HTTP,
// and in `mcp-proxy call` and `mcp-proxy tools --json`.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	leaky := rsLeakyUpstream(t)
	creds := "headers: {Authorization: " + q("Bearer "+rsSecretToken) + ", X-Upstream-Cred: " + q(rsSecretHeader) + "}"
	cfg := writeConfig(t, "",
		httpServer("web", leaky.URL+"/mcp", creds),
		httpServer("denied", leaky.URL+"/deny", creds, "connect_timeout: 10s"),
		stdioServer("envy", "/bin/sh", []string{"-c", `echo "envy says $RS_SECRET_ENV" >&2; exec "$0" -no-weird`, fixtureBin},
			"env: {RS_SECRET_ENV: "+q(rsSecretEnv)+"}"),
	)
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			var log *syncBuffer
			var cs *mcp.ClientSession
			if tr == "stdio" {
				c, _, stderr := sdkStdioProxyCmd(t, cfg, nil, nil)
				cs, log = c, stderr
			} else {
				url, p := startHTTPProxy(t, cfg)
				cs, log = sdkHTTP(t, url, nil, nil), p.stderr
			}
			rsWaitListed(t, cs, callTimeout, "web__leak", "web__leak_error", "envy__env")

			// Content passes: the upstream's result is the upstream's.
			res := callTool(t, cs, "web__leak", map[string]any{})
			if got := rsSecretsIn(contentText(res)); len(got) != 2 {
				t.Errorf("web__leak result %q: the upstream's own text did not pass unchanged", contentText(res))
			}
			// Errors are redacted, message and data.
			_, err := rsCall(cs, "web__leak_error", map[string]any{}, callTimeout)
			werr := rsRPCError(err)
			if werr == nil {
				t.Fatalf("web__leak_error: %v, want a JSON-RPC error", err)
			}
			t.Logf("web__leak_error as the client sees it: %d %q data %s", werr.Code, werr.Message, werr.Data)
			if !strings.Contains(werr.Message, "upstream refused the credentials") {
				t.Errorf("web__leak_error message %q is not the upstream's (sanitized) message", werr.Message)
			}
			if got := rsSecretsIn(werr.Message + string(werr.Data)); len(got) > 0 {
				t.Errorf("the error sent to the client holds the secrets %q: message %q data %s", got, werr.Message, werr.Data)
			}
			env := contentText(callTool(t, cs, "envy__env", map[string]any{"names": []string{"RS_SECRET_ENV"}}))
			if env != "RS_SECRET_ENV=set" {
				t.Errorf("envy__env: %q, want RS_SECRET_ENV=set", env)
			}

			s := log.String()
			if !strings.Contains(s, "envy says") {
				t.Errorf("the log lacks envy's stderr line; the check below means nothing")
			}
			if got := rsSecretsIn(s); len(got) > 0 {
				for _, line := range strings.Split(s, "\n") {
					if len(rsSecretsIn(line)) > 0 {
						t.Errorf("log line with a secret: %s", line)
					}
				}
			}
		})
	}
	t.Run("call verb", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, code := runCLI(t, "call", "--config", cfg, "web__leak_error", "{}")
		if code != 1 {
			t.Errorf("mcp-proxy call web__leak_error exited %d, want 1", code)
		}
		if !strings.Contains(stderr, "upstream refused the credentials") {
			t.Errorf("mcp-proxy call web__leak_error does not show the upstream's error:\n%s", tail(stderr, 2000))
		}
		if got := rsSecretsIn(stdout + stderr); len(got) > 0 {
			t.Errorf("mcp-proxy call web__leak_error printed the secrets %q:\nstdout %s\nstderr:\n%s", got, stdout, tail(stderr, 3000))
		}
	})
	t.Run("tools verb", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, code := runCLI(t, "tools", "--json", "--config", cfg)
		if code != 1 { // server denied is not connected
			t.Fatalf("mcp-proxy tools --json exited %d, want 1\n%s", code, tail(stderr, 3000))
		}
		if !strings.Contains(stdout, "bad credentials") {
			t.Errorf("tools --json does not give the 500's reason for server denied:\n%s", stdout)
		}
		if got := rsSecretsIn(stdout + stderr); len(got) > 0 {
			for _, line := range strings.Split(stdout+stderr, "\n") {
				if len(rsSecretsIn(line)) > 0 {
					t.Errorf("mcp-proxy tools --json printed a secret: %s", line)
				}
			}
		}
	})
}
