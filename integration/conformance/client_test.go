package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/confrunner"
	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// Client scenarios: the runner starts a scenario server and runs the host
// (clienthost/) with its URL; the host starts mcp-proxy over stdio with
// that server as its one upstream and calls the scenario's tool through
// it. The proxy is the client under test.
const (
	// clientTimeout is the runner's --timeout for the host (ms): the host
	// gives up on its own well before (clienthost.toolWait).
	clientTimeout = "60000"
	// scenarioTimeout bounds one runner process.
	scenarioTimeout = 2 * time.Minute
)

// clientScenarios are the client scenarios that must pass through the
// proxy, with what each shows. The auth ones are issue 15's; the four
// others exercise the same runner on the plain relay.
var clientScenarios = []struct{ name, what string }{
	{"auth/metadata-default", "PRM from resource_metadata, RFC 8414 metadata at the root, DCR"},
	{"auth/metadata-var1", "PRM at the path's well-known URI, OpenID discovery"},
	{"auth/metadata-var2", "PRM at the root, RFC 8414 path-inserted metadata"},
	{"auth/metadata-var3", "custom PRM URL, OpenID path-appended metadata"},
	{"auth/basic-cimd", "Client ID Metadata Document URL as client_id"},
	{"auth/scope-from-www-authenticate", "scope from the 401 challenge"},
	{"auth/scope-from-scopes-supported", "scope from PRM scopes_supported"},
	{"auth/scope-omitted-when-undefined", "no scope parameter"},
	{"auth/scope-step-up", "403 insufficient_scope: a new login with the union of scopes"},
	{"auth/scope-retry-limit", "no endless step-up (expected refusal)"},
	{"auth/token-endpoint-auth-basic", "client_secret_basic as registered, resource on both requests"},
	{"auth/token-endpoint-auth-post", "client_secret_post as registered"},
	{"auth/token-endpoint-auth-none", "public client"},
	{"auth/pre-registration", "configured client_id and secret"},
	{"auth/2025-03-26-oauth-metadata-backcompat", "no PRM: metadata at the server's origin"},
	{"auth/2025-03-26-oauth-endpoint-fallback", "no metadata: /authorize, /token, /register"},
	{"auth/client-credentials-jwt", "client_credentials with a private_key_jwt assertion (ES256)"},
	{"auth/client-credentials-basic", "client_credentials with client_secret_basic"},
	{"auth/resource-mismatch", "PRM for another resource is refused (draft; expected refusal)"},
	{"auth/offline-access-scope", "offline_access requested when the AS lists it (draft)"},
	{"auth/offline-access-not-supported", "offline_access not requested otherwise (draft)"},
	{"initialize", "initialize handshake through the proxy"},
	{"tools_call", "a tool call through the proxy"},
	{"elicitation-sep1034-client-defaults", "the host's elicitation answer relayed"},
	{"sse-retry", "the upstream SSE stream resumed after retry ms"},
}

var hostBuild struct {
	once sync.Once
	path string
	err  error
}

// clientHost builds clienthost/ once.
func clientHost(t *testing.T) string {
	t.Helper()
	binaries(t) // shared.dir
	hostBuild.once.Do(func() {
		root, err := testproc.ModuleRoot(filepath.Join("..", ".."))
		if err != nil {
			hostBuild.err = err
			return
		}
		hostBuild.path = filepath.Join(shared.dir, "clienthost")
		hostBuild.err = testproc.Build(root, hostBuild.path, "./integration/conformance/clienthost", false, buildTimeout)
	})
	if hostBuild.err != nil {
		t.Fatal(hostBuild.err)
	}
	return hostBuild.path
}

// clientScenarioLine is one line of `conformance list --client`.
var clientScenarioLine = regexp.MustCompile(`^\s+- ([a-z0-9][a-z0-9/_.-]*) \[`)

func (r *runner) clientScenarioNames() ([]string, error) {
	return r.listScenarios("--client", clientScenarioLine)
}

// runClientScenario runs `conformance client --scenario name` with the
// host and reads back its checks.
func (r *runner) runClientScenario(host, proxy, name, outDir string) (*confrunner.ClientRun, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	return r.Client(ctx, host, name, clientTimeout, outDir, "MCP_PROXY_BIN="+proxy)
}

// TestConformanceClient runs every scenario of clientScenarios with
// mcp-proxy as the client under test, one at a time (sse-retry measures
// timing), and requires each to pass: no FAILURE or WARNING check, at
// least one SUCCESS check and a runner exit of 0.
func TestConformanceClient(t *testing.T) {
	r := needRunner(t)
	proxy, _ := binaries(t)
	host := clientHost(t)
	listed, err := r.clientScenarioNames()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(shared.dir, "client-")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	for i, sc := range clientScenarios {
		if !slices.Contains(listed, sc.name) {
			t.Errorf("%s is not a client scenario of this runner (it lists %v)", sc.name, listed)
			continue
		}
		start := time.Now()
		run, err := r.runClientScenario(host, proxy, sc.name, filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Errorf("%s: %v", sc.name, err)
			continue
		}
		verdict := cell(run.Result)
		if run.ExitCode != 0 {
			verdict += fmt.Sprintf(" (runner exit %d)", run.ExitCode)
		}
		fmt.Fprintf(&table, "  %-42s %-22s %5s  %s\n", sc.name, verdict, time.Since(start).Round(100*time.Millisecond), sc.what)
		// Passed holds for an empty check list too: a scenario that
		// judged nothing has not passed.
		if !run.Result.Passed() || run.Result.Count("SUCCESS") == 0 || run.ExitCode != 0 {
			t.Errorf("%s does not pass through mcp-proxy (runner exit %d):\n%s\nhost and proxy stderr (tail):\n%s\nrunner output (tail):\n%s",
				sc.name, run.ExitCode, run.Result.Problems(), tail(run.Stderr, 4000), tail(run.Output, 3000))
		}
		if race := testproc.RaceReport(run.Stderr); race != "" {
			t.Errorf("%s: mcp-proxy reported a data race:\n%s", sc.name, race)
		}
	}
	t.Logf("client scenarios through mcp-proxy:\n%s", table.String())
}
