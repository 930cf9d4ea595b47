package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartupSummaryCountsWhatIsListed: the startup summary and
// mcp_proxy_upstream_tools count each server's tools after its
// tools.include/exclude, and exposed_tools adds the proxy's own tools
// (the fixture offers resources and prompts: mcp_resources and
// mcp_prompts), which is what tools/list shows an agent granted everything.
func TestStartupSummaryCountsWhatIsListed(t *testing.T) {
	excluded := []string{"crash", "hang", "bad_json"}
	cfgText := fmt.Sprintf(`
startup_wait: 30s
blobs: {mode: passthrough}
log: {level: info, format: json}
metrics: {listen: "127.0.0.1:0"}
servers:
  fx:
    command: %q
    args: ["-name", "fx"]
    connect_timeout: 30s
    tools:
      exclude: ["crash", "hang", "bad_*"]
`, fixtureBin(t))
	path := writeFile(t, "mcp-proxy.yaml", cfgText)
	listed := len(toolsJSON(t, "--config", path).Servers[0].Tools)
	if listed < 10 {
		t.Fatalf("tools lists %d fixture tools; the fixture has more", listed)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	defer inW.Close()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", path}, inR, io.Discard, &stderr) }()
	defer func() {
		inW.Close()
		<-done
	}()

	summary := waitLogLine(t, &stderr, "startup summary")
	var line struct {
		Servers, Connected, UpstreamTools, ExposedTools, OwnTools int
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(summary), &raw); err != nil {
		t.Fatalf("summary line is not JSON: %q", summary)
	}
	num := func(k string) int {
		f, ok := raw[k].(float64)
		if !ok {
			t.Fatalf("summary has no number %s: %s", k, summary)
		}
		return int(f)
	}
	line.Servers, line.Connected = num("servers"), num("connected")
	line.UpstreamTools, line.ExposedTools, line.OwnTools = num("upstream_tools"), num("exposed_tools"), num("own_tools")
	if line.Servers != 1 || line.Connected != 1 || line.UpstreamTools != listed+len(excluded) ||
		line.OwnTools != 2 || line.ExposedTools != listed+2 {
		t.Errorf("summary %s: want upstream_tools=%d (before the filter), exposed_tools=%d (%d tools + mcp_resources, mcp_prompts)",
			summary, listed+len(excluded), listed+2, listed)
	}

	m := regexp.MustCompile(`"url":"(http://[^"]+/metrics)"[^\n]*"message":"serving metrics"`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no metrics URL in the log:\n%s", stderr.String())
	}
	url := m[1]
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `mcp_proxy_upstream_tools{server="fx"} ` + strconv.Itoa(listed) + "\n"
	if !strings.Contains(string(body), want) {
		t.Errorf("metrics lack %q:\n%s", want, grepLines(string(body), "mcp_proxy_upstream_tools"))
	}
}

// waitLogLine waits for a log line containing msg and returns it.
func waitLogLine(t *testing.T, b *syncBuffer, msg string) string {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.Contains(l, msg) {
				return l
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line %q; log:\n%s", msg, b.String())
	return ""
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
