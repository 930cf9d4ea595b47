package config

import (
	"reflect"
	"testing"
)

// TestAgentsInOrder: config order is the order of the document, not of
// the names, and survives Redacted; a Config built in code falls back to
// name order.
func TestAgentsInOrder(t *testing.T) {
	doc := `listen:
  auth: {issuer: "https://idp.example.com"}
agents:
  ops: {match: {groups: ops}}
  eng: {match: {groups: eng}}
  admin: {tokens: ["${TOKEN}"]}
`
	cfg, err := Parse([]byte(doc), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.AgentsInOrder(), []string{"ops", "eng", "admin"}; !reflect.DeepEqual(got, want) {
		t.Errorf("AgentsInOrder = %v, want %v", got, want)
	}
	if got := cfg.Redacted().AgentsInOrder(); !reflect.DeepEqual(got, []string{"ops", "eng", "admin"}) {
		t.Errorf("Redacted().AgentsInOrder = %v", got)
	}
	built := &Config{Agents: map[string]*Agent{"b": {}, "a": {}, "c": {}}}
	if got, want := built.AgentsInOrder(), []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("built in code: AgentsInOrder = %v, want %v", got, want)
	}
}

// TestPublicURLFor: listen.public_url wins (without its trailing slash);
// else the bound address, else listen.addr.
func TestPublicURLFor(t *testing.T) {
	l := Listen{Addr: "127.0.0.1:8080"}
	if got := l.PublicURLFor(""); got != "http://127.0.0.1:8080" {
		t.Errorf("default = %q", got)
	}
	if got := l.PublicURLFor("127.0.0.1:43210"); got != "http://127.0.0.1:43210" {
		t.Errorf("bound = %q", got)
	}
	l.PublicURL = "https://mcp.example.com/"
	if got := l.PublicURLFor("127.0.0.1:43210"); got != "https://mcp.example.com" {
		t.Errorf("public_url = %q", got)
	}
}

// TestListenAuthValid: a loopback issuer may be http, type defaults to
// oauth, and an agent with neither tokens nor match is a warning (it is
// unreachable over HTTP), not an error, on a loopback listener.
func TestListenAuthValid(t *testing.T) {
	doc := `listen:
  transport: http
  auth:
    issuer: "http://127.0.0.1:9000"
    jwks_url: "http://localhost:9000/keys"
    required_scopes: [mcp]
    introspection: {url: "http://[::1]:9000/introspect", client_id: rs, client_secret: "${TOKEN}"}
agents:
  eng: {match: {groups: eng}}
  local: {autonomy: full}
`
	cfg, err := Parse([]byte(doc), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen.Auth.Type != "oauth" {
		t.Errorf("type = %q, want the default oauth", cfg.Listen.Auth.Type)
	}
	want := "agents.local: neither tokens nor match, so it cannot be reached over HTTP while listen.auth is set"
	found := false
	for _, w := range cfg.Warnings() {
		found = found || w == want
	}
	if !found {
		t.Errorf("Warnings() = %q, want one %q", cfg.Warnings(), want)
	}
	// The same agents on a public address with a public_url: match is a
	// credential, so only the agent without any is refused.
	doc = `listen:
  transport: http
  addr: "0.0.0.0:8080"
  public_url: "https://mcp.example.com"
  auth: {issuer: "https://idp.example.com"}
agents:
  eng: {match: {groups: eng}}
  ops: {tokens: ["${TOKEN}"]}
`
	if _, err := Parse([]byte(doc), testEnv()); err != nil {
		t.Errorf("public listener with match and tokens: %v", err)
	}
}
