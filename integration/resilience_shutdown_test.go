package integration

import (
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rsShutdownBound is the bound of docs/operations.md#shutdown-and-reload on the whole shutdown (seed: 15 s).
const rsShutdownBound = 15 * time.Second

// rsShutdownConfig has two stdio upstreams: fx runs the fixture through
// `sh -c 'sleep 1000 & exec fixture'`, so that it has a grandchild in its
// process group, and records its calls; fx2 is a plain fixture.
func rsShutdownConfig(t testing.TB) (cfg, record string) {
	t.Helper()
	record = t.TempDir() + "/fx.record.jsonl"
	script := "sleep 1000 & exec " + rsShellQuote(fixtureBin) + " -no-weird -name fx"
	cfg = writeConfig(t, "",
		stdioServer("fx", "/bin/sh", []string{"-c", script}, "env: {FIXTURE_RECORD: "+q(record)+"}"),
		fixtureServer("fx2", []string{"-no-weird", "-name", "fx2"}),
	)
	return cfg, record
}

// rsTree is what a proxy started: its upstream processes (the fixtures and
// fx's grandchild) and their process groups.
type rsTree struct {
	pids   []int
	groups []int
}

// rsUpstreamTree finds the upstreams of the proxy with pid proxyPID.
func rsUpstreamTree(t testing.TB, proxyPID int) rsTree {
	t.Helper()
	var tree rsTree
	for _, name := range []string{"fx", "fx2"} {
		pid := rsFixtureChild(proxyPID, name, 10*time.Second)
		if pid == 0 {
			t.Fatalf("no fixture child -name %s under the proxy (pid %d)", name, proxyPID)
		}
		_, pgid, _, _ := rsProcStat(pid)
		if pgid == proxyPID {
			t.Errorf("upstream %s runs in the proxy's process group; it must have its own", name)
		}
		tree.pids = append(tree.pids, pid)
		tree.groups = append(tree.groups, pgid)
		if name == "fx" {
			kids := rsChildren(pid)
			if len(kids) != 1 || !strings.HasSuffix(strings.Join(rsCmdline(kids[0]), " "), "sleep 1000") {
				t.Fatalf("fx (pid %d) has children %v, want its `sleep 1000` grandchild", pid, kids)
			}
			tree.pids = append(tree.pids, kids[0])
		}
	}
	return tree
}

// check fails the test if any process of the tree, or of its groups, still
// runs shortly after the proxy ended.
func (tree rsTree) check(t testing.TB) {
	t.Helper()
	if left := rsWaitGone(tree.pids, rsGoneWait); len(left) > 0 {
		for _, p := range left {
			t.Errorf("upstream process %d (%q) outlived the proxy", p, strings.Join(rsCmdline(p), " "))
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	for _, g := range tree.groups {
		if left := rsGroupMembers(g); len(left) > 0 {
			t.Errorf("process group %d of an upstream still has %v after the proxy ended", g, left)
			_ = syscall.Kill(-g, syscall.SIGKILL)
		}
	}
}

// rsRawListed polls a raw client's tools/list until every name is listed.
func rsRawListed(t testing.TB, c rawClient, names ...string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		got, _ := toolsOf(t, rawResult(t, c, "tools/list", "{}"))
		all := true
		for _, n := range names {
			all = all && hasName(got, n)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools/list lacks some of %v: %v", names, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rsSend writes one request to a raw stdio client without waiting.
func rsSend(t testing.TB, c *stdioRaw, id int, method, params string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.write(t, envelope(id, method, params))
}

// rsAwaitStdio reads the raw client's stdout until the response to id.
func rsAwaitStdio(t testing.TB, c *stdioRaw, id int, d time.Duration) *rpcMsg {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("stdout ended before the response to id %d", id)
			}
			if m, err := parseMsg(line); err == nil && m.isResponseTo(id) {
				return m
			}
		case <-timer.C:
			t.Fatalf("no response to id %d within %s", id, d)
		}
	}
}

// rsSlept checks that a raw tools/call response is the sleep tool's result.
func rsSlept(t testing.TB, m *rpcMsg) {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil || r.IsError || len(r.Content) != 1 || r.Content[0].Text != "slept" {
		t.Errorf("the call in flight at shutdown did not complete: %s", m.Raw)
	}
}

// TestShutdownSIGTERMStdio: SIGTERM to a stdio proxy with a 3 s call in
// flight: the call completes, the proxy exits 0 within 15 s, and no process
// of its upstreams' process groups (the grandchild included) remains.
func TestShutdownSIGTERMStdio(t *testing.T) {
	t.Parallel()
	cfg, record := rsShutdownConfig(t)
	c := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	rawInit(t, c)
	rsRawListed(t, c, "fx__sleep", "fx2__echo")
	pid := c.p.cmd.Process.Pid
	tree := rsUpstreamTree(t, pid)

	rsSend(t, c, 900, "tools/call", callParams("fx__sleep", `{"ms":3000}`))
	if !rsWaitRecord(t, record, 10*time.Second, `"tool":"sleep"`) {
		t.Fatal("the sleep call did not reach the fixture")
	}
	signalled := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rsSlept(t, rsAwaitStdio(t, c, 900, rsShutdownBound))
	done := time.Since(signalled)
	err := c.p.wait(t, rsShutdownBound)
	exited := time.Since(signalled)
	t.Logf("MEASURE stdio SIGTERM: call answered %s, proxy exited %s after the signal", done.Round(time.Millisecond), exited.Round(time.Millisecond))
	if code := exitCode(t, err); code != 0 {
		t.Errorf("the proxy exited %d after SIGTERM, want 0", code)
	}
	if exited > rsShutdownBound {
		t.Errorf("the proxy took %s to exit after SIGTERM, want at most %s", exited, rsShutdownBound)
	}
	tree.check(t)
}

// TestShutdownSIGTERMHTTP: the same over Streamable HTTP, with the go-sdk
// client's call in flight.
func TestShutdownSIGTERMHTTP(t *testing.T) {
	t.Parallel()
	cfg, record := rsShutdownConfig(t)
	url, p := startHTTPProxy(t, cfg)
	cs := sdkHTTP(t, url, nil, nil)
	rsWaitListed(t, cs, callTimeout, "fx__sleep", "fx2__echo")
	tree := rsUpstreamTree(t, p.cmd.Process.Pid)

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	out := make(chan outcome, 1)
	go func() {
		res, err := rsCall(cs, "fx__sleep", map[string]any{"ms": 3000}, callTimeout)
		out <- outcome{res, err}
	}()
	if !rsWaitRecord(t, record, 10*time.Second, `"tool":"sleep"`) {
		t.Fatal("the sleep call did not reach the fixture")
	}
	signalled := time.Now()
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-out:
		if o.err != nil || o.res.IsError || contentText(o.res) != "slept" {
			t.Errorf("the call in flight at SIGTERM: err %v result %s, want slept", o.err, rsJSON(o.res))
		}
	case <-time.After(rsShutdownBound):
		t.Fatal("the call in flight at SIGTERM got no answer")
	}
	done := time.Since(signalled)
	err := p.wait(t, rsShutdownBound)
	exited := time.Since(signalled)
	t.Logf("MEASURE http SIGTERM: call answered %s, proxy exited %s after the signal", done.Round(time.Millisecond), exited.Round(time.Millisecond))
	if code := exitCode(t, err); code != 0 {
		t.Errorf("the proxy exited %d after SIGTERM, want 0", code)
	}
	if exited > rsShutdownBound {
		t.Errorf("the proxy took %s to exit after SIGTERM, want at most %s", exited, rsShutdownBound)
	}
	tree.check(t)
}

// TestShutdownStdinEOF: a stdio proxy whose stdin ends with a call in flight
// answers the call, exits 0 and leaves no upstream process behind.
func TestShutdownStdinEOF(t *testing.T) {
	t.Parallel()
	cfg, record := rsShutdownConfig(t)
	c := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	rawInit(t, c)
	rsRawListed(t, c, "fx__sleep", "fx2__echo")
	tree := rsUpstreamTree(t, c.p.cmd.Process.Pid)

	rsSend(t, c, 901, "tools/call", callParams("fx__sleep", `{"ms":2000}`))
	if !rsWaitRecord(t, record, 10*time.Second, `"tool":"sleep"`) {
		t.Fatal("the sleep call did not reach the fixture")
	}
	closed := time.Now()
	var answer *rpcMsg
	for _, line := range c.closeAndDrain(t) {
		if m, err := parseMsg(line); err == nil && m.isResponseTo(901) {
			answer = m
		}
	}
	if answer == nil {
		t.Error("the call in flight at stdin EOF got no answer before stdout ended")
	} else {
		rsSlept(t, answer)
	}
	err := c.p.wait(t, rsShutdownBound)
	t.Logf("MEASURE stdin EOF: proxy exited %s after stdin closed", time.Since(closed).Round(time.Millisecond))
	if code := exitCode(t, err); code != 0 {
		t.Errorf("the proxy exited %d after stdin EOF, want 0", code)
	}
	tree.check(t)
}

// TestShutdownHostKilled: the host that started a stdio proxy is killed with
// SIGKILL (here a shell session `sleep 1000 | mcp-proxy serve`: the shell and
// the writer of the proxy's stdin die). The proxy's stdin ends, so it exits
// and takes its upstreams, grandchild included, with it.
func TestShutdownHostKilled(t *testing.T) {
	t.Parallel()
	cfg, _ := rsShutdownConfig(t)
	ready := make(chan struct{})
	onLine := func(line string) {
		if strings.Contains(line, `"startup summary"`) && strings.Contains(line, `"connected":2`) {
			select {
			case <-ready:
			default:
				close(ready)
			}
		}
	}
	host := exec.Command("/bin/sh", "-c", `sleep 1000 | "$0" serve --config "$1"`, proxyBin, cfg)
	host.Env = proxyEnv()
	hp := startProc(t, "host shell", host, onLine)
	select {
	case <-ready:
	case <-hp.done:
		t.Fatalf("the host shell ended early: %v\n%s", hp.err, tail(hp.stderr.String(), 4000))
	case <-time.After(startTimeout):
		t.Fatalf("the proxy logged no startup summary with both servers connected\n%s", tail(hp.stderr.String(), 4000))
	}
	shell := host.Process.Pid
	var proxyPID, writer int
	for _, p := range rsGroupMembers(shell) {
		switch args := rsCmdline(p); {
		case len(args) > 0 && args[0] == proxyBin:
			proxyPID = p
		case len(args) == 2 && strings.HasSuffix(args[0], "sleep") && args[1] == "1000":
			writer = p
		}
	}
	if proxyPID == 0 || writer == 0 {
		t.Fatalf("cannot find the proxy (%d) and the writer of its stdin (%d) in the host's group %v", proxyPID, writer, rsGroupMembers(shell))
	}
	tree := rsUpstreamTree(t, proxyPID)
	killed := time.Now()
	for _, p := range []int{shell, writer} {
		if p != proxyPID {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	if left := rsWaitGone([]int{proxyPID}, rsShutdownBound); len(left) > 0 {
		t.Errorf("the proxy still runs %s after its host was killed", rsShutdownBound)
		_ = syscall.Kill(proxyPID, syscall.SIGKILL)
	}
	t.Logf("MEASURE host killed: the proxy exited %s later", time.Since(killed).Round(time.Millisecond))
	tree.check(t)
}
