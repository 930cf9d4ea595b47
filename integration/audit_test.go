package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAuditLog: a host session with an allowed call, a call denied by a
// rule, an approved call, a failed call, a resource read and a prompt get
// leaves one audit line each, in order, with who, what, the decision, the
// approval and the outcome, and the arguments only as their digest. A
// small max_bytes rotates the file and every line stays whole.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	fx, _ := recordedFixture(t, "fx", []string{"-no-weird"})
	top := fmt.Sprintf(`audit: {path: %q, max_bytes: 2048, max_files: 10}
default_agent: sup
bundles:
  all: {servers: [fx]}
agents:
  sup:
    mcp_bundles: [all]
    autonomy: supervised
    auto_approve: [fx__echo, fx__rpc_error, fx__sleep]
    excluded_tools: [fx__env]
`, path)
	cfg := writeConfig(t, top, fx)
	ap := &polApprover{answers: []*mcp.ElicitResult{{Action: "accept", Content: map[string]any{"decision": "approve"}}}}
	cs, _ := sdkStdioProxy(t, cfg, &mcp.ClientOptions{ElicitationHandler: ap.handle}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	ctx := context.Background()
	secret := "s3cret-argument-value"
	sfOK(t, cs, "fx__echo", map[string]any{"text": secret})
	sfToolError(t, cs, "fx__env", map[string]any{})
	sfOK(t, cs, "fx__record", map[string]any{"note": "approved"})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__rpc_error", Arguments: map[string]any{}}); err == nil {
		t.Error("fx__rpc_error did not fail")
	}
	for i := range 20 { // enough lines to rotate at 2 KiB
		sfOK(t, cs, "fx__echo", map[string]any{"text": fmt.Sprint(i)})
	}
	if err := cs.Close(); err != nil { // the proxy writes its queue as it stops
		t.Fatal(err)
	}
	var files []string // oldest first: <path>.9 … <path>.1, then <path>
	for i := 9; i >= 1; i-- {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", path, i)); err == nil {
			files = append(files, fmt.Sprintf("%s.%d", path, i))
		}
	}
	files = append(files, path)
	var lines []map[string]any
	for _, f := range files {
		lines = append(lines, auditLines(t, f)...)
	}
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Errorf("no rotated file after %d lines with max_bytes 2048: %v", len(lines), err)
	}
	if len(lines) < 4 {
		t.Fatalf("%d audit lines", len(lines))
	}
	want := []map[string]any{
		{"method": "tools/call", "target": "fx__echo", "server": "fx", "decision": "allow", "outcome": "ok", "agent": "sup", "auth": "none"},
		{"method": "tools/call", "target": "fx__env", "decision": "deny", "rule": "excluded_tools"},
		{"method": "tools/call", "target": "fx__record", "decision": "allow", "approval": "approve", "outcome": "ok"},
		{"method": "tools/call", "target": "fx__rpc_error", "decision": "allow", "outcome": "error"},
	}
	for i, w := range want {
		for k, v := range w {
			if fmt.Sprint(lines[i][k]) != fmt.Sprint(v) {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, lines[i][k], v, lines[i])
			}
		}
	}
	if d, _ := lines[0]["arguments_sha256"].(string); len(d) != 64 {
		t.Errorf("line 0 has no argument digest: %v", lines[0])
	}
	if n := len(lines); n != 24 {
		t.Errorf("%d audit lines, want 24 (one per call)", n)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), secret) {
			t.Errorf("%s holds the argument value", f)
		}
		if fi, err := os.Stat(f); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
}
