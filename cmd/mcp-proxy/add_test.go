package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/registry/registrytest"
)

// repoRoot is the repository's root, found before any test changes the
// working directory.
var repoRoot, _ = filepath.Abs(filepath.Join("..", ".."))

// fakeRegistry serves the registry's own example server.json documents
// (registry/testdata/server-json), with one deprecated and one deleted.
func fakeRegistry(t *testing.T) *registrytest.Registry {
	t.Helper()
	versions := registrytest.Load(t, filepath.Join(repoRoot, "registry", "testdata", "server-json"))
	for i := range versions {
		switch {
		case strings.Contains(string(versions[i].Doc), `"io.modelcontextprotocol.anonymous/mcp-fs"`):
			versions[i].Status, versions[i].StatusMessage = "deprecated", "moved to io.github.modelcontextprotocol/filesystem"
		case strings.Contains(string(versions[i].Doc), `"io.modelcontextprotocol.anonymous/embedded-mcp"`):
			versions[i].Status = "deleted"
		}
	}
	return registrytest.New(t, versions)
}

// noConfig makes sure no config file is found but the one a test names.
func noConfig(t *testing.T) {
	t.Setenv("MCP_PROXY_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Chdir(t.TempDir())
}

// exampleConfig copies config.example.yaml into a temp dir.
func exampleConfig(t *testing.T) (path string, original string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "config.yaml", string(data)), string(data)
}

// addedLines returns the lines of after that are not in before, checking
// that every line of before is still there, in order.
func addedLines(t *testing.T, before, after string) string {
	t.Helper()
	b := strings.Split(before, "\n")
	var added []string
	j := 0
	for _, l := range strings.Split(after, "\n") {
		if j < len(b) && l == b[j] {
			j++
			continue
		}
		added = append(added, l)
	}
	if j != len(b) {
		t.Fatalf("a line of the original file was changed or removed:\n%s", after)
	}
	return strings.Join(added, "\n")
}

func TestRegistrySearch(t *testing.T) {
	noConfig(t)
	reg := fakeRegistry(t)
	out, _, err := runCLI(t, "registry", "search", "fs", "--registry", reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := "NAME                                      VERSION  RUNS AS  DESCRIPTION\n" +
		"io.modelcontextprotocol.anonymous/mcp-fs  2.0.0    remote   (deprecated) Cloud-hosted MCP filesystem server [moved to io.github.modelcontextprotocol/filesystem]\n"
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}

	out, _, err = runCLI(t, "registry", "search", "--json", "--registry", reg.URL, "knapcode")
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Name, Version, Status string
		Packages              []struct{ RegistryType, Identifier, Version, Transport string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(got) != 1 || got[0].Name != "io.github.joelverhagen/knapcode-samplemcpserver" || got[0].Version != "0.5.0" || got[0].Status != "active" ||
		len(got[0].Packages) != 1 || got[0].Packages[0].RegistryType != "nuget" || got[0].Packages[0].Transport != "stdio" {
		t.Errorf("--json gave %+v", got)
	}

	// Deleted servers are left out.
	out, _, err = runCLI(t, "registry", "search", "embedded", "--registry", reg.URL)
	if err != nil || out != "no server matches \"embedded\"\n" {
		t.Errorf("search embedded: %q, %v", out, err)
	}
}

// TestRegistryFromConfig: without --registry, the config's registry key
// is used, its headers sent.
func TestRegistryFromConfig(t *testing.T) {
	noConfig(t)
	reg := fakeRegistry(t)
	t.Setenv("REGISTRY_TOKEN", "rt-0123456789")
	cfg := writeFile(t, "c.yaml", "registry:\n  url: "+reg.URL+"\n  headers: {Authorization: \"Bearer ${REGISTRY_TOKEN}\"}\n")
	if _, _, err := runCLI(t, "registry", "search", "weather", "--config", cfg); err != nil {
		t.Fatal(err)
	}
	reqs := reg.Requests()
	if len(reqs) == 0 || reqs[0].Header.Get("Authorization") != "Bearer rt-0123456789" {
		t.Errorf("the registry did not get the configured header")
	}
}

// TestAddFromRegistry: add writes the pinned entry after the last server
// of the bundled example config, changes no line, never writes a secret,
// and the result validates once the variable is set.
func TestAddFromRegistry(t *testing.T) {
	noConfig(t)
	reg := fakeRegistry(t)
	path, original := exampleConfig(t)
	t.Setenv("WEATHER_API_KEY", "wk-secret-0123456789")
	out, stderr, err := runCLI(t, "add", "io.github.example/weather-mcp", "--config", path, "--registry", reg.URL)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The entry and a blank line (the example separates its servers).
	wantAdded := `  weather-mcp:
    command: "uvx"
    args: ["weather-mcp-server==0.5.0"]
    env:
      WEATHER_API_KEY: "${WEATHER_API_KEY}"
    connect_timeout: 120s
`
	if got := addedLines(t, original, string(data)); got != wantAdded {
		t.Errorf("added lines:\n%s\nwant:\n%s", got, wantAdded)
	}
	if strings.Contains(string(data), "wk-secret") {
		t.Errorf("the secret's value was written into the config")
	}
	wantOut := "added server \"weather-mcp\" to " + path + "\n" +
		"from io.github.example/weather-mcp 0.5.0: pypi weather-mcp-server==0.5.0\n" +
		"set these in mcp-proxy's environment (the file holds only ${NAME} references):\n" +
		"  WEATHER_API_KEY (secret, env WEATHER_API_KEY): API key for weather service\n" +
		"left out (optional; add them to the entry to use them):\n" +
		"  WEATHER_UNITS (env WEATHER_UNITS, default celsius): Temperature units (celsius, fahrenheit)\n" +
		"a running proxy picks the entry up on SIGHUP: kill -HUP <its pid> (for example: pkill -HUP -x mcp-proxy)\n"
	if out != wantOut {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, wantOut)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want the original 0600", st.Mode(), err)
	}
	vout, _, err := runCLI(t, "validate", path)
	if err != nil || !strings.Contains(vout, "config OK: 3 servers") {
		t.Errorf("validate: %q, %v", vout, err)
	}

	// The same server again: its name is taken.
	_, _, err = runCLI(t, "add", "io.github.example/weather-mcp", "--config", path, "--registry", reg.URL)
	if code := exitCode(t, err); code != exitUsage || err.Error() != `the config already has a server named "weather-mcp": give the new one another name with --as NAME` {
		t.Errorf("second add: exit %d, %v", code, err)
	}
	out, _, err = runCLI(t, "add", "io.github.example/weather-mcp", "--as", "weather2", "--config", path, "--registry", reg.URL)
	if err != nil || !strings.HasPrefix(out, `added server "weather2"`) {
		t.Errorf("add --as: %q, %v", out, err)
	}
	if !strings.Contains(out, "note: ${WEATHER_API_KEY} is also used by server weather-mcp: they will get the same value\n") {
		t.Errorf("the shared variable is not reported:\n%s", out)
	}
}

