package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/rs/zerolog"
)

// wireRecorder is the session side of a wire under test: it keeps the
// notifications the wire hands over and answers the server's requests.
type wireRecorder struct {
	mu    sync.Mutex
	notes []string
}

// testWire is a Streamable HTTP wire to ts, with a recorder of what the
// server sends it outside answers.
func testWire(t *testing.T, ts *httptest.Server) (*httpWire, *wireRecorder) {
	rec := &wireRecorder{}
	return &httpWire{url: ts.URL, client: ts.Client(), in: rec.inbox(t)}, rec
}

func (r *wireRecorder) inbox(t *testing.T) inbox {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	return inbox{
		log:      zerolog.Nop(),
		requests: newRequestServer(zerolog.Nop()),
		onNote: func(method string, params json.RawMessage) {
			r.mu.Lock()
			r.notes = append(r.notes, method+" "+string(params))
			r.mu.Unlock()
		},
		answer: func(_ context.Context, req serverRequest) []byte {
			return resultReply(req.id, json.RawMessage(`{"answered":"`+req.method+`"}`))
		},
		spawn: func(fn func()) bool {
			wg.Add(1)
			go func() { defer wg.Done(); fn() }()
			return true
		},
		life:    ctx,
		timeout: 5 * time.Second,
	}
}

func (r *wireRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.notes...)
}

// seenRequest is one HTTP request a scripted server got.
type seenRequest struct {
	method, body                   string
	session, version, lastEventID  string
	accept, contentType, extraHead string
}

// wireServer answers each HTTP request with handle, after recording it.
type wireServer struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (s *wireServer) start(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int, body string)) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, seenRequest{
			method: r.Method, body: string(b),
			session: r.Header.Get(headerSessionID), version: r.Header.Get(headerProtocolVersion),
			lastEventID: r.Header.Get(headerLastEventID), accept: r.Header.Get("Accept"),
			contentType: r.Header.Get("Content-Type"), extraHead: r.Header.Get("X-Extra"),
		})
		n := len(s.seen)
		s.mu.Unlock()
		handle(w, r, n, string(b))
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (s *wireServer) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

func flush(w http.ResponseWriter, s string) {
	_, _ = io.WriteString(w, s)
	w.(http.Flusher).Flush()
}

