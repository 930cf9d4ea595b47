package config

import (
	"errors"
	"strings"
	"testing"
)

// Secret values used below. Each is long enough to be scrubbed from text.
const (
	secHeader = "hdr-9f8e7d6c5b4a"
	secEnv    = "env-0a1b2c3d4e5f"
	secToken  = "tok-1234567890ab"
	secPass   = "pw-abcdef123456"
)

func secretEnv() func(string) (string, bool) {
	return testEnv("GH", secHeader, "API", secEnv, "AGENT_TOKEN", secToken, "PASS", secPass)
}

const secretsDoc = `servers:
  github:
    url: https://bot:${PASS}@api.example.com/mcp?key=abc&page=2
    headers:
      Authorization: Bearer ${GH}
  local:
    command: npx
    args: [--api-key, "${API}"]
    env:
      API_KEY: ${API}
      EMPTY: ""
agents:
  assistant:
    tokens: ["${AGENT_TOKEN}"]
`

var allSecrets = []string{secHeader, secEnv, secToken, secPass}

func assertNoSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range allSecrets {
		if strings.Contains(text, s) {
			t.Errorf("%s shows secret %q:\n%s", what, s, text)
		}
	}
}

func TestSecrets(t *testing.T) {
	cfg, err := Parse([]byte(secretsDoc), secretEnv())
	if err != nil || cfg == nil {
		t.Fatalf("Parse = %v, %v", cfg, err)
	}
	got := strings.Join(cfg.Secrets(), "|")
	want := strings.Join([]string{"Bearer " + secHeader, secEnv, secHeader, secToken, secPass}, "|")
	if got != want {
		t.Errorf("Secrets() = %s\nwant        %s", got, want)
	}
}

func TestRedacted(t *testing.T) {
	cfg, _ := Parse([]byte(secretsDoc), secretEnv())
	r := cfg.Redacted()
	gh, local := r.Servers["github"], r.Servers["local"]
	checks := []struct{ name, got, want string }{
		{"header", gh.Headers["Authorization"], "[REDACTED]"},
		{"env", local.Env["API_KEY"], "[REDACTED]"},
		{"empty env stays empty", local.Env["EMPTY"], ""},
		{"args", local.Args[1], "[REDACTED]"},
		{"token", r.Agents["assistant"].Tokens[0], "[REDACTED]"},
		{"url", gh.URL, "https://bot:[REDACTED]@api.example.com/mcp?key=[REDACTED]&page=[REDACTED]"},
		{"original header", cfg.Servers["github"].Headers["Authorization"], "Bearer " + secHeader},
		{"original args", cfg.Servers["local"].Args[1], secEnv},
		{"original token", cfg.Agents["assistant"].Tokens[0], secToken},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if r.Servers["github"] == cfg.Servers["github"] || &r.Servers["local"].Args[0] == &cfg.Servers["local"].Args[0] {
		t.Error("Redacted shares memory with the original")
	}
	if len(r.Secrets()) == 0 || !r.isSet("agents") {
		t.Error("Redacted lost the document information")
	}
}

func TestMarshalRedacted(t *testing.T) {
	cfg, _ := Parse([]byte(secretsDoc), secretEnv())
	out, err := cfg.MarshalRedacted()
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecrets(t, "MarshalRedacted", string(out))
	for _, want := range []string{"Authorization: '[REDACTED]'", "API_KEY: '[REDACTED]'", "timeout: 2m0s", "naming: zeroclaw"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The output is YAML that decodes again (secrets replaced).
	back, err := Parse(out, secretEnv())
	if back == nil {
		t.Fatalf("MarshalRedacted output does not decode: %v", err)
	}
	if back.Servers["local"].Timeout != cfg.Servers["local"].Timeout || back.Servers["github"].Headers["Authorization"] != "[REDACTED]" {
		t.Errorf("decoded output differs: %+v", back.Servers["local"])
	}
}

// TestSecretsNeverInErrors puts secrets where validation quotes values
// and where values fail to decode; no error text may show one.
func TestSecretsNeverInErrors(t *testing.T) {
	docs := map[string]string{
		"transport from secret":   "servers:\n  a:\n    url: https://x.example.com\n    headers: {X: \"${GH}\"}\n    transport: ${GH}\n",
		"prefix from secret":      "servers:\n  a:\n    command: x\n    env: {K: \"${API}\"}\n    prefix: \"x.${API}\"\n",
		"bad header value":        "servers:\n  a:\n    url: https://x.example.com\n    headers: {X: \"${GH}\\n\"}\n",
		"bad url with password":   "servers:\n  a:\n    url: ftp://u:${PASS}@x.example.com\n",
		"url parse error":         "servers:\n  a:\n    url: \"https://u:${PASS}@x.example.com/%zz\"\n",
		"token with space":        "agents:\n  a:\n    tokens: [\"${AGENT_TOKEN} x\"]\n",
		"default agent is token":  "agents:\n  a:\n    tokens: [\"${AGENT_TOKEN}\"]\ndefault_agent: ${AGENT_TOKEN}\n",
		"secret into a number":    "servers:\n  a:\n    command: x\n    env: {K: \"${API}\"}\n    max_response_bytes: ${API}\n",
		"secret into duration":    "servers:\n  a:\n    command: x\n    timeout: ${API}\n",
		"literal secret in kind":  "servers:\n  a:\n    command: x\n    env: {K: " + secEnv + "}\n    enabled: " + secEnv + "\n",
		"unknown key and secret":  "servers:\n  a:\n    command: x\n    headers: {A: \"${GH}\"}\n    bogus: ${GH}\n    listen: " + secHeader + "\n",
		"invalid and redacted":    secretsDoc + "naming: ${API}\n",
		"scrubbed keeps sentinel": "servers:\n  a:\n    command: x\n    env: {K: \"${API}\"}\n    protocol: ${API}\n",
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			cfg, err := Parse([]byte(doc), secretEnv())
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			assertNoSecrets(t, "error", err.Error())
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
			if cfg != nil {
				out, merr := cfg.MarshalRedacted()
				if merr != nil {
					t.Fatal(merr)
				}
				assertNoSecrets(t, "MarshalRedacted", string(out))
			}
		})
	}
}

