package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestServeHTTPLogsURLs: the line that says where to point a client names
// the local URL, and under listen.auth also the endpoint's public URL (the
// resource tokens are issued for) and its protected resource metadata.
func TestServeHTTPLogsURLs(t *testing.T) {
	tests := []struct {
		name   string
		listen string
		want   map[string]string // fields of the line besides url; "" means absent
	}{
		{
			name:   "oauth behind a path prefix",
			listen: "public_url: https://mcp.example.com/team/\n  auth: {issuer: https://login.example.com, required_scopes: [mcp]}\nagents:\n  eng: {match: {groups: eng}}\n",
			want: map[string]string{
				"public_url":        "https://mcp.example.com/team/mcp",
				"resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource/team/mcp",
			},
		},
		{
			name:   "no oauth",
			listen: "\n",
			want:   map[string]string{"public_url": "", "resource_metadata": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "mcp-proxy.yaml", "log: {level: info, format: json}\nblobs: {mode: passthrough}\nservers: {}\nlisten:\n  transport: http\n  "+tt.listen)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var stderr syncBuffer
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"serve", "--config", path, "--listen", "127.0.0.1:0"}, strings.NewReader(""), &syncBuffer{}, &stderr)
			}()
			line := waitServing(t, &stderr, done)
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve returned %v after its context ended", err)
			}
			if u, _ := line["url"].(string); !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/mcp") {
				t.Errorf("url = %q", u)
			}
			for k, want := range tt.want {
				got, _ := line[k].(string)
				if got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// waitServing polls stderr (bounded) for the serving line and returns its
// fields; it fails if serve ends first.
func waitServing(t *testing.T, stderr *syncBuffer, done <-chan error) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "serving MCP over Streamable HTTP; point your MCP client at this URL" {
				return m
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended before serving: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no serving line:\n%s", stderr.String())
	return nil
}
