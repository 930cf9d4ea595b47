package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// testSecret is set as $TOKEN for the table tests; no error may show it.
const testSecret = "s3cr3t-t0ken-value"

// testEnv is the environment of the table tests.
func testEnv(extra ...string) func(string) (string, bool) {
	env := map[string]string{"HOME": "/home/test", "TOKEN": testSecret}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func lines(l ...string) string { return strings.Join(l, "\n") }

// invalidConfigs maps every testdata/invalid-*.yaml file to the exact error
// Parse returns for it.
var invalidConfigs = map[string]string{
	"invalid-agents-public.yaml": lines(
		`agents.open.tokens: required because listen.addr "[::]:8080" is not a loopback address`,
	),
	"invalid-auth.yaml": lines(
		`servers.local.auth: only for http and sse servers (a stdio server gets its credentials through env)`,
		`servers.m2m.auth.alg: must be RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 or EdDSA, got "HS256"`,
		`servers.m2m.auth.client_id: required for type client_credentials`,
		`servers.m2m.auth.private_key_file: must be an absolute path, got "keys/key.pem"`,
		`servers.odd.auth.type: must be bearer, oauth or client_credentials, got "magic"`,
		`servers.static.auth.token: required for type bearer`,
		`servers.static.headers.authorization: conflicts with auth, which sets the Authorization header: drop one`,
		`servers.web.auth.client_metadata_url: must be an https URL with a path (it is the client id)`,
		`servers.web.auth.client_secret: needs client_id`,
		`servers.web.auth.open: unterminated single quote`,
		`servers.web.auth.private_key_file: not used by type oauth`,
		`servers.web.auth.redirect_port: must be a port from 0 (any free port) to 65535, got 70000`,
		`servers.web.auth.scopes[0]: a scope is one non-empty word without quotes or backslashes`,
		`servers.web.auth.token_endpoint_auth: must be none, client_secret_basic or client_secret_post, got "client_secret_jwt"`,
		`servers.web.auth.token_endpoint_auth: applies to a configured client_id only`,
		`state_dir: must be an absolute path, got "relative/state"`,
	),
	"invalid-agents.yaml": lines(
		`agents.assistant: agent name conflicts with "Assistant" (names are compared ignoring case)`,
		`agents.assistant.allowed_tools[0]: empty tool name`,
		`agents.assistant.auto_approve[0]: empty pattern`,
		`agents.assistant.autonomy: must be full, supervised or read_only, got "yolo"`,
		`agents.assistant.excluded_tools[0]: pattern "files__*write*" has more than one "*"`,
		`agents.assistant.tokens[0]: empty token`,
		`agents.assistant.tokens[1]: token contains spaces or control characters`,
		`agents.assistant.tool_filter_groups[0].mode: must be always or dynamic, got "sometimes"`,
		`agents.assistant.tool_filter_groups[0].tools[0]: pattern "a*b*" has more than one "*"`,
		`agents.bad__name: agent name must not contain "__", which separates server and tool names`,
		`default_agent: no agent named "nobody" (agents: Assistant, assistant, bad__name)`,
	),
	"invalid-blobs-tilde.yaml": `blobs.dir: "~" is not expanded: write ${HOME} instead`,
	"invalid-blobs-bounds.yaml": lines(
		`blobs.max_age: must be greater than 0`,
		`blobs.max_bytes: must be greater than 0 (bytes per agent folder)`,
	),
	"invalid-blobs.yaml": lines(
		`blobs.dir: must be an absolute path, got "blobs"`,
		`blobs.mode: must be file or passthrough, got "inline"`,
	),
	"invalid-command-and-url.yaml":   `servers.both: command and url are mutually exclusive: a server is a subprocess or a URL, not both`,
	"invalid-default-agent.yaml":     `default_agent: no agents are defined, so the only agent is "default", got "assistant"`,
	"invalid-duplicate-key.yaml":     `servers.files.command: duplicate key (first at line 3)`,
	"invalid-duration-negative.yaml": `servers.files.timeout: invalid duration "-5s": must not be negative`,
	"invalid-env-bad-name.yaml":      `servers.files.cwd: invalid variable name in ${...}: use letters, digits and _, not starting with a digit`,
	"invalid-env-empty-name.yaml":    `servers.files.args[0]: empty variable name in ${}`,
	"invalid-env-names.yaml": lines(
		`servers.local.args[1]: contains a NUL byte`,
		`servers.local.command: contains a NUL byte`,
		`servers.local.env: invalid variable name "A=B"`,
		`servers.local.env.GOOD: value contains a NUL byte`,
	),
	"invalid-integrity.yaml": lines(
		`pinning: must be quarantine, warn or off, got "strict"`,
		`scan: must be warn, strip or quarantine, got "block"`,
		`servers.files.new_tools: must be allow or quarantine, got "deny"`,
		`servers.web.scan: must be warn, strip or quarantine, got "remove"`,
		`state_dir: must be an absolute path, got "state"`,
	),
	"invalid-integrity-tilde.yaml": `state_dir: "~" is not expanded: write ${HOME} instead`,
	"invalid-kinds-2.yaml": lines(
		`listen: expected a mapping, got a boolean`,
		`metrics: expected a mapping, got a number`,
		`startup_wait: invalid duration "this-is-a-very-long-duration-value-that-...": use whole seconds (120) or a Go duration (120s, 2m, 1h30m)`,
		`servers.a.command: expected a string, got a list`,
		`servers.a.args: expected a list, got a mapping`,
		`servers.a.enabled: expected true or false, got a list`,
		`servers.b: needs command (a stdio server) or url (an http or sse server)`,
	),
	"invalid-env-unterminated.yaml": `servers.files.command: unterminated ${ (write $${ for a literal ${)`,
	// Every kind at once (docs/configuration.md: one run reports every problem): the
	// document's own problems first, then the rules on what is left; no
	// rule judges a value that was refused (remote has no "needs command
	// or url", alice's token list no "required").
	"invalid-every-kind.yaml": lines(
		`servers.github.headers.Authorization: environment variable GITHUB_TOKEN is not set`,
		`servers.remote.url: environment variable REMOTE_URL is not set`,
		`agents.alice.tokens[0]: environment variable ALICE_TOKEN is not set`,
		`startup_wait: invalid duration "soon": use whole seconds (120) or a Go duration (120s, 2m, 1h30m)`,
		`listen.pth: unknown key`,
		`servers.files.command: duplicate key (first at line 22)`,
		`servers.files.commnd: unknown key`,
		`servers.files.args: expected a list, got a string`,
		`agents.bob.autonomy: must be full, supervised or read_only, got "yolo"`,
		`agents.bob.tokens: required because listen.addr "0.0.0.0:8080" is not a loopback address`,
		`naming: must be zeroclaw or hermes, got "snake"`,
		`servers."bad name": server name may only contain letters, digits, "_" and "-"`,
		`servers.github.timeout: must be at most 600s`,
		`servers.github.url: scheme must be http or https`,
		`servers.remote.connect_timeout: must be greater than 0`,
	),
	"invalid-headers.yaml": lines(
		`servers.remote.headers: invalid header name "Bad Header"`,
		`servers.remote.headers.X-Token: invalid header value (it contains a control character)`,
	),
	"invalid-kinds.yaml": lines(
		`servers.files.args: expected a list, got a string`,
		`servers.files.enabled: expected true or false, got "maybe"`,
		`servers.files.timeout: invalid duration "soon": use whole seconds (120) or a Go duration (120s, 2m, 1h30m)`,
		`servers.files.max_response_bytes: expected a whole number, got "lots"`,
		`servers.files.env: expected a mapping, got a list`,
	),
	"invalid-limits.yaml": lines(
		`agents.bot.limits[0].tools: must name at least one tool pattern ("*" for every tool)`,
		`agents.bot.limits[1].burst: must be greater than 0 (leave it out for per_minute)`,
		`agents.bot.limits[1].per_minute: must be greater than 0`,
		`agents.bot.limits[1].tools[0]: pattern "a*b*" has more than one "*"`,
		`agents.bot.limits[1].tools[1]: empty pattern`,
		`agents.bot.limits[2].burst: must be greater than 0 (leave it out for per_minute)`,
		`servers.api.limits.max_concurrent: must be greater than 0 (leave it out for no limit)`,
		`servers.api.limits.per_minute: must be greater than 0 (leave it out for no limit)`,
	),
	"invalid-overrides.yaml": lines(
		`servers.brave.tools.overrides.brave_images: sets nothing: give name, title, description, annotations or arguments`,
		`servers.brave.tools.overrides.brave_local_search.name: must be 1 to 64 of letters, digits, "_" and "-" (the names model APIs accept), got "local search"`,
		`servers.brave.tools.overrides.brave_news.name: "tool_search" is the name of one of the proxy's own tools`,
		`servers.brave.tools.overrides.brave_video.arguments: empty parameter name`,
		`servers.brave.tools.overrides.brave_video.arguments.approved: the proxy removes "approved" from every call, so it cannot be pinned`,
		`servers.brave.tools.overrides.brave_video.arguments.count: JSON has no NaN or infinite numbers`,
		`servers.brave.tools.overrides.brave_video.name: must not be empty (leave it out to keep the default name)`,
		`servers.brave.tools.overrides.brave_web_search.annotations.readOnlyHint: must be true or false (null removes the upstream's)`,
		`servers.brave.tools.overrides.brave_web_search.annotations.title: must be a string (null removes the upstream's)`,
		`servers.brave.tools.overrides.brave_web_search.annotations.when: a YAML timestamp is not a JSON value: quote it to pass it as a string`,
		`servers.brave.tools.overrides.brave_web_search.description: must not be empty (leave it out to keep the upstream's)`,
		`servers.web.tools.overrides."": empty tool name`,
		`servers.web.tools.overrides.search.annotations.nested: mapping keys must be strings (quote them)`,
		`servers.web.tools.overrides.search.annotations.openWorldHint: must be true or false (null removes the upstream's)`,
		`servers.web.tools.overrides.search.name: "web_search" is also the name given by servers.brave.tools.overrides.brave_web_search: two tools cannot share one name`,
		`servers.web.tools.overrides.search.title: must not be empty (leave it out to keep the upstream's)`,
	),
	"invalid-listen-path.yaml": lines(
		`listen.addr: port must be a number from 0 to 65535, got "99999"`,
		`listen.path: must not be /healthz, which the proxy serves itself`,
	),
	"invalid-listen-public.yaml": `listen.addr: "0.0.0.0:8080" is not a loopback address, so every agent needs tokens, and the implicit agent "default" has none: define agents with tokens, or listen on 127.0.0.1`,
	"invalid-listen-auth.yaml": lines(
		`agents.eng.match: empty claim name`,
		`agents.eng.match.groups: needs at least one value`,
		`listen.auth.introspection.client_id: required: the introspection endpoint authenticates the proxy (RFC 7662)`,
		`listen.auth.introspection.url: required: the RFC 7662 endpoint that checks opaque tokens`,
		`listen.auth.issuer: must be https:// (http:// only for a loopback host)`,
		`listen.auth.jwks_url: must be https:// (http:// only for a loopback host)`,
		`listen.auth.required_scopes[0]: empty scope`,
		`listen.auth.required_scopes[1]: a scope must not contain spaces, control characters, '"' or '\' (RFC 6749)`,
		`listen.auth.type: must be oauth, got "saml"`,
		`listen.public_url: must be an absolute http:// or https:// URL`,
	),
	"invalid-listen-auth-no-agents.yaml": lines(
		`listen.auth: no agent can be reached: the implicit agent "default" has neither tokens nor match; define agents with match`,
		`listen.public_url: must not have user info, a query or a fragment`,
	),
	"invalid-listen-auth-public.yaml": lines(
		`agents.open: needs tokens or match because listen.addr "0.0.0.0:8080" is not a loopback address`,
		`listen.public_url: required when listen.auth is set and listen.addr "0.0.0.0:8080" listens on every interface: set the URL clients use, which names the protected resources`,
	),
	"invalid-match-without-auth.yaml": `agents.eng.match: needs listen.auth: without an OAuth issuer there are no token claims to match`,
	"invalid-listen.yaml": lines(
		`listen.addr: must be host:port, got "localhost"`,
		`listen.path: must start with "/", got "mcp"`,
		`listen.transport: must be stdio or http, got "sse"`,
	),
	"invalid-log.yaml": lines(
		`log.format: must be json or console, got "text"`,
		`log.level: must be trace, debug, info, warn, error, fatal, panic or disabled, got "verbose"`,
	),
	"invalid-many.yaml": lines(
		`log.level: must be trace, debug, info, warn, error, fatal, panic or disabled, got "loud"`,
		`naming: must be zeroclaw or hermes, got "snake"`,
		`servers.files!: server name may only contain letters, digits, "_" and "-"`,
		`servers.files!: command and url are mutually exclusive: a server is a subprocess or a URL, not both`,
		`servers.github.protocol: must be 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05 or auto, got "latest"`,
		`servers.github.timeout: must be at most 600s`,
		`servers.github.tls_ca_cert_path: must be an absolute path, got "ca.pem"`,
		`servers.github.url: must be https:// when tls_ca_cert_path is set`,
	),
	"invalid-max-response-bytes.yaml": `servers.big.max_response_bytes: must not be negative (0 means the default, 16078168)`,
	"invalid-merge.yaml":              `servers.files.<<: a merge needs a mapping or a list of mappings`,
	"invalid-metrics.yaml": lines(
		`metrics.listen: must be host:port, got "9464"`,
		`metrics.path: must not be /readyz, which the proxy serves itself`,
	),
	"invalid-metrics-root.yaml":   `metrics.path: must not be "/": the status page serves / on the metrics listener`,
	"invalid-metrics-status.yaml": `metrics.path: must not be "/auth/": the status page serves /auth/login on the metrics listener`,
	"invalid-metrics-tokens.yaml": lines(
		`metrics.tokens[0]: empty token`,
		`metrics.tokens[1]: token contains spaces or control characters`,
	),
	"invalid-missing-env.yaml":       `servers.github.headers.Authorization: environment variable GITHUB_TOKEN is not set`,
	"invalid-multi-doc.yaml":         `line 2: a second YAML document starts here; a config is one document`,
	"invalid-naming.yaml":            `naming: must be zeroclaw or hermes, got "openai"`,
	"invalid-no-command-no-url.yaml": `servers.empty: needs command (a stdio server) or url (an http or sse server)`,
	"invalid-prefix.yaml":            `servers.github.prefix: may only contain letters, digits, "_" and "-"`,
	"invalid-protocol.yaml":          `servers.github.protocol: must be 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05 or auto, got "2026-01-01"`,
	"invalid-reconnect-wait.yaml": lines(
		`servers.negative.reconnect_wait: invalid duration "-1s": must not be negative`,
		`servers.slow.reconnect_wait: must be at most 600s, the longest request timeout`,
	),
	"invalid-required-disabled.yaml": `servers.local.required: a disabled server can never be ready: drop required or enable the server`,
	"invalid-resource-prefix.yaml":   `servers.my_files: resource URI prefix "my-files" is also the prefix of server "my-files" (prefixes are lowercased with "_" as "-")`,
	"invalid-sampling.yaml": lines(
		`servers.llm.sampling.max_rpm: must be greater than 0`,
		`servers.llm.sampling.max_tokens_cap: must be greater than 0`,
		`servers.llm.sampling.timeout: must be greater than 0`,
	),
	"invalid-server-name-case.yaml":   `servers.github: server name conflicts with "GitHub" (names are compared ignoring case)`,
	"invalid-server-name-chars.yaml":  `servers."my server": server name may only contain letters, digits, "_" and "-"`,
	"invalid-server-name-dunder.yaml": `servers.file__system: server name must not contain "__", which separates server and tool names`,
	"invalid-server-name-long.yaml":   `servers."a-very-long-server-name-that-is-far-over-the-limit-and-even-long...": server name is longer than 32 characters`,
	"invalid-stdio-fields.yaml": lines(
		`servers.local.headers: only for http and sse servers`,
		`servers.remote.args: only for stdio servers`,
		`servers.remote.env: only for stdio servers`,
		`servers.remote.inherit_env: only for stdio servers`,
	),
	// yaml.v3 says line 1 for both (where the enclosing mapping starts).
	"invalid-syntax.yaml": `invalid YAML: line 4: did not find expected key`,
	"invalid-indent.yaml": `invalid YAML: line 3: did not find expected key`,
	"invalid-timeouts.yaml": lines(
		`servers.slow.connect_timeout: must be greater than 0`,
		`servers.slow.timeout: must be at most 600s`,
		`servers.zero.timeout: must be greater than 0`,
	),
	"invalid-tls.yaml": lines(
		`servers.local.tls_ca_cert_path: only for http and sse servers`,
		`servers.plain.tls_ca_cert_path: must be an absolute path, got "certs/ca.pem"`,
		`servers.plain.url: must be https:// when tls_ca_cert_path is set`,
	),
	"invalid-top-list.yaml": `the top level must be a mapping of keys, got a list`,
	"invalid-transport-mismatch.yaml": lines(
		`servers.events.transport: sse needs url, not command`,
		`servers.local.transport: stdio needs command, not url`,
	),
	"invalid-transport.yaml":            `servers.ws.transport: must be stdio, http or sse, got "websocket"`,
	"invalid-unknown-key.yaml":          `servers.github.commnd: unknown key`,
	"invalid-unknown-top-key.yaml":      `mcp: unknown key`,
	"invalid-untrusted-text-limit.yaml": `untrusted_text_limit: must be greater than 0`,
	"invalid-url.yaml": lines(
		`servers.broken.url: not a valid URL`,
		`servers.ftp.url: scheme must be http or https`,
		`servers.nohost.url: must include a host`,
	),
}

func TestParseInvalid(t *testing.T) {
	checkInvalidFiles(t, "testdata/invalid-*.yaml", invalidConfigs)
	if len(invalidConfigs) < 25 {
		t.Errorf("only %d invalid cases", len(invalidConfigs))
	}
}

// checkInvalidFiles parses every file matching pattern and compares the
// error with want[file name]; every entry of want must have its file.
func checkInvalidFiles(t *testing.T, pattern string, want map[string]string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			want, ok := want[name]
			if !ok {
				t.Fatalf("no expected error for %s: add it to the table", name)
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(data, testEnv())
			if err == nil {
				t.Fatalf("Parse succeeded, want error:\n%s", want)
			}
			if got := err.Error(); got != want {
				t.Errorf("error mismatch\ngot:\n%s\nwant:\n%s", got, want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not match ErrInvalid")
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("error shows the secret: %s", err)
			}
		})
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("the table has %s, but no file matching %s has that name", name, pattern)
		}
	}
}

