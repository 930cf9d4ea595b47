package downstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// headerToolJSON declares three x-mcp-header arguments (string, integer,
// boolean) and one plain one.
const headerToolJSON = `{"name":"query","inputSchema":{"type":"object","properties":{` +
	`"region":{"type":"string","x-mcp-header":"Region"},` +
	`"level":{"type":"integer","x-mcp-header":"Level"},` +
	`"dry":{"type":"boolean","x-mcp-header":"Dry"},` +
	`"sql":{"type":"string"}}}}`

// A stateless HTTP tools/call's Mcp-Param-* headers must agree with its
// arguments as SEP-2243 says (MCP 2026-07-28, basic/transports): a
// header for an argument that is absent, a missing header for one that is
// present, a different value, invalid base64, characters a header must
// not carry (raw UTF-8, even when it equals the argument), or the header
// twice are refused with HTTP 400 and -32020, and the call never reaches
// the server; matching headers, base64 included, and integers compared as
// numbers, pass. Mcp-Name follows the same value rules.
func TestParamHeadersValidated(t *testing.T) {
	fx := connected(headerToolJSON)
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`), nil
	}
	srv := startHTTP(t, newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx}))
	for _, tt := range []struct {
		name   string
		args   string
		header [][2]string
		want   string // "" for a call that runs, else the error message's start
	}{
		{"all match", `{"region":"eu-west-1","level":2,"dry":true,"sql":"x"}`,
			[][2]string{{"Mcp-Param-Region", "eu-west-1"}, {"Mcp-Param-Level", "2"}, {"mcp-param-dry", "true"}}, ""},
		{"no declared argument, no header", `{"sql":"x"}`, nil, ""},
		{"null argument, no header", `{"region":null}`, nil, ""},
		{"base64 of non-ASCII", `{"region":"Zürich"}`, [][2]string{{"Mcp-Param-Region", "=?base64?WsO8cmljaA==?="}}, ""},
		{"integer compared as a number", `{"level":2}`, [][2]string{{"Mcp-Param-Level", "2.0"}}, ""},
		{"header for an absent argument", `{"sql":"x"}`, [][2]string{{"Mcp-Param-Region", "eu-west-1"}},
			"header mismatch: Mcp-Param-Region: unexpected header"},
		{"argument without its header", `{"region":"eu-west-1"}`, nil, "header mismatch: Mcp-Param-Region: missing header"},
		{"different value", `{"region":"eu-west-1"}`, [][2]string{{"Mcp-Param-Region", "us-east-1"}},
			"header mismatch: Mcp-Param-Region: header value"},
		{"different integer", `{"level":2}`, [][2]string{{"Mcp-Param-Level", "3"}}, "header mismatch: Mcp-Param-Level: header value"},
		{"different boolean", `{"dry":false}`, [][2]string{{"Mcp-Param-Dry", "true"}}, "header mismatch: Mcp-Param-Dry: header value"},
		{"invalid base64", `{"region":"x"}`, [][2]string{{"Mcp-Param-Region", "=?base64?***?="}},
			"header mismatch: Mcp-Param-Region: invalid Base64"},
		{"raw UTF-8 equal to the argument", `{"region":"Zürich"}`, [][2]string{{"Mcp-Param-Region", "Zürich"}},
			"header mismatch: Mcp-Param-Region: the value has characters"},
		{"sent twice", `{"region":"a"}`, [][2]string{{"Mcp-Param-Region", "a"}, {"Mcp-Param-Region", "a"}},
			"header mismatch: Mcp-Param-Region: the header is sent more than once"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(fx.requests())
			params := `{"name":"fx__query","arguments":` + tt.args + `,"_meta":{` + modernMeta + `}}`
			status, body := postStateless(t, srv.URL+"/mcp", "tools/call", params,
				append([][2]string{{"Mcp-Name", "fx__query"}}, tt.header...))
			ran := len(fx.requests()) > before
			if tt.want == "" {
				if status != http.StatusOK || !strings.Contains(body, `"text":"ran"`) || !ran {
					t.Fatalf("%d %s (reached the server: %v), want the call to run", status, body, ran)
				}
				return
			}
			if status != http.StatusBadRequest || !strings.Contains(body, `"code":-32020,"message":"`+tt.want) || ran {
				t.Fatalf("%d %s (reached the server: %v)\nwant 400, -32020 %q", status, body, ran, tt.want)
			}
		})
	}
	for _, tt := range []struct{ name, header, want string }{
		{"Mcp-Name in raw UTF-8", "fx__query✓", "header mismatch: Mcp-Name: the value has characters"},
		{"Mcp-Name with invalid base64", "=?base64?***?=", "header mismatch: Mcp-Name: invalid base64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			params := `{"name":"fx__query✓","arguments":{},"_meta":{` + modernMeta + `}}`
			status, body := postStateless(t, srv.URL+"/mcp", "tools/call", params, [][2]string{{"Mcp-Name", tt.header}})
			if status != http.StatusBadRequest || !strings.Contains(body, `"code":-32020,"message":"`+tt.want) {
				t.Fatalf("%d %s\nwant 400, -32020 %q", status, body, tt.want)
			}
		})
	}
}

// postStateless POSTs a 2026-07-28 request with its standard headers and
// the extra ones (added, not set: a name may repeat), and returns the
// status and body.
func postStateless(t *testing.T, url, method, params string, extra [][2]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	for _, kv := range extra {
		req.Header[http.CanonicalHeaderKey(kv[0])] = append(req.Header[http.CanonicalHeaderKey(kv[0])], kv[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// FuzzParamHeaders: any header value and arguments are checked without a
// panic, and a value with characters a header must not carry is never
// accepted.
func FuzzParamHeaders(f *testing.F) {
	f.Add("eu-west-1", `{"region":"eu-west-1","level":2}`)
	f.Add("=?base64?WsO8cmljaA==?=", `{"region":"Zürich"}`)
	f.Add("Zürich", `{"region":"Zürich"}`)
	f.Add("", `{"region":""}`)
	f.Add("1e3", `{"level":1000}`)
	raw := json.RawMessage(headerToolJSON)
	f.Fuzz(func(t *testing.T, value, args string) {
		h := http.Header{"Mcp-Param-Region": {value}, "Mcp-Param-Level": {value}}
		werr := checkParamHeaders(h, raw, json.RawMessage(`{"name":"query","arguments":`+args+`}`))
		if werr == nil && !headerValueOK(value) {
			t.Fatalf("value %q accepted", value)
		}
		if werr != nil && werr.Code != codeHeaderMismatch {
			t.Fatalf("code %d", werr.Code)
		}
	})
}
