package downstream

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// A login that starts before the host connects is put to the host when it
// initializes with URL-mode elicitation; a host without it is never asked.
func TestAskToOpenOverStdio(t *testing.T) {
	oa := &fakeUpstream{}
	oa.snap.Store(&upstream.Snapshot{State: upstream.StateNeedsAuth, Err: errors.New("run `mcp-proxy auth login oa`")})
	p := newProxy(t, "blobs: {mode: passthrough}\nservers:\n  oa: {url: \"https://example.com/mcp\"}\n", map[string]*fakeUpstream{"oa": oa})
	p.AskToOpen("oa", "https://auth.example.com/authorize?client_id=x")

	plain := startStdio(t, p)
	plain.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}}}}`)
	plain.recv(`0`)
	plain.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	plain.recv(`1`)
	time.Sleep(100 * time.Millisecond) // a question would be sent off the read loop
	if n := plain.count(`"elicitation/create"`); n != 0 {
		t.Errorf("a host without URL-mode elicitation was asked %d times", n)
	}
	plain.finish()

	c := startStdio(t, p)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{},"url":{}}}}}`)
	c.recv(`0`)
	// Nothing is asked before the client says it is initialized.
	select {
	case l := <-c.lines:
		t.Fatalf("before notifications/initialized the proxy sent %s", l)
	case <-time.After(100 * time.Millisecond):
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l := <-c.lines:
			if strings.Contains(l, `"method":"elicitation/create"`) {
				for _, want := range []string{`"mode":"url"`, `"url":"https://auth.example.com/authorize?client_id=x"`, `"elicitationId":"mcp-proxy-login-`, `\"oa\"`} {
					if !strings.Contains(l, want) {
						t.Errorf("request %s lacks %s", l, want)
					}
				}
				return
			}
		case <-deadline:
			t.Fatal("the host was not asked to open the authorization page")
		}
	}
}

// A call to a tool of a server that needs a login says so, with the
// command that logs in, instead of "not connected".
func TestNeedsAuthCallError(t *testing.T) {
	oa := connected(echoTool)
	p := newProxy(t, "blobs: {mode: passthrough}\nservers:\n  oa: {url: \"https://example.com/mcp\"}\n", map[string]*fakeUpstream{"oa": oa})
	oa.snap.Store(&upstream.Snapshot{State: upstream.StateNeedsAuth, Err: errors.New("server \"oa\" needs authorization: run `mcp-proxy auth login oa`")})
	p.Refresh()
	_, err := p.CallTool(t.Context(), "", nil, "oa__echo", nil)
	if werr := callError(t, err); !strings.Contains(werr.Message, "MCP server 'oa' needs authorization") || !strings.Contains(werr.Message, "mcp-proxy auth login oa") {
		t.Errorf("error = %+v", werr)
	}
}
