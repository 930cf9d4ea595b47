package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAuditOAuthSubject: behind listen.auth, the audit line of a request
// names as its client the access token's subject (the user the OpenID
// provider logged in), with auth oauth, for a session (2025-11-25) and for
// the stateless protocol, for an allowed call and a denied one; a static
// token beside it is auth token with its position and the agent as client.
// No token reaches the audit file.
func TestAuditOAuthSubject(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	lp := loStartWith(t, fmt.Sprintf("audit: {path: %q}\n", path))

	alice, _ := lp.mustConnect(t, lp.mcp, "alice", "2025-11-25")
	if got := contentText(callTool(t, alice, "dev__echo", map[string]any{"text": "from alice"})); got != "from alice" {
		t.Fatalf("dev__echo = %q", got)
	}
	dave, _ := lp.mustConnect(t, lp.mcp, "dave", "") // the stateless protocol
	if got := contentText(callTool(t, dave, "dev__echo", map[string]any{"text": "from dave"})); got != "from dave" {
		t.Fatalf("dev__echo = %q", got)
	}
	// crm is not granted to eng: an unknown tool to dave, and a denial in
	// his name.
	if _, err := dave.CallTool(testCtx(t, callTimeout), &mcp.CallToolParams{Name: "crm__echo", Arguments: map[string]any{"text": "no"}}); err == nil {
		t.Fatal("crm__echo answered the eng agent")
	}
	ops := polMustConnect(t, lp.base+"/agents/ops/mcp", loBearer(loOpsToken2), "2025-11-25")
	if got := contentText(callTool(t, ops, "dev__echo", map[string]any{"text": "from ops"})); got != "from ops" {
		t.Fatalf("dev__echo = %q", got)
	}

	want := []map[string]any{
		{"agent": "eng", "client": "alice", "auth": "oauth", "target": "dev__echo", "decision": "allow", "outcome": "ok"},
		{"agent": "eng", "client": "dave", "auth": "oauth", "target": "dev__echo", "decision": "allow", "outcome": "ok"},
		{"agent": "eng", "client": "dave", "auth": "oauth", "target": "crm__echo", "decision": "deny", "rule": "not_granted"},
		{"agent": "ops", "client": "ops", "auth": "token", "token_position": "2", "target": "dev__echo", "decision": "allow"},
	}
	var lines []map[string]any
	deadline := time.Now().Add(callTimeout)
	for {
		if _, err := os.Stat(path); err == nil {
			lines = auditLines(t, path)
		}
		if len(lines) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(lines) != len(want) {
		t.Fatalf("%d audit lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		for k, v := range w {
			if fmt.Sprint(lines[i][k]) != fmt.Sprint(v) {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, lines[i][k], v, lines[i])
			}
		}
	}
	if lines[0]["session"] == nil || lines[0]["session"] == "" {
		t.Errorf("alice's line has no session: %v", lines[0])
	}
	data, _ := os.ReadFile(path)
	lp.mu.Lock()
	defer lp.mu.Unlock()
	for _, tok := range lp.tokens {
		if strings.Contains(string(data), tok) {
			t.Errorf("the audit file holds a client's token (%.12s…)", tok)
		}
	}
}
