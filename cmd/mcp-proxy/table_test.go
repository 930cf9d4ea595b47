package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// TestToolsTableExact: the tools table as a user sees it. Server lines
// line up among themselves and tool lines among themselves, whatever
// their lengths; widths count terminal cells (a CJK character takes two),
// after upstream text is escaped: ESC, C1 and bidi controls, tabs and
// line breaks in a description or an error are shown as escapes.
func TestToolsTableExact(t *testing.T) {
	rep := toolsReport{Servers: []serverReport{
		{Name: "fs", State: "failed", Tools: []toolReport{}, Error: "exit status 1:\tnpm error 404\nNot Found \x1b]0;pwned\x07"},
		{Name: "github", State: "connected", Tools: []toolReport{
			{Name: "github__search_repositories", Description: "Search for GitHub repositories.\nSecond line."},
			{Name: "github__wipe", Description: "d\x1b[2Jcleared\u009b31m red \u202Eexe.txt", Findings: []integrity.Finding{
				{Level: integrity.LevelQuarantine, Kind: integrity.KindInvisible, Excerpt: "1 control characters", Where: "description"}}},
			{Name: "github__日本", Description: "検索\tします"},
		}},
		{Name: "long-server-name", State: "connected", Tools: []toolReport{{Name: "a", Description: strings.Repeat("x", 100)}},
			Quarantined: []quarantinedReport{{Name: "long-server-name__b", Reasons: []integrity.Reason{integrity.ReasonChanged}, Review: "mcp-proxy tools diff long-server-name"}},
			PinError:    "corrupt pin file"},
	}}
	var out bytes.Buffer
	if err := printToolsReport(rep, false, &out); err != nil {
		t.Fatal(err)
	}
	want := `fs                failed     0 tools  exit status 1:\tnpm error 404\nNot Found \u001b]0;pwned\u0007
github            connected  3 tools
  github__search_repositories  Search for GitHub repositories.
  github__wipe                 d\u001b[2Jcleared\u009b31m red \u202eexe.txt
    quarantine finding: invisible_characters: 1 control characters (description)
  github__日本                 検索\tします
long-server-name  connected  1 tools
  a                            ` + strings.Repeat("x", 79) + `…
  ! long-server-name__b        quarantined (changed): mcp-proxy tools diff long-server-name
  pins unusable                corrupt pin file
`
	if got := out.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestToolsEscapesUpstreamText: `tools` and `tools diff` print a
// description with terminal escapes and bidi controls escaped; --json
// stays JSON.
func TestToolsEscapesUpstreamText(t *testing.T) {
	s := newRugPull(t, "pinning: quarantine\nscan: warn")
	const evil = "Echo\x1b[2J back\u009b31m \u202Egnp.exe"
	if err := os.WriteFile(s.descFile, []byte(evil), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := func(out string) bool {
		return strings.ContainsFunc(out, func(r rune) bool {
			return r == 0x1b || (r >= 0x80 && r <= 0x9f) || r == 0x202E
		})
	}
	stdout, stderr, err := runCLI(t, "tools", "--config", s.config)
	if err != nil {
		t.Fatalf("tools: %v\n%s", err, stderr)
	}
	if raw(stdout) || !strings.Contains(stdout, `  fx__echo          Echo\u001b[2J back\u009b31m \u202egnp.exe`+"\n") {
		t.Errorf("tools:\n%q", stdout)
	}
	found := false
	for _, tool := range toolsJSON(t, "--config", s.config).Servers[0].Tools {
		if tool.Name == "fx__echo" {
			found = tool.Description == evil
		}
	}
	if !found {
		t.Errorf("--json does not carry the description as the upstream wrote it")
	}

	if err := os.WriteFile(s.descFile, []byte(evil+" \u2066changed\u2069"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runCLI(t, "tools", "--config", s.config); err != nil {
		t.Fatalf("tools: %v\n%s", err, stderr)
	}
	stdout, _, err = runCLI(t, "tools", "diff", "fx", "--config", s.config)
	if err != nil {
		t.Fatal(err)
	}
	if raw(stdout) || strings.ContainsRune(stdout, 0x2066) ||
		!strings.Contains(stdout, `+  "description": "Echo\u001b[2J back\u009b31m \u202egnp.exe \u2066changed\u2069",`) {
		t.Errorf("tools diff:\n%s", stdout)
	}
}

// TestAuthStatusEscapesUpstreamText: the issuer and scopes in the auth
// status table come from the authorization server; they are escaped, and
// the columns line up.
func TestAuthStatusEscapesUpstreamText(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	config := writeFile(t, "mcp-proxy.yaml", fmt.Sprintf(`
state_dir: %q
blobs: {mode: passthrough}
servers:
  secure:
    url: https://mcp.example.com/mcp
    auth: {type: oauth, open: none}
  static:
    url: https://other.example.com/mcp
    auth: {type: bearer, token: abcdefghijklmnop}
`, state))
	store, err := oauthclient.OpenStore(filepath.Join(state, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	err = store.Update("secure", func([]oauthclient.Entry) ([]oauthclient.Entry, error) {
		return []oauthclient.Entry{{ServerURL: "https://mcp.example.com/mcp", Issuer: "https://idp.example.com/\u202Etxt.exe",
			TokenEndpoint: "https://idp.example.com/token", AccessToken: "at-123456789", Scopes: []string{"read\x1b[2J", "write"}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCLI(t, "auth", "status", "--config", config)
	if err != nil {
		t.Fatalf("auth status: %v\n%s", err, stderr)
	}
	want := `SERVER  TYPE    STATE         EXPIRES  ISSUER                                 SCOPES
secure  oauth   authorized    -        https://idp.example.com/\u202etxt.exe  read\u001b[2J write
static  bearer  static_token  -        -                                      -
`
	if stdout != want {
		t.Errorf("auth status:\n%s\nwant:\n%s", stdout, want)
	}
}

// TestPrintErrorEscapes: the last words of the program, which may quote
// an upstream, reach the terminal escaped.
func TestPrintErrorEscapes(t *testing.T) {
	var out bytes.Buffer
	printError(&out, fmt.Errorf(`upstream "fx": tools/call: %s`, "boom\x1b]0;owned\x07 \u202Eok"))
	if want := `mcp-proxy: upstream "fx": tools/call: boom\u001b]0;owned\u0007 \u202eok` + "\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}