// TestHTTPWireStreamAnswer: the answer to a POST comes in its event
// stream after a notification and a request of the server; the
// notification is handed over, the request answered by a POST that
// carries the session id and protocol version, and the result comes back
// as the server wrote it.
func TestHTTPWireStreamAnswer(t *testing.T) {
	t.Parallel()
	var srv wireServer
	replied := make(chan string, 1)
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		switch {
		case strings.Contains(body, `"method":"initialize"`):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(headerSessionID, "s-1")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"px-1","result":{"protocolVersion":"2025-11-25"}}`)
		case strings.Contains(body, `"method":"tools/call"`):
			sseHeaders(w)
			flush(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
			flush(w, "data: {\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"roots/list\"}\n\n")
			select {
			case <-replied:
			case <-time.After(5 * time.Second):
			}
			flush(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"px-2\",\"result\":{\"big\":123456789012345678901}}\n\n")
		case strings.Contains(body, `"id":77`):
			replied <- body
			w.WriteHeader(http.StatusAccepted)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	w, rec := testWire(t, ts)
	if _, _, err := w.call(context.Background(), "px-1", "initialize", json.RawMessage(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	if w.sessionID() != "s-1" {
		t.Fatalf("session %q", w.sessionID())
	}
	w.setProtocol("2025-11-25")
	res, rpcErr, err := w.call(context.Background(), "px-2", "tools/call", json.RawMessage(`{"name":"x"}`), http.Header{"X-Extra": {"1"}})
	if err != nil || rpcErr != nil || string(res) != `{"big":123456789012345678901}` {
		t.Fatalf("result %s, %v, %v", res, rpcErr, err)
	}
	if got := rec.got(); len(got) != 1 || got[0] != `notifications/progress {"progress":1}` {
		t.Errorf("notifications %q", got)
	}
	reqs := srv.requests()
	var reply seenRequest
	for _, r := range reqs {
		if strings.Contains(r.body, `"id":77`) {
			reply = r
		}
	}
	if reply.body != `{"jsonrpc":"2.0","id":77,"result":{"answered":"roots/list"}}` || reply.session != "s-1" || reply.version != "2025-11-25" {
		t.Errorf("the reply to the server's request: %+v", reply)
	}
	call := reqs[1]
	if call.session != "s-1" || call.version != "2025-11-25" || call.extraHead != "1" ||
		call.accept != "application/json, text/event-stream" || call.contentType != "application/json" {
		t.Errorf("the call's headers: %+v", call)
	}
	if reqs[0].session != "" || reqs[0].version != "" {
		t.Errorf("initialize carried session %q version %q", reqs[0].session, reqs[0].version)
	}
}

// TestHTTPWireResume: a stream cut off before the answer is resumed with a
// GET carrying the last event id, after the retry time the server asked
// for; without event ids it fails with ErrConnectionLost.
func TestHTTPWireResume(t *testing.T) {
	t.Parallel()
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		switch {
		case r.Method == http.MethodPost && strings.Contains(body, `"id":"px-1"`):
			sseHeaders(w)
			flush(w, "id: ev-1\nretry: 20\ndata:\n\n")
		case r.Method == http.MethodGet && r.Header.Get(headerLastEventID) == "ev-1":
			sseHeaders(w)
			flush(w, "id: ev-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"px-1\",\"result\":{\"ok\":true}}\n\n")
		case r.Method == http.MethodPost:
			sseHeaders(w)
			flush(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	w, _ := testWire(t, ts)
	t0 := time.Now()
	res, _, err := w.call(context.Background(), "px-1", "tools/call", nil, nil)
	if err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("resumed: %s, %v", res, err)
	}
	if d := time.Since(t0); d < 20*time.Millisecond {
		t.Errorf("resumed after %v, before the server's retry time", d)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || reqs[1].method != http.MethodGet || reqs[1].accept != "text/event-stream" {
		t.Errorf("requests %+v", reqs)
	}
	_, _, err = w.call(context.Background(), "px-2", "tools/call", nil, nil)
	if !errors.Is(err, ErrConnectionLost) {
		t.Errorf("a stream without ids that ends before the answer: %v, want ErrConnectionLost", err)
	}
}

// TestHTTPWireErrorAnswers: what a POST's answer may be besides a result.
func TestHTTPWireErrorAnswers(t *testing.T) {
	t.Parallel()
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		switch {
		case strings.Contains(body, `"rpc400"`):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"rpc400","error":{"code":-32602,"message":"unsupported","data":{"supported":["x"]}}}`)
		case strings.Contains(body, `"text500"`):
			http.Error(w, "database is down", http.StatusInternalServerError)
		case strings.Contains(body, `"accepted"`):
			w.WriteHeader(http.StatusAccepted)
		case strings.Contains(body, `"other"`):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"someone-else","result":{}}`)
		case strings.Contains(body, `"garbage"`):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"garbage","result":{`)
		case strings.Contains(body, `"html"`):
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html></html>`)
		}
	})
	w, _ := testWire(t, ts)
	ctx := context.Background()
	_, rpcErr, err := w.call(ctx, "rpc400", "server/discover", nil, nil)
	if err != nil || rpcErr == nil || rpcErr.Code != -32602 || string(rpcErr.Data.(json.RawMessage)) != `{"supported":["x"]}` {
		t.Errorf("a 400 with a JSON-RPC error: %+v, %v", rpcErr, err)
	}
	var se *statusError
	if _, _, err := w.call(ctx, "text500", "m", nil, nil); !errors.As(err, &se) || se.code != 500 || !strings.Contains(err.Error(), "database is down") {
		t.Errorf("a 500 with a text body: %v", err)
	}
	for _, id := range []string{"accepted", "other", "garbage", "html"} {
		if _, _, err := w.call(ctx, id, "m", nil, nil); !errors.Is(err, ErrBadResponse) {
			t.Errorf("%s: %v, want ErrBadResponse", id, err)
		}
	}
}

// TestHTTPWireSessionGone: a 404 or 410 for the session fails the request
// with errSessionGone, and later requests of the wire are not sent; a 404
// to a wire without a session is errNotFound.
func TestHTTPWireSessionGone(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusNotFound, http.StatusGone} {
		var srv wireServer
		ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
			if n == 1 {
				w.Header().Set(headerSessionID, "s-9")
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"jsonrpc":"2.0","id":"px-1","result":{}}`)
				return
			}
			w.WriteHeader(status)
		})
		w, _ := testWire(t, ts)
		ctx := context.Background()
		if _, _, err := w.call(ctx, "px-1", "initialize", nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.call(ctx, "px-2", "ping", nil, nil); !errors.Is(err, errSessionGone) {
			t.Errorf("%d: %v, want errSessionGone", status, err)
		}
		if err := w.notify(ctx, "notifications/x", nil); !errors.Is(err, errSessionGone) {
			t.Errorf("%d, then a notification: %v, want errSessionGone", status, err)
		}
		_ = w.Close()
		if n := len(srv.requests()); n != 2 {
			t.Errorf("%d: the server got %d requests, want 2 (no notification, no DELETE after the session is gone)", status, n)
		}
	}
	ts := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(ts.Close)
	w, _ := testWire(t, ts)
	if _, _, err := w.call(context.Background(), "px-1", "initialize", nil, nil); !errors.Is(err, errNotFound) || errors.Is(err, errSessionGone) {
		t.Errorf("404 without a session: %v, want errNotFound", err)
	}
}

