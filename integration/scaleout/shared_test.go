//go:build redis

package scaleout

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

// sharedTemplateReplicas are the addresses deploy/nginx/mcp-proxy-redis.conf
// is written for.
var sharedTemplateReplicas = []string{"127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"}

// sharedLogFormat records where nginx sent each request.
const sharedLogFormat = `'$request_method $status upstream="$upstream_addr" uri="$request_uri"'`

// sharedStoreKey is the replicas' store.encryption_key (given through the
// environment, as a deployment would).
const sharedStoreKey = "c2hhcmVkLXN0YXRlLXRlc3Qta2V5LTMyLWJ5dGVzISE="

// renderRoundRobin puts the test's replicas and listen address into the
// round-robin example, refusing a template that names the template
// addresses another number of times.
func renderRoundRobin(tmpl string, replicas []string, listen string) (string, error) {
	if n := strings.Count(tmpl, templateListen); n != 1 {
		return "", fmt.Errorf("template has %d %q directives, want 1", n, templateListen)
	}
	pairs := []string{templateListen, "listen " + listen + ";"}
	for i, from := range sharedTemplateReplicas {
		if n := strings.Count(tmpl, from); n != 1 {
			return "", fmt.Errorf("template names %s %d times, want once", from, n)
		}
		pairs = append(pairs, from, replicas[i])
	}
	return strings.NewReplacer(pairs...).Replace(tmpl), nil
}

// sharedReplica is a replica of the Redis test, with its metrics address.
type sharedReplica struct {
	*replica
	metrics string
	limited string // the record of its limited server "fl"
}

// startSharedReplica runs a replica on the Redis store srv with two
// fixture servers, their echo tool alone: fx, and fl limited to 5 calls a
// minute; with secure too when o is not nil (the OAuth server o, waiting
// for a login); agents dev (the default, full autonomy) and ask
// (supervised).
func startSharedReplica(t *testing.T, proxyBin, fixtureBin, name string, srv *redistest.Server, o *oauthServer) *sharedReplica {
	t.Helper()
	dir := t.TempDir()
	r := &sharedReplica{metrics: freeAddr(t), limited: filepath.Join(dir, "limited.jsonl")}
	record := filepath.Join(dir, "record.jsonl")
	secure, servers := "", "fx, fl"
	if o != nil {
		secure, servers = o.serverYAML(), "fx, fl, secure"
	}
	cfg := fmt.Sprintf(`log: {level: info, format: json}
store:
  type: redis
  url: %q
  encryption_key: ${MCP_PROXY_STORE_KEY}
metrics: {listen: %q}
servers:
  fx:
    command: %q
    args: ["-name", %q]
    env: {FIXTURE_RECORD: %q}
    required: true
    tools: {include: [echo]}
  fl:
    command: %q
    args: ["-name", %q]
    env: {FIXTURE_RECORD: %q}
    required: true
    tools: {include: [echo]}
    limits: {per_minute: 5}
%sbundles:
  all: {servers: [%s]}
agents:
  dev: {mcp_bundles: [all]}
  ask: {mcp_bundles: [all], autonomy: supervised}
default_agent: dev
`, srv.URL(), r.metrics, fixtureBin, "shared-"+name, record, fixtureBin, "shared-"+name+"-l", r.limited, secure, servers)
	t.Setenv("MCP_PROXY_STORE_KEY", sharedStoreKey) // proxyEnv passes the test's environment on
	r.replica = startProxy(t, proxyBin, name, dir, record, cfg)
	return r
}

// requestsCounted reads mcp_proxy_requests_total{method, outcome="ok"} of
// agent from a replica's /metrics.
func requestsCounted(t *testing.T, r *sharedReplica, agent, method string) int {
	t.Helper()
	res, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := `mcp_proxy_requests_total{agent="` + agent + `",method="` + method + `",outcome="ok"} `
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, want); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %q", want, line)
			}
			return n
		}
	}
	return 0
}

// lineCount is the number of lines of a record file (0 when absent).
func lineCount(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
	}
	return n
}

