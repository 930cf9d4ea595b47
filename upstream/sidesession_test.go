package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// sessionLog records, per request a Streamable HTTP server gets, the HTTP
// method, the JSON-RPC method, the session id and, for initialize, the
// capabilities declared; it answers 404 to the next POST of a session
// named in forget, as a server does that no longer knows it.
type sessionLog struct {
	mu      sync.Mutex
	entries []sessionEntry
	forget  map[string]bool
	// slowGET delays the GET streams of every session but the first
	// (the side sessions), logging "GET served" when one reaches the
	// server: a call sent before then could not be asked anything on it.
	slowGET time.Duration
	first   string
}

type sessionEntry struct {
	http, method, session string
	caps                  string // initialize's capabilities
}

func (l *sessionLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string
			Params struct{ Capabilities json.RawMessage }
		}
		_ = json.Unmarshal(body, &m)
		id := r.Header.Get("Mcp-Session-Id")
		l.mu.Lock()
		l.entries = append(l.entries, sessionEntry{r.Method, m.Method, id, string(m.Params.Capabilities)})
		gone := r.Method == http.MethodPost && l.forget[id]
		delete(l.forget, id)
		if l.first == "" && id != "" {
			l.first = id
		}
		slow := r.Method == http.MethodGet && id != l.first && l.slowGET > 0
		l.mu.Unlock()
		if slow {
			time.Sleep(l.slowGET)
			l.mu.Lock()
			l.entries = append(l.entries, sessionEntry{"GET served", "", id, ""})
			l.mu.Unlock()
		}
		if gone {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// of returns the entries matching keep.
func (l *sessionLog) of(keep func(sessionEntry) bool) []sessionEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(l.entries), func(e sessionEntry) bool { return !keep(e) })
}

