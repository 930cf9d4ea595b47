package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The README's first section and "Using it from a host" must work as
// written with the bundled example config: these tests read the commands
// and the host JSON out of README.md (so they break when the README
// drifts) and run them, with these substitutions only:
//   - `go run ./cmd/mcp-proxy` is the binary the tests built, and `mcp-proxy`
//     is found on PATH (the README says to put it there);
//   - config.example.yaml is a copy whose metrics port is 0, and port 8080
//     is 0, so that a proxy the user runs does not collide with the test;
//   - /path/to/mcp-proxy/mcp-proxy is the built binary and
//     /path/to/mcp-proxy/config.example.yaml the config's copy;
//   - npm runs offline with a temp HOME and cache: the example config's
//     `npx -y @modelcontextprotocol/server-…@2026.8.31` and the README's
//     `npx @modelcontextprotocol/inspector@2.12.0` resolve from
//     integration/node_modules (npm ci installs those exact versions, and
//     npx uses a project's own install when it satisfies the version), so
//     the tests download nothing.

// readmeBlock is one fenced code block of README.md.
type readmeBlock struct {
	section string // the "## " heading it is under ("" before the first)
	lang    string
	text    string
}

// readmeBlocks returns README.md's fenced code blocks up to the "## CLI"
// section: the part a new user reads first.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	var cur *readmeBlock
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case strings.HasPrefix(line, "```"):
			cur = &readmeBlock{section: section, lang: strings.TrimPrefix(line, "```")}
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
			if section == "CLI" {
				return blocks
			}
		}
	}
	return blocks
}

// readmeCommands returns the shell commands of the README's sh blocks,
// continuation lines joined, each split into words (the recipes quote
// nothing; a quote fails the test, which would need a shell parser).
func readmeCommands(t *testing.T, blocks []readmeBlock) [][]string {
	t.Helper()
	var cmds [][]string
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		for _, line := range strings.Split(strings.ReplaceAll(b.text, "\\\n", " "), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			if strings.ContainsAny(line, `"'`) {
				t.Fatalf("README command %q has quotes this test does not parse", line)
			}
			cmds = append(cmds, strings.Fields(line))
		}
	}
	return cmds
}

// recipeSetup is what every recipe runs with.
type recipeSetup struct {
	config string   // the example config's copy
	env    []string // the recipes' environment
}