// TestAddUnsetVariableWarns: a required variable this environment lacks
// is reported, and the config still validates with it taken as set.
func TestAddUnsetVariableWarns(t *testing.T) {
	noConfig(t)
	reg := fakeRegistry(t)
	path := writeFile(t, "c.yaml", "servers: {}\n")
	out, _, err := runCLI(t, "add", "io.modelcontextprotocol.anonymous/multi-tenant-server", "--config", path, "--registry", reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	want := "servers: {multi-tenant-server: {url: \"https://anonymous.modelcontextprotocol.io/mcp/${MULTI_TENANT_SERVER_TENANT_ID}\"}}\n"
	if string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
	for _, w := range []string{
		"note: one line of the file changed: servers is written on one line, so the entry went into it\n",
		"  MULTI_TENANT_SERVER_TENANT_ID (url {tenant_id}): Tenant identifier (e.g., 'us-cell1', 'emea-cell1')\n",
		"warning: MULTI_TENANT_SERVER_TENANT_ID is not set in this environment: a proxy started (or reloaded) without it fails to load the config\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
}

// TestAddDryRun prints the entry and leaves the file alone.
func TestAddDryRun(t *testing.T) {
	noConfig(t)
	reg := fakeRegistry(t)
	path, original := exampleConfig(t)
	out, stderr, err := runCLI(t, "add", "io.modelcontextprotocol.anonymous/hybrid-mcp", "--remote", "--dry-run", "--config", path, "--registry", reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := `  hybrid-mcp:
    url: "https://mcp.anonymous.modelcontextprotocol.io/http"
    headers:
      X-API-Key: "${HYBRID_MCP_X_API_KEY}"
`
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if !strings.Contains(stderr, "HYBRID_MCP_X_API_KEY (secret, header X-API-Key): API key for authentication") ||
		!strings.Contains(stderr, "HYBRID_MCP_X_REGION (header X-Region, default us-east-1, one of us-east-1|eu-west-1|ap-southeast-1)") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if data, _ := os.ReadFile(path); string(data) != original {
		t.Errorf("--dry-run changed the file")
	}
}

// TestAddErrors: what a user can act on, in words and exit codes.
func TestAddErrors(t *testing.T) {
	noConfig(t)
	reg := fakeRegistry(t)
	path := writeFile(t, "c.yaml", "servers:\n")
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown name", []string{"add", "io.github.example/wether-mcp"}, exitUsage,
			`server "io.github.example/wether-mcp" is not in the registry ` + reg.URL + `; the closest names are io.github.example/weather-mcp`},
		{"missing version", []string{"add", "io.github.joelverhagen/knapcode-samplemcpserver@1.0.0"}, exitUsage,
			`no such version: server "io.github.joelverhagen/knapcode-samplemcpserver" has no version "1.0.0"; it has 0.5.0, 0.4.0-beta`},
		{"mcpb", []string{"add", "io.modelcontextprotocol/text-editor"}, exitUsage,
			`no package of a runnable type: server "io.modelcontextprotocol/text-editor" is an MCPB bundle: mcp-proxy does not download and unpack bundles; install it with a host that does, or ask its publisher for an npm, pypi, oci or nuget package`},
		{"cargo", []string{"add", "io.github.example/widget-mcp"}, exitUsage,
			`no package of a runnable type: server "io.github.example/widget-mcp" (it offers: cargo); mcp-proxy runs npm, pypi, oci and nuget packages and reaches streamable-http and sse remotes`},
		{"deleted", []string{"add", "io.modelcontextprotocol.anonymous/embedded-mcp"}, exitUsage,
			`server "io.modelcontextprotocol.anonymous/embedded-mcp" is not in the registry ` + reg.URL},
		{"not a registry name", []string{"add", "weather"}, exitUsage,
			`"weather" is not a registry name: those are namespace/name, like io.github.owner/server (search with ` + "`mcp-proxy registry search WORDS`)"},
		{"bad --as", []string{"add", "io.github.example/weather-mcp", "--as", "a b"}, exitUsage,
			`--as "a b" is not a server name: 1-32 letters, digits, "_" or "-", without "__" (for example "a-b")`},
		{"two sources", []string{"add", "io.github.example/weather-mcp", "--npm", "x"}, exitUsage, addUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append(tc.args, "--config", path, "--registry", reg.URL)...)
			if code := exitCode(t, err); code != tc.code || err.Error() != tc.want {
				t.Errorf("exit %d, %v\nwant %d, %s", code, err, tc.code, tc.want)
			}
		})
	}
	_, _, err := runCLI(t, "add", "io.github.example/weather-mcp", "--config", path, "--registry", dead.URL)
	if code := exitCode(t, err); code != exitRuntime || !strings.HasPrefix(err.Error(), "registry unreachable: "+dead.URL+"/v0.1/servers/io.github.example%2Fweather-mcp/versions/latest: ") {
		t.Errorf("unreachable: exit %d, %v", code, err)
	}
	if data, _ := os.ReadFile(path); string(data) != "servers:\n" {
		t.Errorf("a failed add changed the file:\n%s", data)
	}
	_, stderr, err := runCLI(t, "add", "io.modelcontextprotocol.anonymous/mcp-fs", "--dry-run", "--config", path, "--registry", reg.URL)
	if err != nil || !strings.HasPrefix(stderr, `warning: server "io.modelcontextprotocol.anonymous/mcp-fs" 2.0.0 is deprecated: moved to io.github.modelcontextprotocol/filesystem`+"\n") {
		t.Errorf("deprecated: %v, stderr:\n%s", err, stderr)
	}
}

