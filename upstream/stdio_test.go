package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

func TestStdioDiscoveryKeepsRawBytes(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	var seen snapshots
	c := start(t, fakeServer(t, "fake"), Options{Logger: testLogger(&logs), OnSnapshot: seen.add})
	s := mustConnected(t, c)

	if got, want := toolNames(s.Tools), []string{"exotic", "alpha", "beta", "gamma"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("tools %v, want %v (3 pages, nameless and duplicate skipped)", got, want)
	}
	if !bytes.Equal(s.Tools[0].Raw, []byte(exoticTool)) {
		t.Errorf("exotic tool bytes changed:\n got %s\nwant %s", s.Tools[0].Raw, exoticTool)
	}
	want := []Tool{
		{Name: "exotic", Description: "Exotic é tool", ReadOnly: true},
		{Name: "alpha", Description: "first"},
		{Name: "beta", ReadOnly: true},
		{Name: "gamma"}, // description 42 is not a string
	}
	for i, w := range want {
		g := s.Tools[i]
		if g.Name != w.Name || g.Description != w.Description || g.ReadOnly != w.ReadOnly {
			t.Errorf("tool %d = {%q %q %v}, want {%q %q %v}", i, g.Name, g.Description, g.ReadOnly, w.Name, w.Description, w.ReadOnly)
		}
	}
	if len(s.Resources) != 1 || string(s.Resources[0]) != fakeResource {
		t.Errorf("resources %s, want [%s]", s.Resources, fakeResource)
	}
	if s.ResourceTemplates != nil {
		t.Errorf("templates %s, want nil (the fake answers -32601)", s.ResourceTemplates)
	}
	if len(s.Prompts) != 3 || string(s.Prompts[2]) != `{"name":"p3"}` {
		t.Errorf("prompts %s, want 3 over 2 pages", s.Prompts)
	}
	wantCaps := Capabilities{Tools: true, ToolsListChanged: true, Resources: true, ResourcesSubscribe: true, Prompts: true, Logging: true}
	if s.Capabilities != wantCaps {
		t.Errorf("capabilities %+v, want %+v", s.Capabilities, wantCaps)
	}
	if s.ProtocolVersion != "2025-11-25" || s.Instructions != "Be nice." || !strings.Contains(string(s.ServerInfo), `"name":"fake"`) {
		t.Errorf("protocol %q, instructions %q, serverInfo %s", s.ProtocolVersion, s.Instructions, s.ServerInfo)
	}
	if s.Server != "fake" || s.Generation != 1 || s.Err != nil {
		t.Errorf("server %q generation %d err %v", s.Server, s.Generation, s.Err)
	}
	logs.waitLog(t, 5*time.Second, `"server":"fake"`, "tool skipped")
	logs.waitLog(t, 5*time.Second, "duplicate tool name", `"tool":"alpha"`)

	if got := seen.delivered(t, c); len(got) != 1 || got[0] != s {
		t.Errorf("OnSnapshot got %s, want the published snapshot alone", seen.describe())
	}
}

func TestStdioRequest(t *testing.T) {
	t.Parallel()
	c := start(t, fakeServer(t, "req"), Options{})
	mustConnected(t, c)
	ctx := context.Background()

	args := `{"n":18446744073709551615,"s":"x"}`
	raw, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":`+args+`}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(echoResult, args); string(raw) != want {
		t.Errorf("result\n got %s\nwant %s", raw, want)
	}

	_, err = c.Request(ctx, "tools/call", json.RawMessage(`{"name":"fail"}`))
	var rpc *RPCError
	if !errors.As(err, &rpc) {
		t.Fatalf("err %v (%T), want *RPCError", err, err)
	}
	if rpc.Code != -32042 || rpc.Message != "boom" || string(rpc.Data) != `{"why":"because"}` {
		t.Errorf("RPCError %+v data %s", rpc, rpc.Data)
	}
	// An error's data comes as the server wrote it.
	_, err = c.Request(ctx, "tools/call", json.RawMessage(`{"name":"fail_big"}`))
	if !errors.As(err, &rpc) || string(rpc.Data) != bigErrorData {
		t.Errorf("err %v, data %s, want %s", err, rpc.Data, bigErrorData)
	}

	_, err = c.Request(ctx, "no/such", nil)
	if !errors.As(err, &rpc) || rpc.Code != -32601 {
		t.Errorf("unknown method: err %v, want -32601", err)
	}
	for _, bad := range []string{`{"name":`, `[1]`, `"x"`} {
		if _, err := c.Request(ctx, "tools/call", json.RawMessage(bad)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("params %s: err %v, want ErrBadRequest", bad, err)
		}
	}
}

