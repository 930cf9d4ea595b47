//go:build redis

package scaleout

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

// Bounds of waiting for the proxy to notice the store (both well above
// its 5 s probe of an idle store and its 750 ms operation timeout).
const (
	readyPolls = 300
	readyPoll  = 100 * time.Millisecond
)

// statelessMeta is the _meta of a 2026-07-28 tools/call from a client
// that can answer elicitations.
const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

// readyStatus is the status and body of a replica's /readyz.
func readyStatus(t *testing.T, r *sharedReplica) (int, string) {
	t.Helper()
	res, err := http.Get("http://" + r.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, strings.TrimSpace(string(b))
}

// waitReadyStatus polls /readyz until it answers want, failing t after
// readyPolls tries.
func waitReadyStatus(t *testing.T, r *sharedReplica, want int) string {
	t.Helper()
	var status int
	var body string
	for range readyPolls {
		if status, body = readyStatus(t, r); status == want {
			return body
		}
		time.Sleep(readyPoll)
	}
	t.Fatalf("/readyz stayed %d (%s), want %d", status, body, want)
	return ""
}

// TestRedisOutage: redis-server (AOF, appendfsync always) killed with
// SIGKILL mid-session and started again on the same port and directory.
// Meanwhile a request that needs the store gets a JSON-RPC error naming it
// and /readyz is not ready; afterwards the same proxy serves again with no
// restart, and the session, its "always" approval, a stateless client's
// pending approval state and an OAuth login made before the outage are all
// still there: the upstream behind OAuth takes the token of before, and the
// authorization server sees no second login.
func TestRedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	proxyBin, fixtureBin := buildBinaries(t)
	o := newOAuthServer(t, 1)
	r := startSharedReplica(t, proxyBin, fixtureBin, "a", srv, o)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	askURL := "http://" + r.addr + "/agents/ask/mcp"
	devURL := "http://" + r.addr + "/mcp"

	// One login through the CLI, used by a call of a stateless client. The
	// login's token expires within the refresh margin: that call refreshes
	// it, and the upstream sees the refreshed one.
	if printed := cliLogin(t, proxyBin, t.TempDir(), oauthReplicaConfig(srv, o, "")); !strings.Contains(printed, `Server "secure" is authorized`) {
		t.Errorf("auth login printed:\n%s", printed)
	}
	waitListsTool(ctx, t, r.replica, "secure__whoami")
	whoami := `{"name":"secure__whoami","arguments":{},` + statelessMeta + `}`
	if got := statelessPost(t, devURL, "secure__whoami", whoami); !strings.Contains(got, `"text":"refresh"`) || strings.Contains(got, `"isError":true`) {
		t.Fatalf("secure__whoami before the outage = %s; want the upstream to see the refreshed token", got)
	}
	grants, refused := o.Counts()
	if grants["authorization_code"] != 1 || grants["refresh_token"] != 1 || len(refused) != 0 {
		t.Fatalf("before the outage the authorization server issued %v and refused %v; want one login and one refresh", grants, refused)
	}

	// A go-sdk session of the supervised agent, which answers "always".
	var asked atomic.Int32
	opts := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "always"}}, nil
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "outage-test", Version: "1.0.0"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: askURL, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(text string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			t.Fatalf("call %q: %v %+v", text, err, res)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != text {
			t.Fatalf("call %q answered %q", text, got)
		}
	}
	call("before-1")
	call("before-2")
	if n := asked.Load(); n != 1 {
		t.Fatalf("asked %d times before the outage, want once (then always)", n)
	}

	// A stateless client's approval question, answered after the outage.
	first := statelessPost(t, askURL, "fx__echo", `{"name":"fx__echo","arguments":{"text":"approved-later"},`+statelessMeta+`}`)
	m := regexp.MustCompile(`"requestState":"(px-approval-[0-9a-f]+)"`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first stateless reply = %s; want an approval question", first)
	}
	answer := `{"name":"fx__echo","arguments":{"text":"approved-later"},"requestState":"` + m[1] + `",` +
		`"inputResponses":{"mcp-proxy/approval":{"action":"accept","content":{"decision":"approve"}}},` + statelessMeta + `}`

	srv.Kill()
	raw := newMCPClient(askURL)
	storeDown := "shared-state store (Redis) unavailable at " + srv.Addr
	start := time.Now()
	var rep *reply
	for {
		// The replica's copy of the session may serve it until the
		// replica notices the outage: at once when the connection drops,
		// as here, and within a second at most.
		asked := time.Since(start)
		var err error
		rep, err = raw.post(ctx, cs.ID(), "tools/call", map[string]any{"name": "fx__echo", "arguments": map[string]any{"text": "during"}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.status != http.StatusOK || asked > time.Second {
			break
		}
	}
	took := time.Since(start)
	var rpc rpcResponse
	if rep.status != http.StatusServiceUnavailable || json.Unmarshal([]byte(rep.body), &rpc) != nil || rpc.Error == nil ||
		!strings.HasPrefix(rpc.Error.Message, storeDown) {
		t.Errorf("a call on the session with Redis down: status %d, body %s; want 503 and a JSON-RPC error starting %q", rep.status, rep.body, storeDown)
	}
	t.Logf("a call with Redis down failed after %s", took)
	if got := statelessPost(t, askURL, "fx__echo", `{"name":"fx__echo","arguments":{"text":"during"},`+statelessMeta+`}`); !strings.Contains(got, storeDown) {
		t.Errorf("a stateless call that needs an approval state with Redis down = %s; want an error naming the store", got)
	}
	if body := waitReadyStatus(t, r, http.StatusServiceUnavailable); !strings.Contains(body, "store") {
		t.Errorf("/readyz with Redis down says %q; want it to name the store", body)
	}
	// The OAuth token is read from the store, not kept from before: a call
	// to secure fails naming the store once the token's last read is
	// older than the second the proxy keeps it (until then it may pass).
	tokenDown := `server \"secure\": reading its OAuth token: token store: ` + storeDown
	for i := 0; ; i++ {
		got := statelessPost(t, devURL, "secure__whoami", whoami)
		if strings.Contains(got, tokenDown) {
			break
		}
		if !strings.Contains(got, `"text":"refresh"`) || i == readyPolls {
			t.Fatalf("secure__whoami with Redis down = %s; want an error containing %s", got, tokenDown)
		}
		time.Sleep(readyPoll)
	}

	srv.Start() // same port, same directory: the AOF is replayed
	waitReadyStatus(t, r, http.StatusOK)
	// The token first, so that its loss is reported also when the session
	// was lost with it (the session's checks below stop the test).
	// The authorization server issued one token by refresh, before the
	// outage: an answer "refresh" with no grant since is that token.
	if got := statelessPost(t, devURL, "secure__whoami", whoami); !strings.Contains(got, `"text":"refresh"`) || strings.Contains(got, `"isError":true`) {
		t.Errorf("secure__whoami after the outage = %s; want the upstream to see the token refreshed before it", got)
	}
	if grants, refused := o.Counts(); grants["authorization_code"] != 1 || grants["refresh_token"] != 1 || len(refused) != 0 {
		t.Errorf("in all the authorization server issued %v and refused %v; want the login and the refresh of before, nothing since", grants, refused)
	}
	if rep, err := raw.echo(ctx, cs.ID(), "after-raw"); err != nil {
		t.Fatalf("the session after the outage: %v", err)
	} else if rep.status != http.StatusOK {
		t.Fatalf("the session after the outage: status %d, body %s", rep.status, rep.body)
	}
	call("after-1")
	if n := asked.Load(); n != 1 {
		t.Errorf("asked %d times in all; the \"always\" given before the outage was lost", n)
	}
	if got := statelessPost(t, askURL, "fx__echo", answer); !strings.Contains(got, `"text":"approved-later"`) {
		t.Errorf("the approval state issued before the outage, answered after it = %s", got)
	}
	if n := len(recorded(t, r.replica)["approved-later"]); n != 1 {
		t.Errorf("the approved call ran %d times, want once", n)
	}
}
