//go:build redis

package downstream

import (
	"net/http"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

const levelReplicasYAML = `
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
bundles:
  all: {servers: [fx]}
agents:
  a: {mcp_bundles: [all]}
default_agent: a
`

// TestLevelSetOnAnotherReplica: a session's logging/setLevel, made on one
// replica, reaches the upstream of another replica before that replica
// answers the session's first request there, and again when the level
// changes on the first replica: each replica's server logs at the level
// the client asked for, whichever replica serves it. A request that
// brings no change tells the upstream nothing again.
func TestLevelSetOnAnotherReplica(t *testing.T) {
	srv := redistest.Start(t)
	var levels []func() []string
	var urls []string
	for range 2 {
		up, got := logLevelUpstream()
		p := New(Options{Config: parseConfig(t, levelReplicasYAML), Upstreams: map[string]Upstream{"fx": up}, Logger: zerolog.Nop(),
			Version: "test", Store: redisStore(t, srv)})
		p.Refresh()
		levels = append(levels, got)
		urls = append(urls, startHTTP(t, p).URL+"/mcp")
	}
	c := &httpClient{t: t, url: urls[0]}
	c.initialize()
	at := func(i int) *httpClient { return &httpClient{t: t, url: urls[i], session: c.session} }
	post := func(i int, msg string) {
		t.Helper()
		if r := at(i).post(msg); r.status != http.StatusOK {
			t.Fatalf("replica %d: %s: %d %s", i+1, msg, r.status, r.body)
		}
	}
	want := func(i int, want ...string) {
		t.Helper()
		if got := levels[i](); !slices.Equal(got, want) {
			t.Errorf("replica %d's upstream got levels %v, want %v", i+1, got, want)
		}
	}

	post(0, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}}`)
	post(1, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	want(1, "error")
	post(1, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	want(1, "error")
	post(0, `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}`)
	post(1, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	want(1, "error", "debug")
}