func TestStdioCancelSendsNotification(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	c := start(t, fakeServer(t, "cancel"), Options{Logger: testLogger(&logs)})
	mustConnected(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"slow"}`))
		errc <- err
	}()
	// Cancelled once the fake has it (a request never sent has nothing to
	// cancel).
	logs.waitLog(t, 10*time.Second, "fake got slow")
	cancelled := time.Now()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if d := time.Since(cancelled); d > 3*time.Second {
			t.Errorf("returned %s after the cancel", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not return after its context was cancelled")
	}
	// The fake writes what it got on its stderr, which lands in our log.
	line := logs.waitLog(t, 5*time.Second, "fake got cancelled px-")
	if !strings.Contains(line, `"server":"cancel"`) {
		t.Errorf("log line %s lacks the server name", line)
	}
	if s := c.Snapshot(); s.State != StateConnected {
		t.Errorf("state %s after a cancelled request", s.State)
	}
}

func TestStdioProcessExitMidRequest(t *testing.T) {
	t.Parallel()
	var seen snapshots
	cfg := fakeServer(t, "exits")
	cfg.ReconnectWait = durPtr(0) // no window: the tools go at once
	c := start(t, cfg, Options{OnSnapshot: seen.add})
	mustConnected(t, c)

	began := time.Now()
	_, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"exit"}`))
	if d := time.Since(began); d > time.Duration(cfg.Timeout)/2 {
		t.Errorf("request failed after %s, want well before its %s timeout", d, time.Duration(cfg.Timeout))
	}
	if !errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), "process exited with status 3") {
		t.Fatalf("err %v, want connection lost: process exited with status 3", err)
	}
	s := waitSnapshot(t, c, 5*time.Second, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
	if s.Err == nil || s.Err.Error() != "process exited with status 3" || !errors.Is(s.Err, ErrProcessExited) {
		t.Errorf("snapshot err %v", s.Err)
	}
	if len(s.Tools) != 0 {
		t.Errorf("failed snapshot still lists %d tools", len(s.Tools))
	}
	_, err = c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"echo"}`))
	if !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), `upstream "exits"`) {
		t.Errorf("after exit: err %v, want ErrNotConnected", err)
	}
	states := []State{}
	for _, s := range seen.delivered(t, c) {
		states = append(states, s.State)
	}
	if !reflect.DeepEqual(states, []State{StateConnected, StateFailed}) {
		t.Errorf("OnSnapshot states %v", states)
	}
}

func TestStdioEnvironment(t *testing.T) {
	t.Parallel()
	environ := func() []string {
		return append(os.Environ(), "UPSTREAM_TEST_SECRET=hunter2", "XDG_TEST_DIR=/xdg")
	}
	names := []string{"PATH", "UPSTREAM_TEST_SECRET", "XDG_TEST_DIR", "CFG_VAR"}
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	for _, tc := range []struct {
		name    string
		inherit bool
		want    map[string]json.RawMessage
	}{
		{"filtered", false, map[string]json.RawMessage{
			"PATH": str(os.Getenv("PATH")), "UPSTREAM_TEST_SECRET": json.RawMessage("null"),
			"XDG_TEST_DIR": str("/xdg"), "CFG_VAR": str("from-config"),
		}},
		{"inherit_env", true, map[string]json.RawMessage{
			"PATH": str(os.Getenv("PATH")), "UPSTREAM_TEST_SECRET": str("hunter2"),
			"XDG_TEST_DIR": str("/xdg"), "CFG_VAR": str("from-config"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := fakeServer(t, "env")
			cfg.Env["CFG_VAR"] = "from-config"
			cfg.InheritEnv = tc.inherit
			c := start(t, cfg, Options{Environ: environ})
			mustConnected(t, c)
			got := callTool(t, c, "env", map[string]any{"names": names})
			for _, n := range names {
				if string(got[n]) != string(tc.want[n]) {
					t.Errorf("%s = %s, want %s", n, got[n], tc.want[n])
				}
			}
		})
	}
}

func TestStdioCwd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := fakeServer(t, "cwd")
	cfg.Cwd = dir
	c := start(t, cfg, Options{})
	mustConnected(t, c)
	var got string
	_ = json.Unmarshal(callTool(t, c, "cwd", nil)["cwd"], &got)
	want, _ := filepath.EvalSymlinks(dir)
	if got, _ = filepath.EvalSymlinks(got); got != want {
		t.Errorf("child cwd %q, want %q", got, want)
	}
}

// TestStdioStderrLogged swaps os.Stdout, so it must not run in parallel.
func TestStdioStderrLogged(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	restored := false
	restore := func() {
		if !restored {
			os.Stdout = stdout
			_ = w.Close()
			restored = true
		}
	}
	defer restore()
	captured := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		captured <- string(b)
	}()

	var logs logBuffer
	cfg := fakeServer(t, "noisy")
	cfg.Env["UPSTREAM_FAKE_STDERR"] = "marker-stderr-42 " + strings.Repeat("y", 3*stderrLineMax)
	c := New(cfg, Options{Logger: testLogger(&logs)})
	c.Start(context.Background())
	<-c.Ready()
	line := logs.waitLog(t, 5*time.Second, "marker-stderr-42")
	_ = c.Close()
	restore()

	var entry struct {
		Level, Server, Stream, Message string
	}
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		t.Fatalf("log line %s: %v", line, err)
	}
	if entry.Level != "info" || entry.Server != "noisy" || entry.Stream != "stderr" {
		t.Errorf("log line %s: want level info, server noisy, stream stderr", line)
	}
	if len(entry.Message) > stderrLineMax+len(" [cut]") || !strings.HasSuffix(entry.Message, "[cut]") {
		t.Errorf("long stderr line not cut: %d bytes", len(entry.Message))
	}
	if out := <-captured; strings.Contains(out, "marker-stderr-42") {
		t.Errorf("stderr of the child reached stdout: %q", out)
	}
}

func TestStdioListChangedAndNotifications(t *testing.T) {
	t.Parallel()
	type note struct {
		server, method string
		params         json.RawMessage
	}
	notes := make(chan note, 10)
	var seen snapshots
	c := start(t, fakeServer(t, "dyn"), Options{
		OnSnapshot: seen.add,
		OnNotification: func(server, method string, params json.RawMessage) {
			notes <- note{server, method, params}
		},
	})
	before := mustConnected(t, c)

	callTool(t, c, "add_tool", nil)
	s := waitSnapshot(t, c, 5*time.Second, "tool added", func(s *Snapshot) bool {
		return len(s.Tools) == 5 && s.Tools[4].Name == "added"
	})
	if s.Generation <= before.Generation || s.State != StateConnected || len(s.Resources) != 1 || s.Announced != (Announced{Tools: 1}) {
		t.Errorf("new snapshot: generation %d (was %d), state %s, %d resources, announced %+v", s.Generation, before.Generation, s.State, len(s.Resources), s.Announced)
	}
	if !bytes.Equal(s.Tools[0].Raw, []byte(exoticTool)) {
		t.Errorf("re-discovered exotic tool changed")
	}

	callTool(t, c, "notify", nil)
	select {
	case n := <-notes:
		if n.server != "dyn" || n.method != "notifications/message" {
			t.Errorf("notification %s %s", n.server, n.method)
		}
		var got, want any
		_ = json.Unmarshal(n.params, &got)
		_ = json.Unmarshal([]byte(`{"level":"info","data":{"n":1}}`), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("params %s", n.params)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
	select {
	case n := <-notes:
		t.Errorf("unexpected notification %s (list_changed must not be forwarded)", n.method)
	default:
	}
}

// bigProgress is the params of a progress notification the fake sends
// (notify_big): integers beyond 2^53, keys not in sorted order.
const bigProgress = `{"progressToken":"t-1","progress":9007199254740993,"total":18446744073709551615,"message":"\u003chalf\u003e"}`

// bigErrorData is the data of an error the fake answers (fail_big).
const bigErrorData = `{"z":18446744073709551615,"a":"<b>"}`

// A stdio server's notification reaches OnNotification with its params as
// the server wrote them: no integer rounded, no key moved, no escape
// rewritten.
func TestStdioNotificationKeepsParams(t *testing.T) {
	t.Parallel()
	got := make(chan json.RawMessage, 1)
	c := start(t, fakeServer(t, "big"), Options{
		OnNotification: func(_, method string, params json.RawMessage) {
			if method == "notifications/progress" {
				got <- params
			}
		},
	})
	mustConnected(t, c)
	callTool(t, c, "notify_big", nil)
	select {
	case p := <-got:
		if string(p) != bigProgress {
			t.Errorf("params\n got %s\nwant %s", p, bigProgress)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
}

func TestStdioConnectTimeout(t *testing.T) {
	t.Parallel()
	cfg := fakeServer(t, "silent", "silent")
	cfg.ConnectTimeout = dur(500 * time.Millisecond)
	began := time.Now()
	c := start(t, cfg, Options{})
	// Not the 15 s of fakeServer's connect_timeout (a loaded machine may
	// take a while to kill and reap the child).
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("ready after %s with connect_timeout 500ms", d)
	}
	s := c.Snapshot()
	if s.State != StateFailed || !errors.Is(s.Err, ErrConnectTimeout) || !strings.Contains(s.Err.Error(), "connect timed out after 500ms") {
		t.Errorf("state %s err %v", s.State, s.Err)
	}
}

func TestStdioCommandNotFound(t *testing.T) {
	t.Parallel()
	cfg := fakeServer(t, "missing")
	cfg.Command = "mcp-proxy-test-no-such-command"
	began := time.Now()
	c := start(t, cfg, Options{})
	if d := time.Since(began); d > time.Duration(cfg.ConnectTimeout)/3 {
		t.Errorf("failed after %s, want at once, well before connect_timeout", d)
	}
	s := c.Snapshot()
	if s.State != StateFailed || s.Err == nil || !strings.Contains(s.Err.Error(), `"mcp-proxy-test-no-such-command": executable file not found`) {
		t.Errorf("state %s err %v", s.State, s.Err)
	}
}

func TestStdioRepeatedCursor(t *testing.T) {
	t.Parallel()
	c := start(t, fakeServer(t, "loop", "loopcursor"), Options{})
	s := c.Snapshot()
	if s.State != StateFailed || !errors.Is(s.Err, ErrRepeatedCursor) || !strings.Contains(s.Err.Error(), "tools/list") {
		t.Errorf("state %s err %v", s.State, s.Err)
	}
}

func TestStdioKeepaliveFailure(t *testing.T) {
	t.Parallel()
	cfg := fakeServer(t, "deaf", "noping")
	cfg.Keepalive = dur(200 * time.Millisecond)
	c := start(t, cfg, Options{})
	mustConnected(t, c)
	s := waitSnapshot(t, c, 3*time.Second, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
	if s.Err == nil || !strings.HasPrefix(s.Err.Error(), "keepalive ping failed: ") {
		t.Errorf("err %v", s.Err)
	}
}

// TestStdioRequestEndsWithSession: a call waiting for its answer fails at
// once when its session dies for another reason (here a keepalive ping
// nobody answers), with that reason, not at its own timeout. (Whichever
// comes first ends it: the transport's watch on the session, or the close
// that follows; TestStdioTransportEndedFailsRequests holds the first.)
func TestStdioRequestEndsWithSession(t *testing.T) {
	t.Parallel()
	cfg := fakeServer(t, "deafslow", "noping")
	cfg.Keepalive = dur(300 * time.Millisecond)
	c := start(t, cfg, Options{})
	mustConnected(t, c)
	began := time.Now()
	_, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"slow"}`))
	if d := time.Since(began); d > time.Duration(cfg.Timeout)/2 {
		t.Errorf("request failed after %s, want soon after the failed ping, well before its %s timeout", d, time.Duration(cfg.Timeout))
	}
	if !errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), "keepalive ping failed") {
		t.Fatalf("err %v, want connection lost: keepalive ping failed", err)
	}
}

