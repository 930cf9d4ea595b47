package integration

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReloadOnSIGHUP: SIGHUP applies an edited config without a restart
// (SPEC §3): an added server connects and a removed one closes, and a
// config that does not load leaves the running one in force.
func TestReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	first := writeConfig(t, "blobs: {mode: passthrough}", fixtureServer("one", []string{"-no-weird"}))
	url, p := startHTTPProxy(t, first)
	before := sdkHTTP(t, url, nil, nil)
	if names := toolNames(listTools(t, before)); !hasName(names, "one__echo") {
		t.Fatalf("before reload: %v", names)
	}

	// Replace the server: "one" removed, "two" added.
	second := writeConfig(t, "blobs: {mode: passthrough}", fixtureServer("two", []string{"-no-weird"}))
	data, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(first, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	var names []string
	for time.Now().Before(deadline) {
		after := sdkHTTP(t, url, nil, nil)
		names = toolNames(listTools(t, after))
		if hasName(names, "two__echo") && !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "one__") }) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !hasName(names, "two__echo") || hasName(names, "one__echo") {
		t.Fatalf("after reload a new session lists %v; want two__* and no one__*", names)
	}
	if got := contentText(callTool(t, sdkHTTP(t, url, nil, nil), "two__echo", map[string]any{"text": "reloaded"})); got != "reloaded" {
		t.Fatalf("two__echo after reload: %q", got)
	}
	if !strings.Contains(p.stderr.String(), `"added":"two"`) || !strings.Contains(p.stderr.String(), `"removed":"one"`) {
		t.Errorf("no reload log line naming the added and removed servers:\n%s", tail(p.stderr.String(), 3000))
	}

	// A config that does not load is refused and the running one stays.
	if err := os.WriteFile(first, []byte("servers:\n  bad name: {command: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if got := contentText(callTool(t, sdkHTTP(t, url, nil, nil), "two__echo", map[string]any{"text": "still"})); got != "still" {
		t.Fatalf("after a bad reload: %q", got)
	}
	if !strings.Contains(p.stderr.String(), "config reload failed; the running config stays in force") {
		t.Errorf("no log line for the refused reload:\n%s", tail(p.stderr.String(), 2000))
	}
}
