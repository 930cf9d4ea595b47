package integration

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// orphanChild waits for the child of parent whose command line starts with
// prefix and returns its pid (0 if none within d).
func orphanChild(parent int, d time.Duration, prefix ...string) int {
	deadline := time.Now().Add(d)
	for {
		for _, c := range rsChildren(parent) {
			if args := rsCmdline(c); len(args) >= len(prefix) && slices.Equal(args[:len(prefix)], prefix) {
				return c
			}
		}
		if time.Now().After(deadline) {
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxyPIDOf returns the pid of an HTTP proxy started by startHTTPProxy.
func proxyPIDOf(p *proc) int { return p.cmd.Process.Pid }

// TestSIGKILLedProxyLeavesNoChildren is issue 12, item 11: a stdio server
// that is a wrapper (like npx: a shell that runs the real server as its
// child, and something else after it) dies with the proxy even when the
// proxy is killed with SIGKILL and can clean nothing up: the kernel sends it
// the parent-death signal, and the real server, its child, sees its stdin
// end. Before, the wrapper outlived the proxy and started its `sleep`.
func TestSIGKILLedProxyLeavesNoChildren(t *testing.T) {
	t.Parallel()
	script := `"$0" -no-weird -name fxk; exec sleep 1000`
	cfg := writeConfig(t, "blobs: {mode: passthrough}\n", stdioServer("fxk", "/bin/sh", []string{"-c", script, fixtureBin}))
	url, p := startHTTPProxy(t, cfg)
	p.cleanExit = false // it is killed
	if names := toolNames(listTools(t, sdkHTTP(t, url, nil, nil))); !hasName(names, "fxk__echo") {
		t.Fatalf("tools: %v", names)
	}
	proxy := proxyPIDOf(p)
	wrapper := orphanChild(proxy, 10*time.Second, "/bin/sh", "-c")
	if wrapper == 0 {
		t.Fatalf("no shell child under the proxy (pid %d): %v", proxy, rsChildren(proxy))
	}
	server := rsFixtureChild(wrapper, "fxk", 10*time.Second)
	if server == 0 {
		t.Fatalf("no fixture under the wrapper (pid %d): %v", wrapper, rsChildren(wrapper))
	}

	killed := time.Now()
	if err := syscall.Kill(proxy, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	left := rsWaitGone([]int{wrapper, server}, rsGoneWait)
	t.Logf("MEASURE proxy SIGKILLed: wrapper and server gone %s later (left: %v)", time.Since(killed).Round(time.Millisecond), left)
	for _, pid := range left {
		t.Errorf("process %d (%q) outlived the SIGKILLed proxy by %s", pid, strings.Join(rsCmdline(pid), " "), rsGoneWait)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// What the wrapper may have started once its server ended.
	for _, pid := range rsChildren(wrapper) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestShutdownEndsEscapedGrandchild is issue 12, item 11: a grandchild that
// left its server's process group and session (setsid) escapes the group
// kill at shutdown; the proxy, as the child subreaper, adopts it when its
// parent ends (collecting it when it dies) and ends it at shutdown. Before,
// it was adopted by init and lived on.
func TestShutdownEndsEscapedGrandchild(t *testing.T) {
	t.Parallel()
	script := `setsid sleep 1000 </dev/null >/dev/null 2>&1 & exec "$0" -no-weird -name fxe`
	cfg := writeConfig(t, "blobs: {mode: passthrough}\n", stdioServer("fxe", "/bin/sh", []string{"-c", script, fixtureBin}))
	url, p := startHTTPProxy(t, cfg)
	if names := toolNames(listTools(t, sdkHTTP(t, url, nil, nil))); !hasName(names, "fxe__echo") {
		t.Fatalf("tools: %v", names)
	}
	proxy := proxyPIDOf(p)
	server := rsFixtureChild(proxy, "fxe", 10*time.Second)
	if server == 0 {
		t.Fatalf("no fixture child under the proxy (pid %d): %v", proxy, rsChildren(proxy))
	}
	escaped := orphanChild(server, 10*time.Second, "sleep", "1000")
	if escaped == 0 {
		t.Fatalf("no `sleep 1000` under the server (pid %d): %v", server, rsChildren(server))
	}
	if _, pgid, _, _ := rsProcStat(escaped); pgid == server {
		t.Fatalf("the grandchild did not leave its server's process group")
	}

	// The server crashes: its escaped grandchild comes to the proxy, and
	// when it dies the proxy collects it (no zombie stays behind).
	if _, err := rsCall(sdkHTTP(t, url, nil, nil), "fxe__crash", map[string]any{}, callTimeout); err == nil {
		t.Fatal("fxe__crash answered")
	}
	deadline := time.Now().Add(10 * time.Second)
	for ppid, _, _, _ := rsProcStat(escaped); ppid != proxy; ppid, _, _, _ = rsProcStat(escaped) {
		if time.Now().After(deadline) {
			t.Fatalf("the orphan's parent is %d, not the proxy (%d): the proxy is not its subreaper", ppid, proxy)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(escaped, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline = time.Now().Add(rsGoneWait); ; time.Sleep(20 * time.Millisecond) {
		if _, _, _, ok := rsProcStat(escaped); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead orphan %d is still a zombie of the proxy", escaped)
		}
	}

	// The server restarts with a new escaped grandchild; the proxy's
	// shutdown ends it.
	server = 0
	for deadline = time.Now().Add(20 * time.Second); server == 0 && time.Now().Before(deadline); {
		server = rsFixtureChild(proxy, "fxe", time.Second)
	}
	if escaped = orphanChild(server, 10*time.Second, "sleep", "1000"); server == 0 || escaped == 0 {
		t.Fatalf("the server did not restart with its grandchild (server %d)", server)
	}
	if err := syscall.Kill(proxy, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, rsShutdownBound); err != nil {
		t.Errorf("the proxy exited with %v after SIGTERM, want status 0", err)
	}
	if left := rsWaitGone([]int{server, escaped}, rsGoneWait); len(left) > 0 {
		for _, pid := range left {
			t.Errorf("process %d (%q) outlived the proxy", pid, strings.Join(rsCmdline(pid), " "))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
