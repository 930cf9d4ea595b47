package deploy

import (
	"os"
	"strings"
	"testing"
)

const nginxRedisPath = "nginx/mcp-proxy-redis.conf"

// TestNginxRedisConfig: the round-robin example for replicas sharing Redis
// has one upstream of several equal servers (no backup, no hashing or
// stickiness), passes the session id through untouched, and streams.
func TestNginxRedisConfig(t *testing.T) {
	data, err := os.ReadFile(nginxRedisPath)
	if err != nil {
		t.Fatal(err)
	}
	top, err := parseNginx(string(data))
	if err != nil {
		t.Fatalf("%s: %v", nginxRedisPath, err)
	}
	ups := find(top, "upstream")
	if len(ups) != 1 || len(ups[0].args) != 1 {
		t.Fatalf("want one named upstream, got %d", len(ups))
	}
	servers := find(ups[0].block, "server")
	if len(servers) < 2 {
		t.Errorf("the upstream has %d servers; round robin wants several", len(servers))
	}
	for _, s := range servers {
		if strings.Contains(strings.Join(s.args, " "), "backup") {
			t.Errorf("line %d: a backup server; every replica serves every session", s.line)
		}
	}
	for _, d := range []string{"hash", "ip_hash", "sticky", "least_conn"} {
		if len(find(ups[0].block, d)) > 0 {
			t.Errorf("the upstream uses %s: the Redis mode needs no affinity", d)
		}
	}
	if len(find(top, "map")) > 0 || strings.Contains(string(data), "proxy_set_header Mcp-Session-Id") {
		t.Error("the session id is rewritten; with Redis it passes through unchanged")
	}
	loc := find(find(top, "server")[0].block, "location")
	if len(loc) != 1 {
		t.Fatal("want one location")
	}
	want := map[string]string{"proxy_pass": "http://" + ups[0].args[0], "proxy_buffering": "off", "proxy_http_version": "1.1"}
	for name, v := range want {
		got := find(loc[0].block, name)
		if len(got) != 1 || strings.Join(got[0].args, " ") != v {
			t.Errorf("%s: want %q", name, v)
		}
	}
}