// newRecipeSetup copies the example config with its metrics port made 0
// and makes the environment: the proxy's test environment with its own
// state directory (the example pins in quarantine mode), a temp HOME, npm
// offline, and the built binary first on PATH.
func newRecipeSetup(t *testing.T) recipeSetup {
	t.Helper()
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const metrics = "listen: 127.0.0.1:9464"
	if !bytes.Contains(data, []byte(metrics)) {
		t.Fatalf("config.example.yaml has no %q for the test to move to port 0", metrics)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.example.yaml")
	if err := os.WriteFile(cfg, bytes.Replace(data, []byte(metrics), []byte("listen: 127.0.0.1:0"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	var env []string
	for _, kv := range proxyEnv() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "PATH" || k == "XDG_STATE_HOME" || strings.HasPrefix(strings.ToLower(k), "npm_config_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"HOME="+home,
		"XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"npm_config_cache="+filepath.Join(home, ".npm"),
		"npm_config_offline=true",
		"npm_config_update_notifier=false")
	return recipeSetup{config: cfg, env: env}
}

// substitute applies the test's substitutions to one README command.
func (s recipeSetup) substitute(words []string, mcpURL string) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		switch {
		case w == "config.example.yaml":
			w = s.config
		case w == "MCP_PROXY_CONFIG=config.example.yaml":
			w = "MCP_PROXY_CONFIG=" + s.config
		case w == "127.0.0.1:8080":
			w = "127.0.0.1:0"
		case w == "http://127.0.0.1:8080/mcp":
			w = mcpURL
		}
		out = append(out, w)
	}
	return out
}

// consoleURL finds the URL of the console log line that points clients at
// the MCP endpoint.
var consoleURL = regexp.MustCompile(`point your MCP client at this URL url=(\S+)`)

// TestReadmeRecipes runs the README's run command (HTTP, with its startup
// summary on stderr) and every MCP Inspector command of it: over HTTP
// against that proxy, and over stdio where the Inspector starts the proxy
// after `--` (or with MCP_PROXY_CONFIG). Each lists the example's tools
// or calls its echo tool.
func TestReadmeRecipes(t *testing.T) {
	blocks := readmeBlocks(t)
	cmds := readmeCommands(t, blocks)
	s := newRecipeSetup(t)

	var run []string
	var inspector [][]string
	for _, c := range cmds {
		switch {
		case len(c) > 3 && c[0] == "go" && c[1] == "run" && c[2] == "./cmd/mcp-proxy":
			if run == nil {
				run = append([]string{proxyBin}, c[3:]...)
			}
		case len(c) > 1 && c[0] == "npx" && strings.HasPrefix(c[1], "@modelcontextprotocol/inspector"):
			inspector = append(inspector, c)
		}
	}
	if run == nil || !slices.Contains(run, "--listen") {
		t.Fatalf("the README has no `go run ./cmd/mcp-proxy ... --listen` command: %v", cmds)
	}
	if len(inspector) < 4 {
		t.Fatalf("the README has %d Inspector commands, want the HTTP one and three over stdio", len(inspector))
	}

	urls := make(chan string, 1)
	args := s.substitute(run, "")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = s.env
	p := startProc(t, "mcp-proxy (README)", cmd, func(line string) {
		if m := consoleURL.FindStringSubmatch(line); m != nil {
			select {
			case urls <- m[1]:
			default:
			}
		}
	})
	p.cleanExit = true
	var mcpURL string
	select {
	case mcpURL = <-urls:
	case <-p.done:
		t.Fatalf("the README's run command exited: %v\n%s", p.err, tail(p.stderr.String(), 4000))
	case <-testCtx(t, startTimeout).Done():
		t.Fatalf("the README's run command logged no URL\n%s", tail(p.stderr.String(), 4000))
	}

	for _, c := range inspector {
		t.Run(strings.Join(c[2:], " "), func(t *testing.T) {
			args := s.substitute(c, mcpURL)
			ctx := testCtx(t, startTimeout+callTimeout)
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Env = s.env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(c, " "), err, tail(stdout.String(), 2000), tail(stderr.String(), 4000))
			}
			checkRecipeOutput(t, c, stdout.Bytes())
		})
	}

	// The run command's stderr ends its start with the summary the README
	// shows: both example servers connected.
	summary := regexp.MustCompile(`startup summary connected=2 .*states="everything=connected filesystem=connected"`)
	deadline := testCtx(t, startTimeout)
	for !summary.MatchString(p.stderr.String()) {
		select {
		case <-p.done:
			t.Fatalf("the proxy exited: %v", p.err)
		case <-deadline.Done():
			t.Fatalf("no startup summary with both servers connected:\n%s", tail(p.stderr.String(), 4000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkRecipeOutput checks what an Inspector command printed: the
// example's tools for tools/list, the echo for tools/call.
func checkRecipeOutput(t *testing.T, c []string, stdout []byte) {
	t.Helper()
	switch {
	case slices.Contains(c, "tools/list"):
		var r struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		if err := json.Unmarshal(stdout, &r); err != nil {
			t.Fatalf("tools/list printed no JSON: %v\n%s", err, tail(string(stdout), 2000))
		}
		var names []string
		for _, tool := range r.Tools {
			names = append(names, tool.Name)
		}
		checkExampleTools(t, names)
		if t.Failed() {
			t.Logf("tools/list printed:\n%s", tail(string(stdout), 2000))
		}
	case slices.Contains(c, "tools/call"):
		if !bytes.Contains(stdout, []byte(`"text": "Echo: hi"`)) {
			t.Errorf("tools/call printed %s, want the echo of hi", stdout)
		}
	default:
		t.Fatalf("a README Inspector command this test does not know: %v", c)
	}
}

// checkExampleTools checks the tools the example config exposes: both
// servers', the override's name, and not the excluded move_file.
func checkExampleTools(t *testing.T, names []string) {
	t.Helper()
	for _, want := range []string{"everything__echo", "filesystem__list_directory", "read_text", "mcp_resources"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools lack %s: %v", want, names)
		}
	}
	if slices.Contains(names, "filesystem__move_file") {
		t.Errorf("the excluded filesystem__move_file is listed: %v", names)
	}
}

// TestReadmeHostJSON: the README's host JSON, given to a host built on the
// official TypeScript SDK (tshost/config-host.mjs), starts the proxy over
// stdio with the example config; the host lists the tools and calls echo.
func TestReadmeHostJSON(t *testing.T) {
	var hostJSON string
	for _, b := range readmeBlocks(t) {
		if b.lang == "json" && b.section == "Using it from a host" {
			hostJSON = b.text
		}
	}
	if hostJSON == "" {
		t.Fatal(`the README's "Using it from a host" has no JSON block`)
	}
	s := newRecipeSetup(t)
	const cfgPlaceholder, binPlaceholder = `"/path/to/mcp-proxy/config.example.yaml"`, `"/path/to/mcp-proxy/mcp-proxy"`
	if !strings.Contains(hostJSON, cfgPlaceholder) || !strings.Contains(hostJSON, binPlaceholder) {
		t.Fatalf("the host JSON has no %s or %s:\n%s", binPlaceholder, cfgPlaceholder, hostJSON)
	}
	hostJSON = strings.Replace(hostJSON, cfgPlaceholder, q(s.config), 1)
	hostJSON = strings.Replace(hostJSON, binPlaceholder, q(proxyBin), 1)
	file := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	if err := os.WriteFile(file, []byte(hostJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t, startTimeout+callTimeout), nodeBin, "tshost/config-host.mjs", file, "proxy", "everything__echo", `{"message":"hi"}`)
	cmd.Env = s.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the host failed: %v\n%s", err, tail(stderr.String(), 4000))
	}
	var r struct {
		Tools  []string `json:"tools"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("the host's report %q: %v\n%s", stdout.String(), err, tail(stderr.String(), 4000))
	}
	checkExampleTools(t, r.Tools)
	if len(r.Result.Content) != 1 || r.Result.Content[0].Text != "Echo: hi" {
		t.Errorf("echo answered %+v, want Echo: hi", r.Result)
	}
}