// TestAddPackagesAndURL: --npm and --pypi resolve the latest version from
// the package registries' real documents and pin it; --url takes SSE from
// the path.
func TestAddPackagesAndURL(t *testing.T) {
	noConfig(t)
	npmDoc, err := os.ReadFile(filepath.Join(repoRoot, "registry", "testdata", "npm", "server-everything.json"))
	if err != nil {
		t.Fatal(err)
	}
	pypiDoc, err := os.ReadFile(filepath.Join(repoRoot, "registry", "testdata", "pypi", "pylev-1.3.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/@modelcontextprotocol%2Fserver-everything":
			w.Write(npmDoc)
		case "/pypi/pylev/json":
			w.Write(pypiDoc)
		default:
			http.NotFound(w, r)
		}
	}))
	defer ts.Close()
	t.Setenv(envNPMRegistry, ts.URL)
	t.Setenv(envPyPIURL, ts.URL)
	path, original := exampleConfig(t)
	for _, args := range [][]string{
		{"--npm", "@modelcontextprotocol/server-everything", "--as", "everything2"},
		{"--pypi", "pylev"},
		{"--url", "https://mcp.example.com/v1/sse"},
	} {
		if _, stderr, err := runCLI(t, append([]string{"add", "--config", path}, args...)...); err != nil {
			t.Fatalf("add %v: %v\n%s", args, err, stderr)
		}
	}
	data, _ := os.ReadFile(path)
	want := `  everything2:
    command: "npx"
    args: ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]
    connect_timeout: 120s

  pylev:
    command: "uvx"
    args: ["pylev==1.3.0"]
    connect_timeout: 120s

  example:
    url: "https://mcp.example.com/v1/sse"
    transport: sse
`
	if got := addedLines(t, original, string(data)); got != want {
		t.Errorf("added:\n%s\nwant:\n%s", got, want)
	}
	_, _, err = runCLI(t, "add", "--config", path, "--npm", "@modelcontextprotocol/server-everything@9.9.9", "--as", "e3")
	if code := exitCode(t, err); code != exitUsage || err.Error() != `no such version: npm has no version "9.9.9" of "@modelcontextprotocol/server-everything"` {
		t.Errorf("missing npm version: exit %d, %v", code, err)
	}
}

