package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Helpers of the surface tests (deferred loading, resources and prompts,
// blobs, relays). Their names start with sf.

// sfSession asks the go-sdk client for protocol 2025-11-25, whose
// initialize handshake opens a session (the go-sdk v1.8.0 default is the
// stateless 2026-07-28 revision).
func sfSession() *mcp.ClientSessionOptions {
	return &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
}

// sfProxy is a proxy a test talks to with the go-sdk client.
type sfProxy struct {
	cs     *mcp.ClientSession
	pid    int
	stderr *syncBuffer
}

// sfStdioProxy is sdkStdioProxy that also returns the proxy's pid (for its
// memory figures) and its stderr.
func sfStdioProxy(t testing.TB, cfg string, opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) *sfProxy {
	t.Helper()
	cs, cmd, stderr := sdkStdioProxyCmd(t, cfg, opts, sopts)
	return &sfProxy{cs: cs, pid: cmd.Process.Pid, stderr: stderr}
}

// sfConnect connects the go-sdk client to a new proxy serving cfg over tr
// ("stdio" or "http"); sopts may be nil.
func sfConnect(t testing.TB, tr, cfg string, opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) *sfProxy {
	t.Helper()
	if tr == "stdio" {
		return sfStdioProxy(t, cfg, opts, sopts)
	}
	url, p := startHTTPProxy(t, cfg)
	return &sfProxy{cs: sdkHTTP(t, url, opts, sopts), pid: p.cmd.Process.Pid, stderr: p.stderr}
}

// sfMem returns a process's peak and current resident set sizes in KiB
// (VmHWM and VmRSS of /proc/<pid>/status).
func sfMem(t testing.TB, pid int) (hwm, rss int64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("memory of pid %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			hwm = n
		case "VmRSS":
			rss = n
		}
	}
	if hwm == 0 {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	return hwm, rss
}

// sfBuild says how the proxy under test was built, for reported figures.
func sfBuild() string {
	if raceEnabled {
		return "race-enabled proxy build"
	}
	return "plain proxy build"
}

// sfCall calls a tool that must answer with a result (isError or not).
func sfCall(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx := testCtx(t, callTimeout)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// sfToolError calls a tool whose result must be isError, and returns its text.
func sfToolError(t testing.TB, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res := sfCall(t, cs, name, args)
	if !res.IsError {
		t.Errorf("call %s %s: want an isError result, got %s", name, jsonOf(t, args), jsonOf(t, res))
	}
	return contentText(res)
}

// sfOK calls a tool whose result must not be isError, and returns its text.
func sfOK(t testing.TB, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res := sfCall(t, cs, name, args)
	if res.IsError {
		t.Errorf("call %s %s: isError result %s", name, jsonOf(t, args), jsonOf(t, res))
	}
	return contentText(res)
}

// sfRPCError unwraps a JSON-RPC error from a go-sdk error, or fails.
func sfRPCError(t testing.TB, what string, err error) *jsonrpc.Error {
	t.Helper()
	var werr *jsonrpc.Error
	if err == nil || !errors.As(err, &werr) {
		t.Fatalf("%s: want a JSON-RPC error, got %v", what, err)
	}
	return werr
}

// sfWaitFor polls cond every 20 ms until it holds or d passes; it reports
// whether it held.
func sfWaitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sfRecorder is a fixture server whose every call and cancellation is
// recorded (FIXTURE_RECORD through the server's env key).
func sfRecorder(t testing.TB, name string, args []string, extra ...string) (yaml, record string) {
	t.Helper()
	record = filepath.Join(t.TempDir(), name+"-record.jsonl")
	return fixtureServer(name, args, append([]string{"env: {FIXTURE_RECORD: " + q(record) + "}"}, extra...)...), record
}

// sfRecordLines returns the record file's lines (none when it does not exist yet).
func sfRecordLines(t testing.TB, record string) []string {
	t.Helper()
	data, err := os.ReadFile(record)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// sfRecordHas reports whether some record line holds every part.
func sfRecordHas(t testing.TB, record string, parts ...string) bool {
	t.Helper()
	for _, line := range sfRecordLines(t, record) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// sfMetricsURL waits for the proxy's "serving metrics" log line and returns
// its URL.
func sfMetricsURL(t testing.TB, stderr *syncBuffer) string {
	t.Helper()
	var url string
	ok := sfWaitFor(startTimeout, func() bool {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct {
				Message string `json:"message"`
				URL     string `json:"url"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == "serving metrics" && l.URL != "" {
				url = l.URL
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("the proxy logged no \"serving metrics\" line:\n%s", tail(stderr.String(), 3000))
	}
	return url
}

// sfMetric reads one sample of a Prometheus text page: the line whose
// metric name is name and whose labels hold every label (k="v"). Missing is -1.
func sfMetric(t testing.TB, url, name string, labels ...string) float64 {
	t.Helper()
	ctx := testCtx(t, callTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		if !all {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return f
	}
	return -1
}

// sfCancelAfter runs call with a context that is cancelled once ready()
// holds (polled, at most callTimeout), and returns call's error.
func sfCancelAfter(t testing.TB, ready func() bool, call func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- call(ctx) }()
	if !sfWaitFor(callTimeout, ready) {
		cancel()
		<-errc
		t.Fatalf("the call never became ready to cancel")
	}
	cancel()
	select {
	case err := <-errc:
		return err
	case <-time.After(callTimeout):
		t.Fatalf("the call did not return within %s of its context being cancelled", callTimeout)
		return nil
	}
}