func TestParseSentinels(t *testing.T) {
	tests := []struct {
		name, doc string
		want      error
	}{
		{"unknown key", "servers:\n  a:\n    commnd: x\n", ErrUnknownKey},
		{"missing variable", "servers:\n  a:\n    command: ${NOPE}\n", ErrMissingEnv},
		{"malformed reference", "servers:\n  a:\n    command: ${\n", ErrBadReference},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), testEnv())
			if !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error %v does not match %v and ErrInvalid", err, tt.want)
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	for _, doc := range []string{"", "\n", "# only a comment\n", "---\n", "~\n"} {
		cfg, err := Parse([]byte(doc), testEnv())
		if err != nil {
			t.Fatalf("Parse(%q): %v", doc, err)
		}
		if len(cfg.Servers) != 0 || !cfg.IsEnabled() || cfg.Listen.Transport != "stdio" {
			t.Errorf("Parse(%q) = %+v, want an empty default config", doc, cfg)
		}
	}
}

func TestParseReturnsConfigWithRuleErrors(t *testing.T) {
	cfg, err := Parse([]byte("naming: nope\nservers:\n  a:\n    command: x\n"), testEnv())
	if err == nil || cfg == nil {
		t.Fatalf("Parse = %v, %v; want a config and an error", cfg, err)
	}
	if cfg.Servers["a"].Name != "a" || cfg.Servers["a"].Timeout.D() != DefaultTimeout {
		t.Errorf("returned config lacks names or defaults: %+v", cfg.Servers["a"])
	}
	cfg, err = Parse([]byte("servers:\n  a:\n    commnd: x\n"), testEnv())
	if err == nil || cfg != nil {
		t.Fatalf("Parse = %v, %v; want no config for an undecodable document", cfg, err)
	}
}