// TestAddThroughSymlinkAndNewFile: a config reached through a symlink is
// edited in its target (the link stays a link); a --config file that does
// not exist yet is created, private, with the entry alone.
func TestAddThroughSymlinkAndNewFile(t *testing.T) {
	noConfig(t)
	reg := fakeRegistry(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "real.yaml")
	if err := os.WriteFile(target, []byte("servers:\n  a:\n    command: a\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "add", "io.modelcontextprotocol/everything", "--config", link, "--registry", reg.URL); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", st.Mode(), err)
	}
	data, _ := os.ReadFile(target)
	want := "servers:\n  a:\n    command: a\n  everything:\n    command: \"npx\"\n    args: [\"-y\", \"@modelcontextprotocol/everything@0.6.2\"]\n    connect_timeout: 120s\n"
	if string(data) != want {
		t.Errorf("target:\n%s\nwant:\n%s", data, want)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o640 {
		t.Errorf("target mode %v, want 0640 kept", st.Mode().Perm())
	}

	fresh := filepath.Join(dir, "new.yaml")
	if _, _, err := runCLI(t, "add", "io.modelcontextprotocol/everything", "--config", fresh, "--registry", reg.URL); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(fresh)
	if want := "servers:\n  everything:\n    command: \"npx\"\n    args: [\"-y\", \"@modelcontextprotocol/everything@0.6.2\"]\n    connect_timeout: 120s\n"; string(data) != want {
		t.Errorf("new file:\n%s\nwant:\n%s", data, want)
	}
	if st, _ := os.Stat(fresh); st.Mode().Perm() != 0o600 {
		t.Errorf("new file mode %v, want 0600", st.Mode().Perm())
	}
}

// TestAddURLTemplateBase: a remote whose URL starts with a template
// variable (the schema's draft allows "{baseUrl}/mcp") validates with the
// variable taken as set, and is written as ${VAR}.
func TestAddURLTemplateBase(t *testing.T) {
	noConfig(t)
	reg := registrytest.New(t, []registrytest.Version{{Doc: []byte(`{"name": "io.github.example/self-hosted", "description": "d", "version": "1.0.0",
		"remotes": [{"type": "streamable-http", "url": "{baseUrl}/mcp", "variables": {"baseUrl": {"description": "Base URL for the MCP server", "isRequired": true}}}]}`)}})
	path := writeFile(t, "c.yaml", "servers:\n")
	if _, stderr, err := runCLI(t, "add", "io.github.example/self-hosted", "--config", path, "--registry", reg.URL); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	data, _ := os.ReadFile(path)
	if want := "servers:\n  self-hosted:\n    url: \"${SELF_HOSTED_BASEURL}/mcp\"\n"; string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
}

// TestRegistrySearchEscapes: a description that would drive the terminal
// is shown escaped.
func TestRegistrySearchEscapes(t *testing.T) {
	noConfig(t)
	reg := registrytest.New(t, []registrytest.Version{{Doc: []byte(`{"name": "io.github.evil/clear", "description": "clears\u001b[2J the \u202escreen", "version": "1.0.0"}`)}})
	out, _, err := runCLI(t, "registry", "search", "clear", "--registry", reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := "NAME                  VERSION  RUNS AS  DESCRIPTION\n" +
		"io.github.evil/clear  1.0.0    -        clears\\u001b[2J the \\u202escreen\n"
	if out != want {
		t.Errorf("got:\n%q\nwant:\n%q", out, want)
	}
}