// TestSecretsOfLaterSections covers the secret fields of docs/security.md and docs/operations.md: an
// upstream's auth token and client secret, metrics tokens, tracing header
// values and the introspection client secret.
func TestSecretsOfLaterSections(t *testing.T) {
	doc := `servers:
  remote:
    url: https://api.example.com/mcp
    auth: {type: oauth, client_id: cli, client_secret: cs-0123456789ab}
  static:
    url: https://other.example.com/mcp
    auth: {type: bearer, token: bt-0123456789ab}
metrics: {listen: 127.0.0.1:9464, tokens: [mt-0123456789ab]}
tracing: {endpoint: http://127.0.0.1:4318, headers: {x-key: th-0123456789ab}}
listen:
  auth:
    type: oauth
    issuer: https://issuer.example.com
    introspection: {url: https://issuer.example.com/introspect, client_id: rs, client_secret: is-0123456789ab}
`
	want := []string{"cs-0123456789ab", "bt-0123456789ab", "mt-0123456789ab", "th-0123456789ab", "is-0123456789ab"}
	cfg, err := Parse([]byte(doc), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cfg.Secrets(), "|")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("Secrets() lacks %s: %s", w, got)
		}
	}
	out, err := cfg.MarshalRedacted()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if strings.Contains(string(out), w) {
			t.Errorf("MarshalRedacted shows %s:\n%s", w, out)
		}
	}
	if !strings.Contains(string(out), "client_id: cli") {
		t.Errorf("MarshalRedacted dropped a non-secret field:\n%s", out)
	}
}

// TestPinnedArgumentsFromTheEnvironmentAreSecrets: a pinned argument's
// value that comes from ${VAR} is a secret (redacted in the printed config,
// scrubbed from error texts); one written in the file is not.
func TestPinnedArgumentsFromTheEnvironmentAreSecrets(t *testing.T) {
	doc := `servers:
  search:
    command: search-mcp
    tools:
      overrides:
        query:
          arguments: {api_key: "${TOKEN}", region: {name: "eu-${TOKEN}"}, lang: english}
          annotations: {title: Search}
`
	cfg, err := Parse([]byte(doc), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Secrets(), "|"); !strings.Contains(got, testSecret) || strings.Contains(got, "english") {
		t.Errorf("Secrets() = %s", got)
	}
	out, err := cfg.MarshalRedacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), testSecret) || !strings.Contains(string(out), "lang: english") || !strings.Contains(string(out), "title: Search") {
		t.Errorf("MarshalRedacted:\n%s", out)
	}
	// The config itself is not changed by the printing.
	if v, _ := JSONValue(cfg.Servers["search"].Tools.Overrides["query"].Arguments["api_key"]); string(v) != `"`+testSecret+`"` {
		t.Errorf("the pinned value itself = %s", v)
	}
}