func TestParseLimits(t *testing.T) {
	t.Run("size", func(t *testing.T) {
		data := []byte("# " + strings.Repeat("x", maxConfigBytes) + "\n")
		_, err := Parse(data, testEnv())
		if err == nil || err.Error() != "file is larger than 1048576 bytes" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("alias expansion", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("servers:\n  a0: &a0 {command: x}\n")
		for i := 1; i < 10; i++ {
			prev := "*a" + string(rune('0'+i-1))
			b.WriteString("  a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " {<<: [" +
				strings.Repeat(prev+", ", 8) + prev + "]}\n")
		}
		_, err := Parse([]byte(b.String()), testEnv())
		if err == nil || !strings.Contains(err.Error(), "document too large once its aliases are expanded") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("keys per mapping", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("servers:\n  a:\n    command: x\n    env:\n")
		for i := 0; i <= maxMappingKeys; i++ {
			b.WriteString("      K" + strings.Repeat("x", 0) + strconv.Itoa(i) + ": v\n")
		}
		_, err := Parse([]byte(b.String()), testEnv())
		if err == nil || err.Error() != "servers.a.env: more than 10000 keys in one mapping" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("too many problems", func(t *testing.T) {
		var b strings.Builder
		for i := 0; i < 150; i++ {
			b.WriteString("bad" + strconv.Itoa(i) + ": 1\n")
		}
		_, err := Parse([]byte(b.String()), testEnv())
		if err == nil {
			t.Fatal("no error")
		}
		got := strings.Split(err.Error(), "\n")
		if len(got) != maxProblems+1 || got[maxProblems] != "50 more problems not shown" {
			t.Fatalf("got %d lines, last %q", len(got), got[len(got)-1])
		}
	})
}

func TestParseFull(t *testing.T) {
	data, err := os.ReadFile("testdata/valid-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data, testEnv("GITHUB_TOKEN", "ghp_full"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := cfg.ServerNames(); strings.Join(got, ",") != "events,filesystem,github" {
		t.Fatalf("servers = %v", got)
	}
	fs, gh, ev := cfg.Servers["filesystem"], cfg.Servers["github"], cfg.Servers["events"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"naming", cfg.Naming, "hermes"},
		{"startup_wait", cfg.StartupWait.D().String(), "5s"},
		{"fs name", fs.Name, "filesystem"},
		{"fs transport", fs.Transport, "stdio"},
		{"fs args", strings.Join(fs.Args, " "), "-y @modelcontextprotocol/server-filesystem /srv"},
		{"fs timeout", fs.Timeout.D().String(), "2m0s"},
		{"fs connect_timeout", fs.ConnectTimeout.D().String(), "30s"},
		{"fs keepalive off", fs.Keepalive.D().String(), "0s"},
		{"fs prefix", fs.PrefixValue(), "fs"},
		{"fs protocol", fs.Protocol, "2025-06-18"},
		{"fs required", fs.Required, true},
		{"fs include", strings.Join(fs.Tools.Include, ","), "read_*"},
		{"fs resources", fs.ResourcesEnabled(), false},
		{"fs prompts", fs.PromptsEnabled(), true},
		{"fs env", fs.Env["DEBUG"], "1"},
		{"gh transport", gh.Transport, "http"},
		{"gh header", gh.Headers["Authorization"], "Bearer ghp_full"},
		{"gh bare prefix", gh.PrefixValue(), ""},
		{"gh max_response_bytes", gh.MaxResponseBytes, int64(DefaultMaxResponseBytes)},
		{"gh tls", gh.TLSCACertPath, "/etc/ssl/private-ca.pem"},
		{"ev transport", ev.Transport, "sse"},
		{"ev enabled", ev.IsEnabled(), false},
		{"ev uri prefix", ev.URIPrefix(), "events"},
		{"listen", cfg.Listen, Listen{Transport: "http", Addr: "127.0.0.1:0", Path: "/mcp"}},
		{"metrics", cfg.Metrics, Metrics{Listen: "127.0.0.1:9464", Path: "/metrics"}},
		{"blobs", cfg.Blobs, Blobs{Dir: "/home/test/.local/state/mcp-proxy/blobs", Mode: "passthrough", MaterializeMedia: true,
			MaxBytes: DefaultBlobsMaxBytes, MaxAge: Duration(DefaultBlobsMaxAge)}},
		{"log", cfg.Log, Log{Level: "debug", Format: "console"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte("servers:\n  files:\n    command: npx\n  web:\n    url: https://example.com/mcp\n"), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Servers["files"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"enabled", cfg.IsEnabled(), true},
		{"naming", cfg.Naming, "zeroclaw"},
		{"deferred_loading", cfg.DeferredFor(nil), false},
		{"deferred_call_tool", cfg.CallToolListed(), true},
		{"startup_wait", cfg.StartupWait.D(), DefaultStartupWait},
		{"untrusted_text_limit", cfg.UntrustedTextLimit, 100000},
		{"listen", cfg.Listen, Listen{Transport: "stdio", Addr: "127.0.0.1:8080", Path: "/mcp"}},
		{"metrics", cfg.Metrics, Metrics{Path: "/metrics"}},
		{"blobs", cfg.Blobs, Blobs{Dir: "/home/test/.local/state/mcp-proxy/blobs", Mode: "file",
			MaxBytes: DefaultBlobsMaxBytes, MaxAge: Duration(DefaultBlobsMaxAge)}},
		{"log", cfg.Log, Log{Level: "info", Format: "json"}},
		{"has agents", cfg.HasAgents(), false},
		{"transport stdio", s.Transport, "stdio"},
		{"transport http", cfg.Servers["web"].Transport, "http"},
		{"timeout", s.Timeout.D().String(), "2m0s"},
		{"connect_timeout", s.ConnectTimeout.D().String(), "1m0s"},
		{"keepalive", s.Keepalive.D().String(), "3m0s"},
		{"reconnect_wait", s.ReconnectWaitValue().String(), "5s"},
		{"reconnect_wait set", s.ReconnectWait != nil, true},
		{"server enabled", s.IsEnabled(), true},
		{"prefix", s.PrefixValue(), "files"},
		{"protocol", s.Protocol, "2025-11-25"},
		{"resources", s.ResourcesEnabled(), true},
		{"prompts", s.PromptsEnabled(), true},
		{"max_response_bytes", s.MaxResponseBytes, int64(16078168)},
		{"response limit", s.ResponseLimit(), int64(16078168)},
		{"sampling enabled", s.Sampling.IsEnabled(), true},
		{"sampling max_rpm", s.Sampling.MaxRPM, 10},
		{"sampling max_tokens_cap", s.Sampling.MaxTokensCap, 4096},
		{"sampling timeout", s.Sampling.Timeout.D().String(), "30s"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestDefaultBlobsDir(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"xdg", []string{"XDG_STATE_HOME", "/state"}, "/state/mcp-proxy/blobs"},
		{"relative xdg ignored", []string{"XDG_STATE_HOME", "state"}, "/home/test/.local/state/mcp-proxy/blobs"},
		{"home", nil, "/home/test/.local/state/mcp-proxy/blobs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(nil, testEnv(tt.env...))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Blobs.Dir != tt.want {
				t.Errorf("blobs.dir = %q, want %q", cfg.Blobs.Dir, tt.want)
			}
			if want := filepath.Dir(tt.want); cfg.StateDir != want || cfg.AuthDir() != filepath.Join(want, "auth") {
				t.Errorf("state_dir = %q, auth dir %q, want %q and %q/auth", cfg.StateDir, cfg.AuthDir(), want, want)
			}
		})
	}
	cfg, err := Parse([]byte("blobs: {dir: /data/blobs}\n"), testEnv())
	if err != nil || cfg.Blobs.Dir != "/data/blobs" {
		t.Errorf("explicit blobs.dir: %v, %v", cfg, err)
	}
}

func TestAuthValid(t *testing.T) {
	doc := `state_dir: /var/lib/mcp-proxy
servers:
  gh:
    url: https://api.example.com/mcp
    auth: {type: oauth, client_id: cli, client_secret: "${SECRET}", token_endpoint_auth: client_secret_post, scopes: [repo, "read:org"], redirect_port: 8765, open: "'/opt/my browser/open' --new-tab"}
  cimd:
    url: https://docs.example.com/mcp
    auth: {type: oauth, client_metadata_url: https://me.example.com/client.json, open: none}
  m2m:
    transport: sse
    url: https://m2m.example.com/sse
    auth: {type: client_credentials, client_id: svc, private_key_file: /etc/mcp/key.pem, alg: ES256}
  static:
    url: https://static.example.com/mcp
    auth: {type: bearer, token: "${SECRET}"}
`
	cfg, err := Parse([]byte(doc), testEnv("SECRET", "s3cr3t-value-0123"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.AuthDir(); got != "/var/lib/mcp-proxy/auth" {
		t.Errorf("AuthDir = %q", got)
	}
	if a := cfg.Servers["gh"].Auth; a.ClientSecret != "s3cr3t-value-0123" || a.RedirectPort != 8765 || len(a.Scopes) != 2 {
		t.Errorf("gh auth = %+v", a)
	}
	if !slices.Contains(cfg.Secrets(), "s3cr3t-value-0123") {
		t.Errorf("the client secret is not among the config's secrets")
	}
}

func TestExplicitZeroes(t *testing.T) {
	cfg, err := Parse([]byte("startup_wait: 0\nservers:\n  a:\n    command: x\n    keepalive: 0\n    reconnect_wait: 0\n"), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StartupWait != 0 || cfg.Servers["a"].Keepalive != 0 || cfg.Servers["a"].ReconnectWaitValue() != 0 {
		t.Errorf("explicit zeroes replaced by defaults: startup_wait %v, keepalive %v, reconnect_wait %v",
			cfg.StartupWait, cfg.Servers["a"].Keepalive, cfg.Servers["a"].ReconnectWaitValue())
	}
	cfg, err = Parse([]byte("servers:\n  a:\n    command: x\n    keepalive: ~\n    timeout:\n"), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Servers["a"].Keepalive.D() != DefaultKeepalive || cfg.Servers["a"].Timeout.D() != DefaultTimeout {
		t.Errorf("null values did not get defaults: %+v", cfg.Servers["a"])
	}
}

func TestMergeKeys(t *testing.T) {
	doc := `servers:
  base: &base
    command: npx
    timeout: 30s
    env: {LOG: debug}
  other:
    <<: *base
    args: [other]
    timeout: 45s
`
	cfg, err := Parse([]byte(doc), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Servers["other"]
	if o.Command != "npx" || o.Timeout.D().String() != "45s" || o.Env["LOG"] != "debug" || o.Args[0] != "other" {
		t.Errorf("merged server = %+v", o)
	}
}

func TestAccessorsOnZeroValues(t *testing.T) {
	var c Config
	s := Server{Name: "My_Server"}
	if !c.IsEnabled() || !c.CallToolListed() || c.DeferredFor(nil) || c.HasAgents() {
		t.Error("zero Config accessors do not give the documented defaults")
	}
	yes := true
	if !c.DeferredFor(&Agent{DeferredLoading: &yes}) {
		t.Error("agent deferred_loading does not override")
	}
	if !s.IsEnabled() || s.PrefixValue() != "My_Server" || !s.ResourcesEnabled() || !s.PromptsEnabled() ||
		s.ResponseLimit() != DefaultMaxResponseBytes || !s.Sampling.IsEnabled() {
		t.Error("zero Server accessors do not give the documented defaults")
	}
	if got := s.URIPrefix(); got != "my-server" {
		t.Errorf("URIPrefix = %q", got)
	}
}

func TestValidateIsStable(t *testing.T) {
	data, err := os.ReadFile("testdata/invalid-many.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for i := 0; i < 20; i++ {
		_, err := Parse(data, testEnv())
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("run %d gave a different error:\n%s\nfirst:\n%s", i, err, first)
		}
	}
	var paths []string
	for _, l := range strings.Split(first, "\n") {
		p, _, _ := strings.Cut(l, ": ")
		paths = append(paths, p)
	}
	if !sort.StringsAreSorted(paths) {
		t.Errorf("validation problems are not sorted by path:\n%s", first)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("servers:\n  a:\n    command: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, testEnv())
	if err != nil || cfg.Servers["a"].Command != "x" {
		t.Fatalf("Load = %v, %v", cfg, err)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"), testEnv())
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load(missing) = %v, want os.ErrNotExist", err)
	}
}

func TestNullEntries(t *testing.T) {
	cfg, err := Parse([]byte("servers:\n  a:\nbundles:\n  b:\nagents:\n  x:\n"), testEnv())
	want := lines(
		"servers.a: needs command (a stdio server) or url (an http or sse server)",
	)
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if cfg.Servers["a"].Name != "a" || cfg.Agents["x"].Name != "x" || cfg.Agents["x"].Autonomy != "full" || cfg.Bundles["b"] == nil {
		t.Errorf("null entries not filled: %+v %+v", cfg.Servers["a"], cfg.Agents["x"])
	}
}

func TestLoopbackRule(t *testing.T) {
	tests := []struct {
		addr   string
		public bool
	}{
		{"127.0.0.1:8080", false},
		{"127.9.9.9:8080", false},
		{"localhost:8080", false},
		{"LOCALHOST:8080", false},
		{"[::1]:8080", false},
		{"[::ffff:127.0.0.1]:8080", false},
		{"0.0.0.0:8080", true},
		{":8080", true},
		{"[::]:8080", true},
		{"192.168.1.10:8080", true},
		{"proxy.internal:8080", true},
		{"[fe80::1%eth0]:8080", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			doc := "listen:\n  transport: http\n  addr: \"" + tt.addr + "\"\n"
			_, err := Parse([]byte(doc), testEnv())
			if got := err != nil; got != tt.public {
				t.Fatalf("error = %v, want an error: %v", err, tt.public)
			}
			if tt.public && !strings.HasPrefix(err.Error(), "listen.addr: ") {
				t.Fatalf("error = %v", err)
			}
		})
	}
	// stdio mode never binds listen.addr.
	if _, err := Parse([]byte("listen: {addr: \"0.0.0.0:1\"}\n"), testEnv()); err != nil {
		t.Errorf("stdio with a public addr: %v", err)
	}
}

// TestLaterSectionShapes decodes the free-form and one-or-many keys that
// docs/security.md and docs/agents.md add: claim values as a string or a list, and tool override
// annotations and pinned arguments holding any JSON value.
func TestLaterSectionShapes(t *testing.T) {
	doc := `servers:
  gh:
    command: gh-mcp
    tools:
      overrides:
        create_issue:
          name: new_issue
          annotations: {readOnlyHint: false, title: "New issue"}
          arguments: {owner: acme, labels: [a, b], limit: 3}
listen:
  auth: {issuer: "https://issuer.example.com"}
agents:
  eng:
    match: {groups: eng, azp: [cli, web]}
`
	cfg, err := Parse([]byte(doc), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Agents["eng"].Match
	if !reflect.DeepEqual(m["groups"], StringList{"eng"}) || !reflect.DeepEqual(m["azp"], StringList{"cli", "web"}) {
		t.Errorf("match = %#v", m)
	}
	o := cfg.Servers["gh"].Tools.Overrides["create_issue"]
	if o == nil || o.Name != "new_issue" || o.Annotations["readOnlyHint"] != false || o.Arguments["limit"] != 3 {
		t.Fatalf("override = %#v", o)
	}
	_, err = Parse([]byte("agents:\n  eng:\n    match: {groups: {a: b}}\n"), testEnv())
	if err == nil || !strings.Contains(err.Error(), "agents.eng.match.groups") {
		t.Errorf("a mapping as claim value: err = %v, want one naming agents.eng.match.groups", err)
	}
}
