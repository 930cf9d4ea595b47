package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStdoutIsProtocolOnly: in stdio mode, with server-everything (which
// logs to its stderr) and the fixture (whose bad_json tool writes a non-JSON
// line on its stdout and whose flood tool sends log notifications), every
// line of the proxy's stdout is a JSON-RPC message; the upstreams' stderr
// shows up in the proxy's log instead. At stdin EOF the proxy exits 0 and no
// upstream process outlives it. Every log line (log.format json) is one JSON
// object with level, time and message and no key twice, as log shippers need.
func TestStdoutIsProtocolOnly(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "blobs: {mode: passthrough}\n",
		everythingServer("everything"),
		fixtureServer("fx", []string{"-no-weird"}),
	)
	c := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	rawInit(t, c)
	rawResult(t, c, "tools/list", "")
	rawResult(t, c, "tools/call", callParams("everything__echo", `{"message":"clean"}`))
	rawResult(t, c, "tools/call", callParams("everything__get-tiny-image", ""))
	rawResult(t, c, "tools/call", callParams("fx__bad_json", ""))
	rawResult(t, c, "tools/call", callParams("fx__flood", `{"count":20}`))
	rawResult(t, c, "tools/call", callParams("fx__echo", `{"text":"still clean"}`))
	if r := c.request(t, "tools/call", callParams("nosuch", "")); r.Error == nil {
		t.Errorf("unknown tool: want an error, got %s", r.Raw)
	}
	c.request(t, "ping", "")

	children := childPIDs(t, c.p.cmd.Process.Pid)
	if len(children) < 2 {
		t.Errorf("found %d child processes of the proxy, want at least its two upstreams", len(children))
	}
	lines := append(c.all, c.closeAndDrain(t)...)
	if err := c.p.wait(t, 15*time.Second); err != nil {
		t.Errorf("the proxy exited with %v at stdin EOF, want 0", err)
	}

	for i, line := range lines {
		if err := checkJSONRPC(line); err != nil {
			t.Errorf("stdout line %d is not a JSON-RPC message (%v): %q", i+1, err, tail(string(line), 300))
		}
	}
	if len(lines) < 9 {
		t.Errorf("only %d stdout lines for 9 requests", len(lines))
	}
	log := c.p.stderr.String()
	if !strings.Contains(log, "Starting default (STDIO) server") {
		t.Errorf("server-everything's stderr line is not in the proxy's log:\n%s", tail(log, 3000))
	}
	for i, line := range strings.Split(strings.TrimRight(log, "\n"), "\n") {
		if err := checkLogLine(line); err != nil {
			t.Errorf("stderr line %d is not a clean JSON log line (%v): %s", i+1, err, tail(line, 300))
		}
	}
	for _, pid := range children {
		if alive(pid) {
			t.Errorf("upstream process %d outlived the proxy", pid)
		}
	}
}

// checkJSONRPC checks that line is one JSON-RPC 2.0 request, notification or
// response.
func checkJSONRPC(line []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return err
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return errString("jsonrpc is not \"2.0\"")
	}
	_, hasMethod := m["method"]
	_, hasID := m["id"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	switch {
	case hasMethod && !hasResult && !hasError:
		return nil
	case !hasMethod && hasID && hasResult != hasError:
		return nil
	}
	return errString("neither a request, a notification nor a response")
}

type errString string

func (e errString) Error() string { return string(e) }

// childPIDs returns the pids of the processes whose parent is pid (Linux /proc).
func childPIDs(t testing.TB, pid int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		t.Fatalf("cannot read /proc to find the proxy's children: %v", err)
	}
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			child, _ := strconv.Atoi(strings.Fields(s)[0])
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether pid still runs (a zombie counts as gone).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// checkLogLine checks one JSON log line: an object with level, time and
// message, whose keys are all different (Elasticsearch, for one, rejects a
// document with a duplicate field).
func checkLogLine(line string) error {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errString("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return errString("duplicate key " + strconv.Quote(key))
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if dec.More() {
		return errString("more than one value on the line")
	}
	for _, k := range []string{"level", "time", "message"} {
		if !seen[k] {
			return errString("no " + k)
		}
	}
	return nil
}
