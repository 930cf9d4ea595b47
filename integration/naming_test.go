package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recordedFixture is a fixture server whose tools/call requests are appended
// to a record file, so a test can tell which server a call reached.
func recordedFixture(t testing.TB, name string, args []string, extra ...string) (yaml, record string) {
	record = filepath.Join(t.TempDir(), name+".calls.jsonl")
	extra = append(extra, "env: {FIXTURE_RECORD: "+q(record)+"}")
	return fixtureServer(name, args, extra...), record
}

// recorded returns the tools/calls a recorded fixture received, one line each.
func recorded(t testing.TB, record string) []string {
	t.Helper()
	b, err := os.ReadFile(record)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// checkRoute calls exposed with a unique text and checks that exactly the
// server behind record received it, as its own tool name.
func checkRoute(t *testing.T, cs *mcp.ClientSession, exposed, tool, record string, others ...string) {
	t.Helper()
	text := "route check " + exposed
	args := map[string]any{"text": text}
	if tool != "echo" {
		args = map[string]any{}
	}
	callTool(t, cs, exposed, args)
	found := false
	for _, line := range recorded(t, record) {
		if strings.Contains(line, `"tool":"`+tool+`"`) && (tool != "echo" || strings.Contains(line, text)) {
			found = true
		}
	}
	if !found {
		t.Errorf("%s did not reach its server as %s; its record: %v", exposed, tool, recorded(t, record))
	}
	for _, o := range others {
		for _, line := range recorded(t, o) {
			if tool == "echo" && strings.Contains(line, text) {
				t.Errorf("%s also reached %s: %s", exposed, filepath.Base(o), line)
			}
		}
	}
}

// TestNamingHermes: `naming: hermes` exposes mcp_<server>_<tool> with the
// server name's - turned into _, and `prefix` replaces the server name.
func TestNamingHermes(t *testing.T) {
	t.Parallel()
	fx1, rec1 := recordedFixture(t, "fx-1", []string{"-no-weird"})
	fx2, rec2 := recordedFixture(t, "second", []string{"-no-weird"}, `prefix: "x"`)
	cs, _ := sdkStdioProxy(t, writeConfig(t, "naming: hermes\n", fx1, fx2), nil, nil)
	names := toolNames(listTools(t, cs))
	for _, want := range []string{"mcp_fx_1_echo", "mcp_fx_1_rpc_error", "mcp_x_echo", "mcp_x_list_changed"} {
		if !hasName(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	for _, n := range names {
		if !proxyOwnTool[n] && !strings.HasPrefix(n, "mcp_fx_1_") && !strings.HasPrefix(n, "mcp_x_") {
			t.Errorf("%s is not in hermes form", n)
		}
	}
	checkRoute(t, cs, "mcp_fx_1_echo", "echo", rec1, rec2)
	checkRoute(t, cs, "mcp_x_echo", "echo", rec2, rec1)
}

// TestNamingPrefixes (zeroclaw): `prefix: "x"` gives x__<tool>; two servers
// with `prefix: ""` expose bare names, except where both offer the same tool:
// then both fall back to <server>__<tool>.
func TestNamingPrefixes(t *testing.T) {
	t.Parallel()
	a, recA := recordedFixture(t, "a", []string{"-no-weird", "-tools", "2"}, `prefix: ""`)
	b, recB := recordedFixture(t, "b", []string{"-no-weird"}, `prefix: ""`)
	c, recC := recordedFixture(t, "c", []string{"-no-weird"}, `prefix: "x"`)
	cs, stderr := sdkStdioProxy(t, writeConfig(t, "", a, b, c), nil, nil)
	names := toolNames(listTools(t, cs))
	for _, want := range []string{
		"a__echo", "b__echo", // both bare "echo": both fall back
		"a__rpc_error", "b__rpc_error",
		"tool_0001", "tool_0002", // only a has them: bare
		"x__echo", "x__rpc_error", // prefix x
	} {
		if !hasName(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	for _, absent := range []string{"echo", "rpc_error", "c__echo", "a__tool_0001"} {
		if hasName(names, absent) {
			t.Errorf("tools/list has %s: %v", absent, names)
		}
	}
	checkRoute(t, cs, "a__echo", "echo", recA, recB, recC)
	checkRoute(t, cs, "b__echo", "echo", recB, recA, recC)
	checkRoute(t, cs, "x__echo", "echo", recC, recA, recB)
	checkRoute(t, cs, "tool_0001", "tool_0001", recA)
	for _, server := range []string{"a", "b"} {
		waitLog(t, stderr, `"level":"warn"`, `name \"echo\": bare name collides`, `exposed as \"`+server+`__echo\"`)
	}
	werr, _ := callErr(t, cs, "echo", map[string]any{"text": "bare"}, callTimeout)
	if werr.Code != -32602 || werr.Message != "unknown tool: echo" {
		t.Errorf("bare echo (a collision): code %d message %q, want unknown tool", werr.Code, werr.Message)
	}
}

// waitLog waits (bounded) for a log line of buf that holds every part.
func waitLog(t testing.TB, buf *syncBuffer, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(buf.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no log line holds all of %q", parts)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