// TestHTTPWireCloseDeletes: Close ends the session with a DELETE that
// carries its id and protocol version.
func TestHTTPWireCloseDeletes(t *testing.T) {
	t.Parallel()
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		if r.Method == http.MethodPost {
			w.Header().Set(headerSessionID, "s-2")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"px-1","result":{}}`)
		}
	})
	w, _ := testWire(t, ts)
	if _, _, err := w.call(context.Background(), "px-1", "initialize", nil, nil); err != nil {
		t.Fatal(err)
	}
	w.setProtocol("2025-06-18")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	reqs := srv.requests()
	if len(reqs) != 2 || reqs[1].method != http.MethodDelete || reqs[1].session != "s-2" || reqs[1].version != "2025-06-18" {
		t.Errorf("requests %+v", reqs)
	}
	if _, _, err := w.call(context.Background(), "px-2", "ping", nil, nil); !errors.Is(err, errTransportClosed) {
		t.Errorf("a call after Close: %v", err)
	}
}

// TestHTTPWireListen: the GET stream hands over the server's
// notifications and answers its requests; when it ends it is reopened with
// the last event id; a server that answers 405 is not asked again.
func TestHTTPWireListen(t *testing.T) {
	t.Parallel()
	t.Run("reopened", func(t *testing.T) {
		t.Parallel()
		var srv wireServer
		ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
			switch {
			case r.Method == http.MethodGet && n == 1:
				sseHeaders(w)
				flush(w, "retry: 10\nid: g1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			case r.Method == http.MethodGet:
				sseHeaders(w)
				flush(w, "id: g2\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n\n")
				<-r.Context().Done()
			default:
				w.WriteHeader(http.StatusAccepted)
			}
		})
		w, rec := testWire(t, ts)
		w.listen()
		deadline := time.Now().Add(5 * time.Second)
		for {
			reqs := srv.requests()
			if len(reqs) >= 3 {
				if reqs[1].method != http.MethodGet || reqs[1].lastEventID != "g1" {
					t.Errorf("reopened with %+v", reqs[1])
				}
				if reqs[2].method != http.MethodPost || reqs[2].body != `{"jsonrpc":"2.0","id":5,"result":{"answered":"ping"}}` {
					t.Errorf("the answer to the ping: %+v", reqs[2])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("requests %+v", reqs)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if got := rec.got(); len(got) != 1 || got[0] != "notifications/tools/list_changed " {
			t.Errorf("notifications %q", got)
		}
		_ = w.Close()
		<-w.getEnded
	})
	t.Run("404 before open", func(t *testing.T) {
		t.Parallel()
		var srv wireServer
		ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
			if r.Method == http.MethodGet {
				http.NotFound(w, r)
				return
			}
			w.Header().Set(headerSessionID, "s-4")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"px-`+strconv.Itoa(n)+`","result":{}}`)
		})
		w, _ := testWire(t, ts)
		if _, _, err := w.call(context.Background(), "px-1", "initialize", nil, nil); err != nil {
			t.Fatal(err)
		}
		w.listen()
		select {
		case <-w.getEnded:
		case <-time.After(5 * time.Second):
			t.Fatal("the GET loop goes on after a 404 to a stream never open")
		}
		if _, _, err := w.call(context.Background(), "px-3", "ping", nil, nil); err != nil {
			t.Fatalf("a call after the GET's 404: %v", err)
		}
		reqs := srv.requests()
		if len(reqs) != 3 || reqs[1].method != http.MethodGet || reqs[2].session != "s-4" {
			t.Errorf("requests %+v", reqs)
		}
	})
	t.Run("405", func(t *testing.T) {
		t.Parallel()
		var srv wireServer
		ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
			w.WriteHeader(http.StatusMethodNotAllowed)
		})
		w, _ := testWire(t, ts)
		w.listen()
		select {
		case <-w.getEnded:
		case <-time.After(5 * time.Second):
			t.Fatal("the GET loop goes on after a 405")
		}
		if n := len(srv.requests()); n != 1 {
			t.Errorf("%d GETs", n)
		}
	})
}

