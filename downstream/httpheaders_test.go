package downstream

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// A POST is read only as application/json, whatever the case of the media
// type or its parameters; anything else is 415 with a JSON-RPC error.
func TestHTTPPostContentType(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	srv := startHTTP(t, p)
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	c.initialize()
	const refused = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid content type: must be application/json"}}` + "\n"
	for _, tc := range []struct {
		contentType string
		ok          bool
	}{
		{"application/json", true},
		{"Application/JSON", true},
		{"application/json; charset=utf-8", true},
		{"application/json;charset=UTF-8", true},
		{" application/json", true},
		{"application/json; charset", true}, // a bad parameter: the type still reads
		{"application/json ", true},
		{"", false},
		{"text/plain", false},
		{"application/json-seq", false},
		{"application/jsonx", false},
		{"application/json,text/plain", false},
		{"application/*", false},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			r := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Content-Type": tc.contentType})
			switch {
			case tc.ok && (r.status != http.StatusOK || r.body != `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"):
				t.Errorf("Content-Type %q: %d %q, want the ping's result", tc.contentType, r.status, r.body)
			case !tc.ok && (r.status != http.StatusUnsupportedMediaType || r.body != refused):
				t.Errorf("Content-Type %q: %d %q, want 415 %q", tc.contentType, r.status, r.body, refused)
			}
		})
	}
}

// A call whose upstream reports progress is answered on an SSE stream when
// the POST's Accept header admits text/event-stream (or there is none),
// else as JSON with the progress left out.
func TestHTTPAcceptSSE(t *testing.T) {
	fx := connected(echoTool)
	var p *Proxy
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		meta, _, _ := rawjson.Get(params, "_meta")
		tok, _, _ := rawjson.Get(meta, "progressToken")
		p.OnUpstreamNotification("fx", "notifications/progress", json.RawMessage(`{"progressToken":`+string(tok)+`,"progress":1,"total":2}`))
		return json.RawMessage(echoResult), nil
	}
	p = newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	srv := startHTTP(t, p)
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	c.initialize()
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","arguments":{},"_meta":{"progressToken":"pt"}}}`
	response := `{"jsonrpc":"2.0","id":7,"result":` + echoResult + `}`
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"pt","progress":1,"total":2}}`
	sse := "event: message\ndata: " + progress + "\n\nevent: message\ndata: " + response + "\n\n"
	for _, tc := range []struct {
		accept string
		sse    bool
	}{
		{"application/json, text/event-stream", true},
		{"text/event-stream", true},
		{"TEXT/Event-Stream", true},
		{"application/json,text/event-stream;q=0.5", true},
		{"application/json, , text/event-stream", true},
		{"application/json,\ttext/event-stream ;q=1", true},
		{"text/*", true},
		{"*/*", true},
		{"*/*;q=0.1", true},
		{"application/json", false},
		{"application/json, text/plain", false},
		{"text/event-stream-x", false},
		{"application/*", false},
		{",", false},
		{"text/event-streamtext/*", false},
		{"text/event-\u017ftream", false}, // ſ folds to s, but is no upper case s
	} {
		t.Run(tc.accept, func(t *testing.T) {
			r := c.do(http.MethodPost, call, map[string]string{"Accept": tc.accept})
			ct := r.header.Get("Content-Type")
			switch {
			case r.status != http.StatusOK:
				t.Errorf("Accept %q: %d %q", tc.accept, r.status, r.body)
			case tc.sse && (ct != "text/event-stream" || r.body != sse):
				t.Errorf("Accept %q: Content-Type %q, body %q; want the SSE stream %q", tc.accept, ct, r.body, sse)
			case !tc.sse && (ct != "application/json" || r.body != response+"\n"):
				t.Errorf("Accept %q: Content-Type %q, body %q; want JSON %q", tc.accept, ct, r.body, response)
			}
		})
	}
	// Without an Accept header anything is admitted.
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(call))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("no Accept header: Content-Type %q, want text/event-stream", ct)
	}
}
