package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLICall: `mcp-proxy call NAME JSON` prints the tool's result on stdout
// and exits 0; a tool error result exits 1 (the result still printed), an
// unknown tool exits 1, and arguments that are not JSON are a usage error (2).
func TestCLICall(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "", fixtureServer("fx", []string{"-no-weird"}))

	stdout, stderr, code := runCLI(t, "call", "--config", cfg, "fx__echo", `{"text":"hi"}`)
	if code != 0 {
		t.Fatalf("call fx__echo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, tail(stderr, 3000))
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent map[string]string `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("call output is not the result JSON (%v):\n%s", err, stdout)
	}
	if len(res.Content) != 1 || res.Content[0].Type != "text" || res.Content[0].Text != "hi" || res.StructuredContent["echo"] != "hi" {
		t.Errorf("call fx__echo printed %s", stdout)
	}

	stdout, _, code = runCLI(t, "call", "--config", cfg, "fx__tool_error")
	if code != 1 || !strings.Contains(stdout, "fixture tool_error: this tool always fails") || !strings.Contains(stdout, `"isError": true`) {
		t.Errorf("call fx__tool_error: exit %d, stdout:\n%s\nwant exit 1 and the error result printed", code, stdout)
	}

	stdout, stderr, code = runCLI(t, "call", "--config", cfg, "fx__nosuch", `{}`)
	if code != 1 || !strings.Contains(stderr, "unknown tool: fx__nosuch") || strings.TrimSpace(stdout) != "" {
		t.Errorf("call fx__nosuch: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and unknown tool on stderr", code, stdout, tail(stderr, 2000))
	}

	_, stderr, code = runCLI(t, "call", "--config", cfg, "fx__echo", `{not json`)
	if code != 2 {
		t.Errorf("call with bad JSON arguments: exit %d, want 2\n%s", code, tail(stderr, 2000))
	}
}

// The secrets of the validate test: none may appear in any output.
const (
	secretHeader = "sekrit-header-value-7f3a"
	secretQuery  = "sekrit-query-value-91bc"
	secretEnv    = "sekrit-env-value-55d0"
	secretVar    = "sekrit-from-environment-c4e2"
)

// TestCLIValidate: `validate` on a bad config exits 2, names the problems and
// prints no secret (header, env and ${VAR} values, URL query); on a good
// config it exits 0.
func TestCLIValidate(t *testing.T) {
	t.Parallel()
	env := []string{"MCP_IT_SECRET=" + secretVar}
	bad := writeConfig(t, "",
		httpServer("remote", "https://mcp.example.invalid/mcp?api_key="+secretQuery,
			"headers: {Authorization: "+q("Bearer "+secretHeader)+", X-Key: \"${MCP_IT_SECRET}\"}",
			"timeout: 900s"),
		stdioServer("both", "/bin/true", nil,
			"url: \"https://other.example.invalid/mcp\"",
			"env: {API_TOKEN: "+q(secretEnv)+"}"),
	)
	stdout, stderr, code := runCLIEnv(t, env, "validate", "--config", bad)
	out := stdout + stderr
	if code != 2 {
		t.Errorf("validate on a bad config exited %d, want 2\n%s", code, out)
	}
	for _, want := range []string{"servers.remote.timeout", "servers.both"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output does not name %s:\n%s", want, out)
		}
	}
	for _, secret := range []string{secretHeader, secretQuery, secretEnv, secretVar} {
		if strings.Contains(out, secret) {
			t.Errorf("validate printed the secret %q:\n%s", secret, out)
		}
	}

	good := writeConfig(t, "",
		httpServer("remote", "https://mcp.example.invalid/mcp",
			"headers: {Authorization: "+q("Bearer "+secretHeader)+", X-Key: \"${MCP_IT_SECRET}\"}"),
		fixtureServer("fx", nil, "env: {API_TOKEN: "+q(secretEnv)+"}"),
	)
	stdout, stderr, code = runCLIEnv(t, env, "validate", "--config", good)
	out = stdout + stderr
	if code != 0 || !strings.Contains(stdout, "config OK") {
		t.Errorf("validate on a good config: exit %d\n%s", code, out)
	}
	for _, secret := range []string{secretHeader, secretEnv, secretVar} {
		if strings.Contains(out, secret) {
			t.Errorf("validate printed the secret %q:\n%s", secret, out)
		}
	}

	// A config that cannot be read is a config error too.
	_, stderr, code = runCLI(t, "validate", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 2 {
		t.Errorf("validate on a missing file: exit %d, want 2\n%s", code, stderr)
	}
}

// TestCLIVersion: `version` prints the version and exits 0; an unknown verb
// is a usage error.
func TestCLIVersion(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "mcp-proxy ") || strings.TrimSpace(strings.TrimPrefix(stdout, "mcp-proxy ")) == "" {
		t.Errorf("version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, _, code := runCLI(t, "frobnicate"); code != 2 {
		t.Errorf("an unknown verb exited %d, want 2", code)
	}
}
