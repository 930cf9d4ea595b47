//go:build conformance2026

package conformance2026

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/confrunner"
	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

const (
	buildTimeout    = 5 * time.Minute
	scenarioTimeout = 2 * time.Minute // one runner process
	// clientTimeout is the runner's --timeout for the host (ms): the host
	// gives up on its own well before.
	clientTimeout = "60000"
)

// scenarios is the client side of the 2026-07-28 requirement set (`conformance
// list --client`, the scenarios tagged 2026-07-28).
var scenarios = []string{
	"tools_call",
	"request-metadata",
	"auth/metadata-default",
	"auth/metadata-var1",
	"auth/metadata-var2",
	"auth/metadata-var3",
	"auth/basic-cimd",
	"auth/scope-from-www-authenticate",
	"auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined",
	"auth/scope-step-up",
	"auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic",
	"auth/token-endpoint-auth-post",
	"auth/token-endpoint-auth-none",
	"auth/pre-registration",
	"auth/resource-mismatch",
	"auth/offline-access-scope",
	"auth/offline-access-not-supported",
	"auth/authorization-server-migration",
	"auth/iss-supported",
	"auth/iss-not-advertised",
	"auth/iss-supported-missing",
	"auth/iss-wrong-issuer",
	"auth/iss-unexpected",
	"auth/iss-normalized",
	"auth/metadata-issuer-mismatch",
	"sep-2322-client-request-state",
	"http-standard-headers",
	"http-custom-headers",
	"http-invalid-tool-headers",
	"json-schema-ref-no-deref",
	"json-schema-2020-12-preservation",
}

// expectedFailures are the scenarios that do not pass yet, with why. A
// listed scenario that passes fails the test too: take it off the list.
// Every scenario of the set passes now.
var expectedFailures = map[string]string{}

// TestConformance2026Client runs every scenario of the set, one at a time,
// with mcp-proxy as the client, and requires each to pass (no FAILURE or
// WARNING check, at least one SUCCESS, runner exit 0) unless listed in
// expectedFailures. It logs the table of results.
func TestConformance2026Client(t *testing.T) {
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	r, err := confrunner.FindPinned(here)
	if err != nil {
		t.Fatal(err)
	}
	r.ClientArgs = []string{"--spec-version", "2026-07-28"}
	root, err := testproc.ModuleRoot(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	proxy, host := filepath.Join(dir, "mcp-proxy"), filepath.Join(dir, "clienthost")
	if err := testproc.Build(root, proxy, "./cmd/mcp-proxy", false, buildTimeout); err != nil {
		t.Fatal(err)
	}
	if err := testproc.Build(root, host, "./integration/conformance/clienthost", false, buildTimeout); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	passed := 0
	for i, name := range scenarios {
		ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
		run, err := r.Client(ctx, host, name, clientTimeout, filepath.Join(dir, fmt.Sprint(i)), "MCP_PROXY_BIN="+proxy, "HOME="+dir)
		cancel()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		ok := run.Result.Passed() && run.Result.Count("SUCCESS") > 0 && run.ExitCode == 0
		verdict := fmt.Sprintf("%d/%d", run.Result.Count("SUCCESS"), len(run.Result.Checks))
		if ok {
			passed++
			verdict = "pass " + verdict
		} else {
			verdict = fmt.Sprintf("FAIL %s (runner exit %d)", verdict, run.ExitCode)
		}
		fmt.Fprintf(&table, "  %-40s %s\n", name, verdict)
		why, expected := expectedFailures[name]
		switch {
		case !ok && !expected:
			t.Errorf("%s does not pass with mcp-proxy as the client:\n%s\nhost and proxy stderr (tail):\n%s", name, run.Result.Problems(), testproc.Tail(run.Stderr, 3000))
		case ok && expected:
			t.Errorf("%s passes now: take it off expectedFailures (%s)", name, why)
		}
	}
	t.Logf("2026-07-28 client scenarios with mcp-proxy as the client (node %s): %d of %d pass\n%s", r.NodeVersion, passed, len(scenarios), table.String())
}
