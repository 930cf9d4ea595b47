package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstream resilience: what a client sees while upstreams die, hang, start
// badly, answer too much or change their tools. Helpers of these files start
// with rs.

// rsRecordedFixture is a fixture server whose tools/calls and cancellations
// go to a record file (FIXTURE_RECORD, passed through the server's env).
func rsRecordedFixture(t testing.TB, name string, args []string, extra ...string) (yaml, record string) {
	record = filepath.Join(t.TempDir(), name+".record.jsonl")
	extra = append(extra, "env: {FIXTURE_RECORD: "+q(record)+"}")
	return fixtureServer(name, args, extra...), record
}

// rsRecord returns the lines of a fixture's record file.
func rsRecord(t testing.TB, record string) []string {
	t.Helper()
	b, err := os.ReadFile(record)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// rsRecordLines returns the record lines that hold every part.
func rsRecordLines(t testing.TB, record string, parts ...string) []string {
	t.Helper()
	var out []string
	for _, line := range rsRecord(t, record) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// rsWaitRecord waits (at most d) for a record line holding every part and
// reports whether one came.
func rsWaitRecord(t testing.TB, record string, d time.Duration, parts ...string) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if len(rsRecordLines(t, record, parts...)) > 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rsProcStat returns the parent pid, process group and state letter of pid.
func rsProcStat(pid int) (ppid, pgid int, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, "", false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return 0, 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	pgid, _ = strconv.Atoi(f[2])
	return ppid, pgid, f[0], true
}

// rsAllPIDs lists the running processes.
func rsAllPIDs() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// rsChildren returns the live (not zombie) children of pid.
func rsChildren(pid int) []int {
	var out []int
	for _, p := range rsAllPIDs() {
		if ppid, _, state, ok := rsProcStat(p); ok && ppid == pid && state != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// rsGroupMembers returns the live (not zombie) processes of process group pgid.
func rsGroupMembers(pgid int) []int {
	var out []int
	for _, p := range rsAllPIDs() {
		if _, g, state, ok := rsProcStat(p); ok && g == pgid && state != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// rsAlive reports whether pid runs (a zombie counts as gone).
func rsAlive(pid int) bool {
	_, _, state, ok := rsProcStat(pid)
	return ok && state != "Z"
}

// rsCmdline returns the command line of pid.
func rsCmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// rsFixtureChild returns the pid of the fixture child of parent that runs
// with `-name name`, waiting for it at most d; 0 if there is none.
func rsFixtureChild(parent int, name string, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		for _, c := range rsChildren(parent) {
			args := rsCmdline(c)
			if len(args) == 0 || args[0] != fixtureBin {
				continue
			}
			for i := 1; i+1 < len(args); i++ {
				if args[i] == "-name" && args[i+1] == name {
					return c
				}
			}
		}
		if time.Now().After(deadline) {
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rsGoneWait is how long a process that the proxy ended, or that ends with
// the proxy, may take to be gone (and reaped) on a loaded machine; one that
// is not ended stays far longer (the tests' processes sleep 1000 s).
const rsGoneWait = 10 * time.Second

// rsWaitGone waits (at most d) until none of pids runs and returns those
// still running.
func rsWaitGone(pids []int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		var left []int
		for _, p := range pids {
			if rsAlive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rsCall calls a tool with a bound and returns the result or the error.
func rsCall(cs *mcp.ClientSession, name string, args any, bound time.Duration) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// rsJSON renders v as JSON for failure messages.
func rsJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// rsShellQuote quotes s for sh.
func rsShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// rsRPCError returns the JSON-RPC error in err, or nil.
func rsRPCError(err error) *jsonrpc.Error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr
	}
	return nil
}

// rsWaitListed polls tools/list (at most d) until every name is listed.
func rsWaitListed(t testing.TB, cs *mcp.ClientSession, d time.Duration, names ...string) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := toolNames(listTools(t, cs))
		all := true
		for _, n := range names {
			all = all && hasName(got, n)
		}
		if all {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools/list lacks some of %v after %s: %v", names, d, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestResilienceKillUpstream: kill -9 of an upstream during a long call. The
// call fails at once saying the server was lost and the call not retried;
// another server keeps answering throughout the outage; the killed server is
// restarted after the first backoff step (about 1 s) and answers again.
func TestResilienceKillUpstream(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			victim, record := rsRecordedFixture(t, "victim", []string{"-no-weird", "-name", "victim"})
			cfg := writeConfig(t, "", victim, fixtureServer("other", []string{"-no-weird", "-name", "other"}))
			var cs *mcp.ClientSession
			var proxyPID int
			if tr == "stdio" {
				var cmd *exec.Cmd
				cs, cmd, _ = sdkStdioProxyCmd(t, cfg, nil, nil)
				proxyPID = cmd.Process.Pid
			} else {
				url, p := startHTTPProxy(t, cfg)
				cs, proxyPID = sdkHTTP(t, url, nil, nil), p.cmd.Process.Pid
			}
			rsWaitListed(t, cs, callTimeout, "victim__sleep", "victim__echo", "other__echo")
			oldPID := rsFixtureChild(proxyPID, "victim", 5*time.Second)
			if oldPID == 0 {
				t.Fatalf("no fixture child with -name victim under the proxy (pid %d)", proxyPID)
			}

			// The long call.
			type outcome struct {
				err error
				res *mcp.CallToolResult
				at  time.Time
			}
			long := make(chan outcome, 1)
			go func() {
				res, err := rsCall(cs, "victim__sleep", map[string]any{"ms": 20000}, callTimeout)
				long <- outcome{err: err, res: res, at: time.Now()}
			}()
			if !rsWaitRecord(t, record, 10*time.Second, `"tool":"sleep"`) {
				t.Fatal("the sleep call did not reach the victim fixture within 10s")
			}

			// Calls to the other server, back to back, for the whole outage.
			var otherCalls, otherFailures atomic.Int64
			var failMu sync.Mutex
			var otherErrs []string
			stopOther := make(chan struct{})
			otherDone := make(chan struct{})
			go func() {
				defer close(otherDone)
				for i := 0; ; i++ {
					select {
					case <-stopOther:
						return
					default:
					}
					text := fmt.Sprintf("other %d", i)
					res, err := rsCall(cs, "other__echo", map[string]any{"text": text}, 10*time.Second)
					otherCalls.Add(1)
					if err != nil || res.IsError || contentText(res) != text {
						otherFailures.Add(1)
						failMu.Lock()
						otherErrs = append(otherErrs, fmt.Sprintf("%s: err %v res %s", text, err, rsJSON(res)))
						failMu.Unlock()
					}
				}
			}()
			// The other loop is running before the kill.
			if !sfWaitFor(10*time.Second, func() bool { return otherCalls.Load() >= 1 }) {
				close(stopOther)
				<-otherDone
				t.Fatal("no call to the other server was answered before the kill")
			}

			killed := time.Now()
			if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
				t.Fatalf("kill -9 %d: %v", oldPID, err)
			}
			var got outcome
			select {
			case got = <-long:
			case <-time.After(callTimeout):
				t.Fatal("the in-flight call got no answer after its upstream was killed")
			}
			detect := got.at.Sub(killed)
			t.Logf("MEASURE %s kill detect: the in-flight call failed %s after kill -9", tr, detect.Round(time.Millisecond))
			werr := rsRPCError(got.err)
			switch {
			case got.err == nil:
				t.Errorf("the in-flight call to the killed server returned a result: %s", rsJSON(got.res))
			case werr == nil:
				t.Errorf("the in-flight call failed with %v, want a JSON-RPC error", got.err)
			default:
				t.Logf("in-flight call error: %d %s", werr.Code, werr.Message)
				for _, want := range []string{"MCP server 'victim' was lost during the call", "not retried"} {
					if !strings.Contains(werr.Message, want) {
						t.Errorf("in-flight call error %q lacks %q", werr.Message, want)
					}
				}
			}
			// At once: not when the 20 s sleep would have ended. The bound
			// leaves room for a loaded machine.
			if detect > 5*time.Second {
				t.Errorf("the in-flight call failed %s after the kill, want at once (within 5s; the sleep was 20s)", detect)
			}

			// The victim comes back after the first backoff step.
			var recovered time.Duration
			var outageErrs []string
			deadline := time.Now().Add(20 * time.Second)
			for {
				res, err := rsCall(cs, "victim__echo", map[string]any{"text": "back"}, 10*time.Second)
				if err == nil && !res.IsError && contentText(res) == "back" {
					recovered = time.Since(killed)
					break
				}
				if w := rsRPCError(err); w == nil || w.Code != -32000 || w.Message != "MCP server 'victim' is not connected" {
					outageErrs = append(outageErrs, fmt.Sprintf("err %v res %s", err, rsJSON(res)))
				}
				if time.Now().After(deadline) {
					t.Fatalf("the victim server did not answer again within 20s of the kill")
				}
				time.Sleep(50 * time.Millisecond)
			}
			// A few more calls to the other server after the recovery.
			time.Sleep(200 * time.Millisecond)
			close(stopOther)
			<-otherDone
			t.Logf("MEASURE %s recover: victim answered again %s after kill -9; other server: %d calls, %d failures during the outage",
				tr, recovered.Round(time.Millisecond), otherCalls.Load(), otherFailures.Load())
			if len(outageErrs) > 0 {
				t.Errorf("calls to the victim while it was down, want -32000 \"MCP server 'victim' is not connected\": %q", outageErrs)
			}
			if recovered < 700*time.Millisecond || recovered > 10*time.Second {
				t.Errorf("the victim answered again %s after the kill, want after the first backoff step (1s ±20%%) and well within 10s", recovered)
			}
			if n := otherFailures.Load(); n != 0 {
				t.Errorf("%d of %d calls to the other server failed during the outage: %q", n, otherCalls.Load(), otherErrs)
			}
			if n := otherCalls.Load(); n < 5 {
				t.Errorf("only %d calls to the other server ran during the outage; the check means nothing", n)
			}
			newPID := rsFixtureChild(proxyPID, "victim", 5*time.Second)
			if newPID == 0 || newPID == oldPID {
				t.Errorf("victim's fixture pid after the restart: %d (before: %d), want a new process", newPID, oldPID)
			}
			// The killed call was not replayed on the new process.
			if n := len(rsRecordLines(t, record, `"tool":"sleep"`)); n != 1 {
				t.Errorf("the victim received the sleep call %d times, want 1 (never replayed)", n)
			}
		})
	}
}

// TestResilienceStuckUpstreams: an upstream that never answers a call, one
// that never answers initialize, one whose initialize is slower than its
// connect_timeout, one that exits at start and one that crashes early: the
// call times out in about its timeout (and the upstream is told to cancel),
// the other servers work and are not held up, and `tools --json` names each
// failed server with its reason.
func TestResilienceStuckUpstreams(t *testing.T) {
	t.Parallel()
	const crashMarker = "rs-early-crash-marker"
	hung, record := rsRecordedFixture(t, "hung", []string{"-no-weird", "-name", "hung"}, "timeout: 1s")
	cfg := writeConfig(t, "",
		fixtureServer("ok", []string{"-no-weird"}),
		hung,
		fixtureServer("noinit", []string{"-no-answer-init"}, "connect_timeout: 1s"),
		fixtureServer("slowinit", []string{"-no-weird", "-init-delay", "4s"}, "connect_timeout: 1s"),
		fixtureServer("exitstart", []string{"-exit-at-start"}),
		stdioServer("earlycrash", "/bin/sh", []string{"-c", "echo " + crashMarker + " >&2; exit 3"}),
	)

	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		cs, _, stderr := sdkStdioProxyCmd(t, cfg, nil, nil)
		start := time.Now()
		names := toolNames(listTools(t, cs))
		took := time.Since(start)
		t.Logf("MEASURE first tools/list with 4 failing servers: %s", took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("the first tools/list took %s: failing servers held it up", took)
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "ok__") && !strings.HasPrefix(n, "hung__") && !rsProxyTool(n) {
				t.Errorf("tools/list has %s, which no connected server offers", n)
			}
		}
		if !hasName(names, "ok__echo") || !hasName(names, "hung__hang") {
			t.Fatalf("tools/list lacks ok__echo or hung__hang: %v", names)
		}

		start = time.Now()
		_, err := rsCall(cs, "hung__hang", map[string]any{}, callTimeout)
		took = time.Since(start)
		t.Logf("MEASURE hang with timeout 1s: error after %s", took.Round(time.Millisecond))
		werr := rsRPCError(err)
		if want := "MCP tool call 'hung__hang' timed out after 1s"; werr == nil || werr.Code != -32001 || werr.Message != want {
			t.Errorf("hung__hang: %v, want JSON-RPC -32001 %q", err, want)
		}
		if took < 900*time.Millisecond || took > 3*time.Second {
			t.Errorf("the timeout error came after %s, want about 1s", took)
		}
		if !rsWaitRecord(t, record, 10*time.Second, `"cancelled":`, `"tool":"hang"`, `"inflight":true`) {
			t.Errorf("the hung fixture got no notifications/cancelled for the timed-out call; record:\n%s", strings.Join(rsRecord(t, record), "\n"))
		}
		if got := contentText(callTool(t, cs, "ok__echo", map[string]any{"text": "fine"})); got != "fine" {
			t.Errorf("ok__echo: %q", got)
		}
		if got := contentText(callTool(t, cs, "hung__echo", map[string]any{"text": "still"})); got != "still" {
			t.Errorf("hung__echo after the timeout: %q", got)
		}
		// The early crash's stderr line is in the log, with the server's name.
		deadline := time.Now().Add(10 * time.Second)
		for !rsLogHas(stderr.String(), crashMarker, `"earlycrash"`) {
			if time.Now().After(deadline) {
				t.Errorf("no log line holds earlycrash's stderr line %q with its server name", crashMarker)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("tools --json", func(t *testing.T) {
		t.Parallel()
		rep := rsToolsReport(t, cfg)
		want := map[string]string{
			"ok": "", "hung": "",
			"noinit": "timed out", "slowinit": "timed out", "exitstart": "exit", "earlycrash": "exit",
		}
		for name, reason := range want {
			s, ok := rep[name]
			if !ok {
				t.Errorf("tools --json lacks server %s: %+v", name, rep)
				continue
			}
			t.Logf("tools --json: %s: state %s, error %q", name, s.State, s.Error)
			if reason == "" {
				if s.State != "connected" || len(s.Tools) == 0 {
					t.Errorf("%s: state %s with %d tools, want connected", name, s.State, len(s.Tools))
				}
				continue
			}
			// A server whose first attempt failed fast (earlycrash) may be
			// in its first retry by the time the slowest server's attempt
			// ends and the report is made (the retry waits 0.8-1.2 s, the
			// slow ones time out after 1 s): it still reads "failed", with
			// the failed attempt's error, as on the status page.
			if s.State != "failed" && s.State != "parked" {
				t.Errorf("%s: state %q, want failed or parked", name, s.State)
			}
			if !strings.Contains(strings.ToLower(s.Error), reason) {
				t.Errorf("%s: reason %q does not say %q", name, s.Error, reason)
			}
			if len(s.Tools) != 0 {
				t.Errorf("%s: lists tools %v", name, s.Tools)
			}
		}
	})
}

// rsProxyTool reports whether name is one of the proxy's own tools (listed
// when a granted server offers resources or prompts, or in deferred mode).
func rsProxyTool(name string) bool {
	switch name {
	case "mcp_resources", "mcp_prompts", "tool_search", "call_tool":
		return true
	}
	return false
}

// rsLogHas reports whether one line of log holds every part.
func rsLogHas(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
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

// rsServerReport is one server of `mcp-proxy tools --json`.
type rsServerReport struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Error string `json:"error"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// rsToolsReport runs `mcp-proxy tools --json` and returns its servers by
// name; the verb must exit 1 when a server is not connected, else 0.
func rsToolsReport(t testing.TB, cfg string, extra ...string) map[string]rsServerReport {
	t.Helper()
	stdout, stderr, code := runCLI(t, append([]string{"tools", "--json", "--config", cfg}, extra...)...)
	var rep struct {
		Servers []rsServerReport `json:"servers"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("tools --json exited %d, output: %v\n%s\nstderr:\n%s", code, err, stdout, tail(stderr, 4000))
	}
	want := 0
	for _, s := range rep.Servers {
		if s.State != "connected" && s.State != "disabled" {
			want = 1
		}
	}
	if code != want {
		t.Fatalf("mcp-proxy tools --json exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, stdout, tail(stderr, 4000))
	}
	out := map[string]rsServerReport{}
	for _, s := range rep.Servers {
		out[s.Name] = s
	}
	return out
}