// TestStdioKeepaliveHealthy: answered pings keep the connection up. The
// interval is also each ping's timeout, so it is long enough for a loaded
// machine to answer within it; the test waits for three answered pings.
// Re-discovery after list_changed shares the pings' goroutine: a tool added
// meanwhile is published, and the pings go on after it.
func TestStdioKeepaliveHealthy(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	cfg := fakeServer(t, "alive", "logpings")
	cfg.Keepalive = dur(500 * time.Millisecond)
	c := start(t, cfg, Options{Logger: testLogger(&logs)})
	mustConnected(t, c)
	waitFor(t, 10*time.Second, "three answered pings", func() bool { return len(logs.lines("fake answered ping")) >= 3 })
	mustConnected(t, c)
	callTool(t, c, "add_tool", nil)
	waitSnapshot(t, c, 5*time.Second, "tool added", func(s *Snapshot) bool {
		return s.State == StateConnected && len(s.Tools) == 5 && s.Tools[4].Name == "added"
	})
	pings := len(logs.lines("fake answered ping"))
	waitFor(t, 10*time.Second, "two more answered pings", func() bool { return len(logs.lines("fake answered ping")) >= pings+2 })
	mustConnected(t, c)
}

func TestStdioResponseTooLarge(t *testing.T) {
	t.Parallel()
	c := start(t, fakeServer(t, "big"), Options{})
	mustConnected(t, c)
	_, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"big"}`))
	if err == nil || !strings.Contains(err.Error(), "exceeds the 1048576-byte limit") {
		t.Fatalf("err %v, want the size limit", err)
	}
	// The connection survives: the next request works.
	callTool(t, c, "pid", nil)
	mustConnected(t, c)
}

func TestStdioAutoProtocol(t *testing.T) {
	t.Parallel()
	t.Run("legacy fallback", func(t *testing.T) {
		t.Parallel()
		cfg := fakeServer(t, "auto")
		cfg.Protocol = "auto"
		c := start(t, cfg, Options{})
		if s := mustConnected(t, c); s.ProtocolVersion != "2025-11-25" || len(s.Tools) != 4 {
			t.Errorf("protocol %q, %d tools", s.ProtocolVersion, len(s.Tools))
		}
	})
	t.Run("stateless core", func(t *testing.T) {
		t.Parallel()
		cfg := fakeServer(t, "modern")
		cfg.Env["UPSTREAM_FAKE"] = "mcpgo"
		cfg.Protocol = "auto"
		c := start(t, cfg, Options{})
		s := mustConnected(t, c)
		if s.ProtocolVersion != "2026-07-28" || !reflect.DeepEqual(toolNames(s.Tools), []string{"hello"}) {
			t.Fatalf("protocol %q, tools %v", s.ProtocolVersion, toolNames(s.Tools))
		}
		raw, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"hello","arguments":{"who":"proxy"}}`))
		if err != nil || !strings.Contains(string(raw), "hello proxy") {
			t.Errorf("call: %s, %v", raw, err)
		}
	})
}

func TestCloseKillsProcessGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		modes []string
		max   time.Duration
	}{
		{"exits on EOF, grandchild left", nil, 2 * time.Second},
		{"ignores EOF and SIGTERM", []string{"ignoreeof", "ignoreterm"}, 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, leader, grandchild := startGroupLeader(t, tc.modes...)

			began := time.Now()
			_ = c.Close()
			if d := time.Since(began); d > tc.max {
				t.Errorf("Close took %s, want < %s", d, tc.max)
			}
			for _, pid := range []int{leader, grandchild} {
				if processAlive(pid) {
					t.Errorf("pid %d still alive after Close", pid)
				}
			}
			if s := c.Snapshot(); s.State != StateClosed {
				t.Errorf("state %s after Close", s.State)
			}
		})
	}
}

// startGroupLeader connects a fake server run by a shell that first starts
// a grandchild in the server's process group; it returns the server's pid
// and the grandchild's.
func startGroupLeader(t *testing.T, modes ...string) (c *Conn, leader, grandchild int) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	cfg := fakeServer(t, "group", modes...)
	cfg.Args = []string{"-c", `sleep 1000 & echo $! > "$1"; exec "$0"`, cfg.Command, pidFile}
	cfg.Command = "sh"
	c = start(t, cfg, Options{})
	mustConnected(t, c)
	_ = json.Unmarshal(callTool(t, c, "pid", nil)["pid"], &leader)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	if leader <= 0 || grandchild <= 0 || !processAlive(grandchild) {
		t.Fatalf("leader %d grandchild %d", leader, grandchild)
	}
	return c, leader, grandchild
}

