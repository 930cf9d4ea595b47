package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testoauth"
)

// Logins of OAuth upstreams through the host (docs/security.md#oauth-upstreams): over stdio the
// proxy asks a host that declares elicitation.url to open the
// authorization page; over HTTP, whose sessions belong to other people, it
// never does, and the page is only logged.

// loginPromptMessage is the log line of a login the proxy started (no
// auth.open).
const loginPromptMessage = "authorization needed: open the url in a browser, or run the command"

// urlHostInit is the initialize params of a host with URL-mode elicitation.
const urlHostInit = `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{},"url":{}}},"clientInfo":{"name":"url-elicitation-host","version":"1.0.0"}}`

// loginConfig is the config of both tests: secure, up's MCP server, which
// needs a login (no auth.open), and local, the fixture.
func loginConfig(t *testing.T, up *testoauth.Server) string {
	return writeConfig(t, "state_dir: "+q(t.TempDir())+"\n",
		httpServer("secure", up.URL("/mcp"), "auth: {type: oauth, open: none}"),
		fixtureServer("local", []string{"-no-weird"}))
}

// logLines returns the JSON log lines with message msg, in order.
func logLines(stderr *syncBuffer, msg string) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// countMethod counts the messages among lines that are requests or
// notifications of method.
func countMethod(lines [][]byte, method string) int {
	n := 0
	for _, l := range lines {
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(l, &m) == nil && m.Method == method {
			n++
		}
	}
	return n
}

// callWhoami calls secure__whoami and returns its text, or "" with
// isError or an error.
func callWhoami(t *testing.T, c rawClient) string {
	t.Helper()
	r := c.request(t, "tools/call", `{"name":"secure__whoami","arguments":{}}`)
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.IsError || len(res.Content) != 1 {
		return ""
	}
	return res.Content[0].Text
}