// A call over a session-era Streamable HTTP upstream made for a client
// whose capabilities are not all the proxy's goes on a session the proxy
// opened declaring that client's (and roots, which the proxy answers for
// every client): one per capability set, kept for its next calls, opened
// anew when the server forgets it, and deleted when the connection closes.
// Calls for a client with every capability, and requests made for no
// client, take the main session.
func TestSideSessionsDeclareTheClientsCapabilities(t *testing.T) {
	log := &sessionLog{forget: map[string]bool{}}
	ts := httptest.NewServer(log.wrap(server.NewStreamableHTTPServer(newMCPGoServer())))
	t.Cleanup(ts.Close)
	c := start(t, httpServer("web", ts.URL+"/mcp"), Options{OnRequest: noRelay})
	mustConnected(t, c)
	call := func(caps string) string {
		t.Helper()
		ctx := context.Background()
		if caps != "" {
			ctx = WithClientCapabilities(ctx, json.RawMessage(caps))
		}
		raw, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"hello","arguments":{"who":"x"}}`))
		if err != nil || !strings.Contains(string(raw), "hello x") {
			t.Fatalf("call for %s: %s, %v", caps, raw, err)
		}
		calls := log.of(func(e sessionEntry) bool { return e.method == "tools/call" })
		return calls[len(calls)-1].session
	}
	inits := func() []string {
		var out []string
		for _, e := range log.of(func(e sessionEntry) bool { return e.method == "initialize" }) {
			out = append(out, e.caps)
		}
		return out
	}
	main := call("")
	if got := call(`{"elicitation":{"form":{},"url":{}},"sampling":{}}`); got != main {
		t.Errorf("a client with every capability called on session %q, want the main one %q", got, main)
	}
	sampling := call(`{"sampling":{}}`)
	if again := call(`{"sampling":{}}`); sampling == main || again != sampling {
		t.Errorf("sessions of a sampling client's calls %q, %q; want one of their own (main %q)", sampling, again, main)
	}
	none := call(`{}`)
	if none == main || none == sampling {
		t.Errorf("a client without capabilities called on session %q (main %q, sampling %q)", none, main, sampling)
	}
	want := []string{
		`{"roots":{},"sampling":{},"elicitation":{"form":{},"url":{}}}`, // the main session
		`{"roots":{},"sampling":{}}`,
		`{"roots":{}}`,
	}
	if got := inits(); !slices.Equal(got, want) {
		t.Errorf("initialize capabilities\n%q\nwant\n%q", got, want)
	}

	log.mu.Lock()
	log.forget[sampling] = true
	log.mu.Unlock()
	renewed := call(`{"sampling":{}}`)
	if renewed == sampling || renewed == main || renewed == none {
		t.Errorf("after the server forgot it, the sampling client's call went on %q", renewed)
	}
	if got := inits(); len(got) != 4 || got[3] != `{"roots":{},"sampling":{}}` {
		t.Errorf("initialize capabilities after the 404: %q, want the sampling set once more", got)
	}

	_ = c.Close()
	deleted := map[string]bool{}
	for _, e := range log.of(func(e sessionEntry) bool { return e.http == http.MethodDelete }) {
		deleted[e.session] = true
	}
	for _, id := range []string{main, none, renewed} {
		if !deleted[id] {
			t.Errorf("session %q not deleted on close (deleted: %v)", id, deleted)
		}
	}
}

// A side session's first call is sent once its GET stream is open: a
// server may send the call's requests on that stream (the official
// TypeScript SDK does for a request not tied to the call), and one sent
// before the stream is open would be lost.
func TestSideSessionCallsAfterItsGETStream(t *testing.T) {
	log := &sessionLog{forget: map[string]bool{}, slowGET: 200 * time.Millisecond}
	ts := httptest.NewServer(log.wrap(server.NewStreamableHTTPServer(newMCPGoServer())))
	t.Cleanup(ts.Close)
	c := start(t, httpServer("web", ts.URL+"/mcp"), Options{OnRequest: noRelay})
	mustConnected(t, c)
	ctx := WithClientCapabilities(context.Background(), json.RawMessage(`{"sampling":{}}`))
	if _, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"hello","arguments":{}}`)); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range log.of(func(e sessionEntry) bool { return e.session != "" && e.session != log.first }) {
		if e.http == "GET served" || e.method == "tools/call" {
			order = append(order, e.http+" "+e.method)
		}
	}
	if want := []string{"GET served ", "POST tools/call"}; !slices.Equal(order, want) {
		t.Errorf("on the side session: %q, want %q", order, want)
	}
}

// A level set after a side session opened reaches that session before its
// next call, as it reaches the main one: the server logs a client's calls
// at the level the client asked for, whichever session carries them.
func TestSideSessionTakesALaterLogLevel(t *testing.T) {
	var (
		mu     sync.Mutex
		levels = map[string][]string{} // session id: the levels set on it, in order
	)
	srv := newMCPGoServer()
	server.WithLogging()(srv)
	inner := server.NewStreamableHTTPServer(srv)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string
			Params struct{ Level string }
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "logging/setLevel" {
			mu.Lock()
			id := r.Header.Get("Mcp-Session-Id")
			levels[id] = append(levels[id], m.Params.Level)
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	c := start(t, httpServer("web", ts.URL+"/mcp"), Options{OnRequest: noRelay})
	mustConnected(t, c)
	ctx := WithClientCapabilities(context.Background(), json.RawMessage(`{}`))
	call := func() {
		t.Helper()
		if raw, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"hello","arguments":{"who":"x"}}`)); err != nil {
			t.Fatalf("call: %s, %v", raw, err)
		}
	}
	if err := c.SetLogLevel(context.Background(), "error"); err != nil {
		t.Fatal(err)
	}
	call() // opens the side session, told "error"
	if err := c.SetLogLevel(context.Background(), "debug"); err != nil {
		t.Fatal(err)
	}
	call()
	mu.Lock()
	defer mu.Unlock()
	if len(levels) != 2 {
		t.Fatalf("levels set per session: %v; want the main session and one side session", levels)
	}
	for id, got := range levels {
		if !slices.Equal(got, []string{"error", "debug"}) {
			t.Errorf("session %s was set %v; want [error debug]", id, got)
		}
	}
}