// KillGroups ends the process group of a server still being closed at
// once, where Close would give it 2 s after its stdin ends and 3 s after
// SIGTERM: what a shutdown does when its budget ran out. Not parallel:
// KillGroups kills every server of the process, and the parallel tests
// start theirs only after the sequential ones have run.
func TestKillGroupsDuringClose(t *testing.T) {
	c, leader, grandchild := startGroupLeader(t, "ignoreeof", "ignoreterm")
	closed := make(chan struct{})
	go func() {
		_ = c.Close()
		close(closed)
	}()
	time.Sleep(200 * time.Millisecond) // Close is in its stdin grace
	KillGroups()
	deadline := time.Now().Add(time.Second)
	for _, pid := range []int{leader, grandchild} {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if processAlive(pid) {
			t.Errorf("pid %d alive 1 s after KillGroups", pid)
		}
	}
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		t.Error("Close did not return after its group was killed")
	}
}

// processAlive reports whether pid runs; a zombie (killed, waiting to be
// reaped by init) is dead.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	st, ok := parseStat(stat)
	return !ok || st.state != 'Z'
}

func TestConnIsolation(t *testing.T) {
	t.Parallel()
	silent := fakeServer(t, "stuck", "silent")
	stuck := New(silent, Options{})
	stuck.Start(context.Background())
	t.Cleanup(func() { _ = stuck.Close() })

	began := time.Now()
	c := start(t, fakeServer(t, "fine"), Options{})
	mustConnected(t, c)
	callTool(t, c, "pid", nil)
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("healthy server took %s next to a stuck one", d)
	}
	if s := stuck.Snapshot(); s.State != StateConnecting {
		t.Errorf("stuck server state %s", s.State)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStdioExitDuringConnect(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	cfg := fakeServer(t, "crash")
	cfg.Command, cfg.Args = "sh", []string{"-c", "echo cannot start >&2; exit 7"}
	began := time.Now()
	c := start(t, cfg, Options{Logger: testLogger(&logs)})
	if d := time.Since(began); d > time.Duration(cfg.ConnectTimeout)/3 {
		t.Errorf("failed after %s, want at once, well before connect_timeout", d)
	}
	s := c.Snapshot()
	if s.State != StateFailed || s.Err == nil || s.Err.Error() != "process exited with status 7; last stderr: cannot start" ||
		!errors.Is(s.Err, ErrProcessExited) {
		t.Errorf("state %s err %v", s.State, s.Err)
	}
	logs.waitLog(t, 5*time.Second, `"stream":"stderr"`, "cannot start")
	// Logged once, as "upstream down", with the retry wait as a duration.
	logs.waitLog(t, 5*time.Second, `"message":"upstream down"`)
	down := logs.lines(`"message":"upstream down"`)
	if len(down) != 1 || !strings.Contains(down[0], `"error":"process exited with status 7; last stderr: cannot start"`) ||
		!strings.Contains(down[0], `"retry_in":"1h0m0s"`) || !strings.Contains(down[0], `"state":"failed"`) {
		t.Errorf("upstream down lines: %q", down)
	}
}

// TestStdioStdoutClosed: a connected child that closes its stdout has
// ended for its session. One that then exits within stdoutEOFGrace is
// reported by its exit status; one that keeps running is reported as having
// closed its stdout once the grace is over. Either way with its last stderr
// lines, and long before the call's timeout.
func TestStdioStdoutClosed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tool, want string
	}{
		{"close_stdout_exit", "process exited with status 5; last stderr: closing stdout"},
		{"close_stdout", "process closed its stdout; last stderr: closing stdout"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			cfg := fakeServer(t, "closer")
			cfg.ReconnectWait = durPtr(0)
			c := start(t, cfg, Options{})
			mustConnected(t, c)
			began := time.Now()
			_, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"`+tc.tool+`"}`))
			if d := time.Since(began); d > time.Duration(cfg.Timeout)/2 {
				t.Errorf("request failed after %s, want well before its %s timeout", d, time.Duration(cfg.Timeout))
			}
			if !errors.Is(err, ErrConnectionLost) {
				t.Fatalf("err %v, want connection lost", err)
			}
			s := waitSnapshot(t, c, 5*time.Second, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
			if s.Err == nil || s.Err.Error() != tc.want {
				t.Errorf("snapshot err %v; want %s", s.Err, tc.want)
			}
		})
	}
}

// TestStdioExitErrorCarriesStderrTail: a child that fails at start (an npx
// package that does not exist) says why on stderr; the connection's error
// carries its last lines, sanitized and bounded, and the first ones go
// (they are no error: an error line among the first is kept, see
// TestStdioMistypedNpxPackage).
func TestStdioExitErrorCarriesStderrTail(t *testing.T) {
	t.Parallel()
	cfg := fakeServer(t, "npxlike")
	script := `for i in 1 2 3 4 5 6 7; do echo "npm notice line $i" >&2; done
echo "npm error 404 Not Found - GET https://registry.example/pkg?access_token=abcdef123456 token=hunter2secret" >&2
echo "" >&2
printf 'npm error %0300d\n' 0 >&2
exit 1`
	cfg.Command, cfg.Args = "sh", []string{"-c", script}
	c := start(t, cfg, Options{})
	s := c.Snapshot()
	if s.State != StateFailed || s.Err == nil {
		t.Fatalf("state %s err %v", s.State, s.Err)
	}
	msg := s.Err.Error()
	if !strings.HasPrefix(msg, "process exited with status 1; last stderr: ") || !errors.Is(s.Err, ErrProcessExited) {
		t.Fatalf("err %q", msg)
	}
	tail := strings.TrimPrefix(msg, "process exited with status 1; last stderr: ")
	for _, want := range []string{"npm notice line 7", "npm error 404 Not Found - GET https://registry.example/pkg", "token=[REDACTED]", "npm error 000"} {
		if !strings.Contains(tail, want) {
			t.Errorf("tail lacks %q: %q", want, tail)
		}
	}
	for _, gone := range []string{"line 3 ", "abcdef123456", "hunter2secret", "access_token"} {
		if strings.Contains(tail, gone) {
			t.Errorf("tail holds %q: %q", gone, tail)
		}
	}
	if n := utf8.RuneCountInString(tail); n > stderrTailRunes {
		t.Errorf("tail is %d runes, want at most %d", n, stderrTailRunes)
	}
}

func TestStderrTail(t *testing.T) {
	var tail stderrTail
	if got := tail.text(); got != "" {
		t.Errorf("empty tail = %q", got)
	}
	if err := tail.withTail(ErrProcessExited); err != ErrProcessExited {
		t.Errorf("withTail of an empty tail = %v", err)
	}
	for i := 1; i <= 7; i++ {
		tail.add(fmt.Sprintf("l%d", i))
	}
	if got := tail.text(); got != "l3 | l4 | l5 | l6 | l7" {
		t.Errorf("text = %q", got)
	}
	tail.add(strings.Repeat("é", 3*stderrTailLineRunes))
	tail.add(strings.Repeat("z", stderrTailLineRunes-10) + "end")
	got := tail.text()
	if n := utf8.RuneCountInString(got); n != stderrTailRunes || !strings.HasPrefix(got, "…é") || !strings.HasSuffix(got, "zend") ||
		!strings.Contains(got, "é… | z") {
		t.Errorf("long tail: %d runes: %q", n, got)
	}
}

func TestStdioNotify(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	c := start(t, fakeServer(t, "notify"), Options{Logger: testLogger(&logs)})
	mustConnected(t, c)
	if err := c.Notify(context.Background(), "notifications/cancelled", json.RawMessage(`{"requestId":"down-7","reason":"user"}`)); err != nil {
		t.Fatal(err)
	}
	logs.waitLog(t, 5*time.Second, "fake got cancelled down-7")
	if err := c.Notify(context.Background(), "notifications/cancelled", json.RawMessage(`[1]`)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("array params: err %v", err)
	}
}