// TestOAuthLoginURLElicitationStdio: a stdio proxy whose OAuth upstream
// needs a login starts one at start-up; the host, which declared
// elicitation.url, is asked once, and only after its
// notifications/initialized, to open the authorization page (an
// elicitation/create with mode url and the authorization URL, which
// redirects back to the login's loopback callback). Opening that URL
// completes the login: the server connects and its tool works, and the
// host is not asked again.
func TestOAuthLoginURLElicitationStdio(t *testing.T) {
	t.Parallel()
	up := newOAuthUpstream(t)
	cfg := loginConfig(t, up)
	c := startStdioRaw(t, "proxy", proxyCmd("serve", "--config", cfg))
	stderr := c.p.stderr
	if r := c.request(t, "initialize", urlHostInit); r.Error != nil {
		t.Fatalf("initialize: %+v", r.Error)
	}

	// The login is under way before the host says it is initialized: the
	// proxy holds the question until then.
	waitLogLine(t, stderr, loginPromptMessage)
	var seen [][]byte
	for quiet := time.After(300 * time.Millisecond); ; {
		var l []byte
		select {
		case l = <-c.lines:
		case <-quiet:
		}
		if l == nil {
			break
		}
		seen = append(seen, l)
		if countMethod([][]byte{l}, "elicitation/create") != 0 {
			t.Fatalf("before notifications/initialized the proxy sent %s", l)
		}
	}
	c.notify(t, "notifications/initialized", "")

	var ask *rpcMsg
	timer := time.NewTimer(callTimeout)
	defer timer.Stop()
	for ask == nil {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("stdout closed:\n%s", tail(stderr.String(), 4000))
			}
			seen = append(seen, l)
			if m, err := parseMsg(l); err == nil && m.Method == "elicitation/create" {
				ask = m
			}
		case <-timer.C:
			t.Fatalf("no elicitation/create within %s of notifications/initialized; got %q\n%s", callTimeout, seen, tail(stderr.String(), 4000))
		}
	}
	var req struct {
		Params struct {
			Mode          string `json:"mode"`
			URL           string `json:"url"`
			ElicitationID string `json:"elicitationId"`
			Message       string `json:"message"`
		} `json:"params"`
	}
	if err := json.Unmarshal(ask.Raw, &req); err != nil {
		t.Fatal(err)
	}
	p := req.Params
	au, err := url.Parse(p.URL)
	if p.Mode != "url" || err != nil || !strings.HasPrefix(p.URL, up.URL("/authorize?")) || p.ElicitationID == "" || !strings.Contains(p.Message, `"secure"`) {
		t.Fatalf("elicitation/create %s: want mode url, the upstream's authorization URL, an id and a message naming the server", ask.Raw)
	}
	aq := au.Query()
	if aq.Get("code_challenge_method") != "S256" || aq.Get("resource") != up.URL("/mcp") || !strings.HasPrefix(aq.Get("redirect_uri"), "http://127.0.0.1:") || aq.Get("state") == "" {
		t.Errorf("authorization URL %s: want PKCE S256, the resource, a loopback redirect and a state", p.URL)
	}
	c.mu.Lock()
	c.write(t, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"action":"accept"}}`, ask.ID))
	c.mu.Unlock()

	// The host opens the page: the authorization server approves and
	// redirects to the login's callback.
	if code, body := httpGet(t, p.URL); code != http.StatusOK || !strings.Contains(body, "is authorized") {
		t.Fatalf("opening the authorization URL: %d %q", code, body)
	}
	rsRawListed(t, c, "secure__whoami")
	if got := callWhoami(t, c); got != "an authorized caller" {
		t.Errorf("secure__whoami = %q", got)
	}
	answered := waitLogLine(t, stderr, "the host answered the request to open the authorization page")
	if answered["server"] != "secure" || answered["action"] != "accept" {
		t.Errorf("answer log line: %v", answered)
	}
	c.mu.Lock()
	all := append(seen, c.all...)
	c.mu.Unlock()
	if n := countMethod(all, "elicitation/create"); n != 1 {
		t.Errorf("%d elicitation/create requests, want exactly 1:\n%s", n, all)
	}
}

// sessionStream is the GET stream of one Streamable HTTP session: every
// message the proxy sends there.
type sessionStream struct {
	mu   sync.Mutex
	msgs [][]byte
}

// openSessionStream opens c's session GET stream and reads it until the
// test ends.
func openSessionStream(t *testing.T, c *httpRaw) *sessionStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("MCP-Protocol-Version", c.proto)
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", c.url, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: HTTP %d %s", c.url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sessionStream{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(data) != "" {
				s.mu.Lock()
				s.msgs = append(s.msgs, []byte(strings.TrimSpace(data)))
				s.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

func (s *sessionStream) messages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.msgs...)
}

// TestOAuthLoginNoElicitationOverHTTP: the same proxy config served over
// HTTP to a client that declared elicitation.url never sends it
// elicitation/create (neither on its session's GET stream nor in a POST
// response), for a login pending when it connects nor for one that starts
// while it is connected (the upstream revoked the token); each login's
// URL is only logged, and following it completes the login.
func TestOAuthLoginNoElicitationOverHTTP(t *testing.T) {
	t.Parallel()
	up := newOAuthUpstream(t)
	cfg := loginConfig(t, up)
	base, p := startHTTPProxy(t, cfg)

	c := newHTTPRaw(base)
	if r := c.request(t, "initialize", urlHostInit); r.Error != nil {
		t.Fatalf("initialize: %+v", r.Error)
	}
	c.notify(t, "notifications/initialized", "")
	stream := openSessionStream(t, c)

	// A login pending when the client connects.
	first := waitLogLine(t, p.stderr, loginPromptMessage)
	local, _ := first["url"].(string)
	if !strings.HasPrefix(local, "http://127.0.0.1:") || first["server"] != "secure" {
		t.Fatalf("login prompt line: %v", first)
	}
	if code, body := httpGet(t, local); code != http.StatusOK || !strings.Contains(body, "is authorized") {
		t.Fatalf("following the logged URL: %d %q", code, body)
	}
	rsRawListed(t, c, "secure__whoami")
	if got := callWhoami(t, c); got != "an authorized caller" {
		t.Fatalf("secure__whoami = %q", got)
	}

	// A login that starts while the client is connected: the upstream
	// revoked the token, the next call is refused, the proxy logs in again.
	up.Revoke()
	if got := callWhoami(t, c); got != "" {
		t.Fatalf("secure__whoami answered %q with a revoked token", got)
	}
	deadline := time.Now().Add(startTimeout)
	for len(logLines(p.stderr, loginPromptMessage)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no second login after the token was revoked:\n%s", tail(p.stderr.String(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	second, _ := logLines(p.stderr, loginPromptMessage)[1]["url"].(string)
	if code, body := httpGet(t, second); code != http.StatusOK || !strings.Contains(body, "is authorized") {
		t.Fatalf("following the second logged URL: %d %q", code, body)
	}
	rsRawListed(t, c, "secure__whoami")
	if got := callWhoami(t, c); got != "an authorized caller" {
		t.Errorf("secure__whoami after the second login = %q", got)
	}

	// The stream works (the tool list changes reached it) and carried no
	// question; nor did any POST response.
	deadline = time.Now().Add(callTimeout)
	for countMethod(stream.messages(), "notifications/tools/list_changed") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the session stream got no notifications/tools/list_changed: %q", stream.messages())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := countMethod(stream.messages(), "elicitation/create"); n != 0 {
		t.Errorf("the HTTP session stream got %d elicitation/create: %q", n, stream.messages())
	}
	c.mu.Lock()
	var posted [][]byte
	for _, m := range c.others {
		posted = append(posted, m.Raw)
	}
	c.mu.Unlock()
	if n := countMethod(posted, "elicitation/create"); n != 0 {
		t.Errorf("POST responses carried %d elicitation/create: %q", n, posted)
	}
	if logLine(p.stderr, "the host answered the request to open the authorization page") != nil ||
		logLine(p.stderr, "the host was not able to open the authorization page") != nil {
		t.Error("the HTTP proxy asked a client to open the authorization page")
	}
}