// TestHTTPWireResumeRefused: a resume that meets 404 fails the request
// with ErrConnectionLost, not as an expired session (the request reached
// the server, so it must not be re-sent), and the session is marked gone
// for the next request.
func TestHTTPWireResumeRefused(t *testing.T) {
	t.Parallel()
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		switch {
		case n == 1:
			w.Header().Set(headerSessionID, "s-3")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"px-1","result":{}}`)
		case r.Method == http.MethodPost:
			sseHeaders(w)
			flush(w, "id: e1\nretry: 10\ndata:\n\n")
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	w, _ := testWire(t, ts)
	ctx := context.Background()
	if _, _, err := w.call(ctx, "px-1", "initialize", nil, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := w.call(ctx, "px-2", "tools/call", nil, nil)
	if !errors.Is(err, ErrConnectionLost) || errors.Is(err, errSessionGone) {
		t.Fatalf("a refused resume: %v, want ErrConnectionLost and not errSessionGone", err)
	}
	if _, _, err := w.call(ctx, "px-3", "ping", nil, nil); !errors.Is(err, errSessionGone) {
		t.Errorf("the next request: %v, want errSessionGone", err)
	}
	if n := len(srv.requests()); n != 3 {
		t.Errorf("%d requests, want 3 (initialize, the call, its resume)", n)
	}
}

// TestHTTPWireTooLarge: an event over max_response_bytes in a POST's
// stream fails the request with *ResponseTooLargeError, without a resume.
func TestHTTPWireTooLarge(t *testing.T) {
	t.Parallel()
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		sseHeaders(w)
		flush(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"px-1\",\"result\":{\"x\":\""+strings.Repeat("a", 4096)+"\"}}\n\n")
	})
	var rec wireRecorder
	w := &httpWire{url: ts.URL, client: newHTTPClient(nil, 1024, zerolog.Nop()), in: rec.inbox(t)}
	var tl *ResponseTooLargeError
	if _, _, err := w.call(context.Background(), "px-1", "tools/call", nil, nil); !errors.As(err, &tl) || tl.Limit != 1024 {
		t.Errorf("err %v, want *ResponseTooLargeError", err)
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestHTTPWireListenPaced: a GET stream that ends at once, asking for no
// wait, is reopened at most once a second.
func TestHTTPWireListenPaced(t *testing.T) {
	t.Parallel()
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		sseHeaders(w)
		flush(w, "retry: 0\n\n")
	})
	w, _ := testWire(t, ts)
	w.listen()
	time.Sleep(1500 * time.Millisecond)
	_ = w.Close()
	<-w.getEnded
	if n := len(srv.requests()); n < 1 || n > 3 {
		t.Errorf("%d GETs in 1.5 s, want 1 to 3", n)
	}
}

// TestHTTPWireResumeCutEvent: a connection cut in the middle of the
// answer's event resumes after the last event received whole, so the
// server replays the answer.
func TestHTTPWireResumeCutEvent(t *testing.T) {
	t.Parallel()
	answer := "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"px-1\",\"result\":{\"ok\":1}}\n\n"
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		if r.Method == http.MethodPost {
			sseHeaders(w)
			flush(w, "retry: 10\nid: e0\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
			flush(w, answer[:30])
			panic(http.ErrAbortHandler) // the connection breaks mid-event
		}
		sseHeaders(w)
		if r.Header.Get(headerLastEventID) == "e0" {
			flush(w, answer)
		}
	})
	w, _ := testWire(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, _, err := w.call(ctx, "px-1", "tools/call", nil, nil)
	if err != nil || string(res) != `{"ok":1}` {
		t.Fatalf("%s, %v", res, err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || reqs[1].lastEventID != "e0" {
		t.Errorf("requests %+v, want the POST and one GET after e0", reqs)
	}
}

// TestHTTPWireCloseDuringInitialize: a session the server makes for an
// initialize answered after Close is ended with a DELETE, and the call
// fails.
func TestHTTPWireCloseDuringInitialize(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		if r.Method == http.MethodPost {
			<-release
			w.Header().Set(headerSessionID, "s-late")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"px-1","result":{}}`)
		}
	})
	w, _ := testWire(t, ts)
	done := make(chan error, 1)
	go func() {
		_, _, err := w.call(context.Background(), "px-1", "initialize", nil, nil)
		done <- err
	}()
	waitFor(t, 5*time.Second, "the initialize sent", func() bool { return len(srv.requests()) == 1 })
	_ = w.Close()
	close(release)
	if err := <-done; !errors.Is(err, errTransportClosed) {
		t.Errorf("initialize after Close: %v, want errTransportClosed", err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || reqs[1].method != http.MethodDelete || reqs[1].session != "s-late" {
		t.Errorf("requests %+v, want the initialize and a DELETE of s-late", reqs)
	}
}

// refusingTransport fails every request at once: a wire under fuzzing
// never reaches the network.
type refusingTransport struct{}

func (refusingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no network here")
}

// FuzzStreamAnswer feeds arbitrary bytes to the reading of a call's event
// stream, as an upstream could send them: other events (noise), then the
// response to the call with a result of arbitrary bytes. It must return,
// never panic, and an answer is one JSON value. When the noise cannot carry
// a response to the call itself (it has no "px-1" and no escapes) and the
// result is one JSON value on one line, the answer is that result byte for
// byte, as the server wrote it.
func FuzzStreamAnswer(f *testing.F) {
	for _, s := range []struct{ noise, result string }{
		{"", "{}"},
		{"", ` {"content":[{"type":"text","text":"caf\u00e9 \"q\""}],"n":2.50e1, "big":12345678901234567890} `},
		{"id: 1\nretry: 5\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"p\":1}}\n\n", "[1,\t2]"},
		{"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n\n: comment\n", `"text"`},
		{"data: {\"jsonrpc\":\"2.0\",\"id\":\"px-1\",\"error\":{\"code\":-1,\"message\":\"x\",\"data\":[1]}}\n\n", "{}"},
		{"data: {\"jsonrpc\":\"2.0\",\"id\":\"px-1\",\"res", "null"},
		{"data: [1,2]\r\rdata: {\"id\":\"px-1\"}\r\n\r\n", "{}"},
		{"", "{\"a\":1,}"},
		{"", "1 2"},
	} {
		f.Add([]byte(s.noise), []byte(s.result))
	}
	f.Fuzz(func(t *testing.T, noise, result []byte) {
		in := inbox{
			log: zerolog.Nop(), requests: newRequestServer(zerolog.Nop()), life: context.Background(), timeout: time.Second,
			onNote: func(string, json.RawMessage) {},
			answer: func(_ context.Context, req serverRequest) []byte { return resultReply(req.id, json.RawMessage(`{}`)) },
			spawn:  func(fn func()) bool { fn(); return true },
		}
		w := &httpWire{url: "http://upstream.invalid/mcp", client: &http.Client{Transport: refusingTransport{}}, in: in}
		stream := slices.Concat(noise, []byte("\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"px-1\",\"result\":"), result, []byte("}\n\n"))
		quiet := !bytes.Contains(noise, []byte("px-1")) && !bytes.Contains(noise, []byte(`\`))
		exact := quiet && json.Valid(result) && !bytes.ContainsAny(result, "\r\n")
		// An answer that is due comes at once; the short wait bounds the
		// resumes of a stream that has none.
		wait := 50 * time.Millisecond
		if exact {
			wait = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		r, err := w.streamAnswer(ctx, io.NopCloser(bytes.NewReader(stream)), replyTo{}, rawjson.IDKey(json.RawMessage(`"px-1"`)))
		answered := err == nil && r.err == nil && r.rpcErr == nil
		if answered && !json.Valid(r.result) {
			t.Fatalf("answer %q is not one JSON value", r.result)
		}
		if !exact {
			return
		}
		var tl *ResponseTooLargeError
		switch {
		case errors.As(err, &tl):
			// the noise or the answer is over the limit of one event
		case !answered:
			t.Fatalf("no answer for the result %q: err %v, reply error %v, JSON-RPC error %v", result, err, r.err, r.rpcErr)
		case !bytes.Equal(r.result, bytes.TrimSpace(result)):
			t.Fatalf("answer %q, want the result as written: %q", r.result, bytes.TrimSpace(result))
		}
	})
}

// TestHTTPWireNotifyHeldOpen: a server that answers a notification's POST
// with an event stream it holds open does not hold the notification.
func TestHTTPWireNotifyHeldOpen(t *testing.T) {
	t.Parallel()
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		sseHeaders(w)
		flush(w, ": open\n\n")
		<-r.Context().Done()
	})
	w, _ := testWire(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	t0 := time.Now()
	err := w.notify(ctx, "notifications/roots/list_changed", nil)
	if d := time.Since(t0); err != nil || d > 2*time.Second {
		t.Errorf("notify: %v after %v; the notification waits for the server's held-open answer", err, d)
	}
}