// statelessPost sends a 2026-07-28 tools/call of tool to url and returns
// the body.
func statelessPost(t *testing.T, url, tool, params string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSharedStateBehindRoundRobin: three replicas on one Redis behind
// nginx round robin without affinity (deploy/nginx/mcp-proxy-redis.conf).
// A go-sdk client's session goes on across all three with one initialize:
// its tools/list and calls reach every replica. per_minute 5 lets exactly
// 5 calls through across the three. A stateless client's approval is
// answered through nginx, wherever the answer lands, and is good once.
func TestSharedStateBehindRoundRobin(t *testing.T) {
	nginxBinary(t) // fail at once, before building, when nginx is missing
	srv := redistest.Start(t)
	proxyBin, fixtureBin := buildBinaries(t)
	var reps []*sharedReplica
	var addrs []string
	for _, name := range []string{"a", "b", "c"} {
		r := startSharedReplica(t, proxyBin, fixtureBin, name, srv, nil)
		reps = append(reps, r)
		addrs = append(addrs, r.addr)
	}
	ng := startRoundRobin(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := "http://" + ng.addr

	// One go-sdk session through nginx (the session era: a 2026-07-28
	// client has no session to share).
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "shared-state-test", Version: "1.0.0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const rounds = 9
	for i := range rounds {
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list %d: %v", i+1, err)
		}
		if len(list.Tools) == 0 {
			t.Fatalf("tools/list %d: no tools", i+1)
		}
		text := "call-" + strconv.Itoa(i)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i+1, err, res)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != text {
			t.Fatalf("call %d answered %q", i+1, got)
		}
	}
	initializes, lists := 0, 0
	calls := recorded(t, reps[0].replica, reps[1].replica, reps[2].replica)
	ran := map[string]int{}
	for _, where := range calls {
		if len(where) != 1 {
			t.Errorf("a call ran %d times: %v", len(where), where)
		}
		for _, w := range where {
			ran[w]++
		}
	}
	for _, r := range reps {
		n := requestsCounted(t, r, "dev", "tools/list")
		t.Logf("replica %s: %d tools/list, %d calls", r.name, n, ran[r.name])
		if n == 0 || ran[r.name] == 0 {
			t.Errorf("replica %s served %d tools/list and %d calls of the session; round robin should reach every replica", r.name, n, ran[r.name])
		}
		lists += n
		initializes += requestsCounted(t, r, "dev", "initialize")
	}
	if initializes != 1 || lists != rounds {
		t.Errorf("%d initializes and %d tools/list across the replicas, want 1 and %d", initializes, lists, rounds)
	}

	// per_minute 5 across the three replicas.
	passed := 0
	for i := range 12 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fl__echo", Arguments: map[string]any{"text": "limited-" + strconv.Itoa(i)}})
		if err != nil {
			t.Fatalf("limited call %d: %v", i+1, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		switch {
		case !res.IsError:
			passed++
		case !strings.HasPrefix(text, "tool 'fl__echo' is denied by rate_limited: server 'fl' takes 5 calls a minute; retry in "):
			t.Fatalf("limited call %d: %s", i+1, text)
		}
	}
	sent, on := 0, 0
	for _, r := range reps {
		if n := lineCount(t, r.limited); n > 0 {
			sent, on = sent+n, on+1
		}
	}
	if passed != 5 || sent != 5 || on < 2 {
		t.Errorf("per_minute 5: %d calls passed, %d reached the servers of %d replicas; want 5 and 5, on more than one replica", passed, sent, on)
	}

	// A stateless client's approval, answered through nginx, good once.
	askURL := base + "/agents/ask/mcp"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	first := statelessPost(t, askURL, "fx__echo", `{"name":"fx__echo","arguments":{"text":"approved-once"},`+meta+`}`)
	m := regexp.MustCompile(`"requestState":"(px-approval-[0-9a-f]+)"`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first reply = %s; want an approval question", first)
	}
	answer := `{"name":"fx__echo","arguments":{"text":"approved-once"},"requestState":"` + m[1] + `",` +
		`"inputResponses":{"mcp-proxy/approval":{"action":"accept","content":{"decision":"approve"}}},` + meta + `}`
	if got := statelessPost(t, askURL, "fx__echo", answer); !strings.Contains(got, `"text":"approved-once"`) {
		t.Fatalf("approved call = %s", got)
	}
	for range 3 {
		if got := statelessPost(t, askURL, "fx__echo", answer); !strings.Contains(got, "already used") {
			t.Errorf("replayed approval = %s; want a refusal", got)
		}
	}
	if n := len(recorded(t, reps[0].replica, reps[1].replica, reps[2].replica)["approved-once"]); n != 1 {
		t.Errorf("the approved call ran %d times, want once", n)
	}
}

// startRoundRobin runs nginx with the Redis mode's round-robin config
// (deploy/nginx/mcp-proxy-redis.conf) in front of addrs; a failed test logs
// the tail of its access log, which says which replica took each request.
func startRoundRobin(t *testing.T, addrs []string) *nginxServer {
	t.Helper()
	ng := startNginxSite(t, "mcp-proxy-redis.conf", sharedLogFormat, func(tmpl, listen string) (string, error) {
		return renderRoundRobin(tmpl, addrs, listen)
	})
	t.Cleanup(func() {
		if t.Failed() {
			if log, err := os.ReadFile(ng.accessLog); err == nil {
				t.Logf("nginx access log (tail):\n%s", tail(string(log), 6000))
			}
		}
	})
	return ng
}
