package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// legacyServer is a scripted legacy SSE server: GET /sse opens the stream
// and sends endpoint; each POST to the endpoint is handed to onPost with
// a function that sends one event on the stream.
type legacyServer struct {
	endpoint string
	onPost   func(body string, send func(event string))
	mu       sync.Mutex
	send     func(event string)
	posts    []string
	stop     chan struct{}
}

func (l *legacyServer) start(t *testing.T) *httptest.Server {
	l.stop = make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			sseHeaders(w)
			events := make(chan string, 16)
			l.mu.Lock()
			l.send = func(ev string) { events <- ev }
			l.mu.Unlock()
			flush(w, "event: endpoint\ndata: "+l.endpoint+"\n\n")
			for {
				select {
				case ev := <-events:
					flush(w, ev)
				case <-l.stop:
					return
				case <-r.Context().Done():
					return
				}
			}
		case http.MethodPost:
			b, _ := io.ReadAll(r.Body)
			l.mu.Lock()
			l.posts = append(l.posts, r.URL.RequestURI()+" "+string(b))
			send := l.send
			l.mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			if l.onPost != nil {
				go l.onPost(string(b), send)
			}
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (l *legacyServer) postsSeen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.posts...)
}

// TestSSEWire: requests are POSTed to the endpoint the stream named and
// answered on the stream; the server's notifications are handed over and
// its requests answered at the endpoint; when the stream ends, a request
// waiting fails with ErrConnectionLost and the loss is reported once.
func TestSSEWire(t *testing.T) {
	t.Parallel()
	l := &legacyServer{endpoint: "/messages?session=abc"}
	l.onPost = func(body string, send func(string)) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal([]byte(body), &m)
		switch m.Method {
		case "tools/call":
			send("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"p\":18446744073709551615}}\n\n")
			send("data: {\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n\n")
			send(fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"n\":18446744073709551615}}\n\n", m.ID))
		case "hang":
			close(l.stop)
		}
	}
	ts := l.start(t)
	var rec wireRecorder
	lost := make(chan error, 2)
	w, err := startSSE(context.Background(), ts.URL+"/sse", ts.Client(), rec.inbox(t), false, 5*time.Second, func(err error) { lost <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.setProtocol("2024-11-05")
	res, _, err := w.call(context.Background(), "px-1", "tools/call", json.RawMessage(`{"name":"x"}`), nil)
	if err != nil || string(res) != `{"n":18446744073709551615}` {
		t.Fatalf("call: %s, %v", res, err)
	}
	if posts := l.postsSeen(); len(posts) == 0 || posts[0] != `/messages?session=abc {"jsonrpc":"2.0","id":"px-1","method":"tools/call","params":{"name":"x"}}` {
		t.Errorf("the call was posted as %q", posts)
	}
	if got := rec.got(); len(got) != 1 || got[0] != `notifications/progress {"p":18446744073709551615}` {
		t.Errorf("notifications %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(strings.Join(l.postsSeen(), "\n"), `/messages?session=abc {"jsonrpc":"2.0","id":9,"result":{"answered":"ping"}}`) {
		if time.Now().After(deadline) {
			t.Fatalf("posts %q", l.postsSeen())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, _, err := w.call(context.Background(), "px-2", "hang", nil, nil); !errors.Is(err, ErrConnectionLost) {
		t.Errorf("a call when the stream ends: %v, want ErrConnectionLost", err)
	}
	select {
	case err := <-lost:
		if err == nil {
			t.Error("lost with a nil error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loss was not reported")
	}
	_ = w.Close()
	select {
	case err := <-lost:
		t.Errorf("the loss was reported twice (%v)", err)
	default:
	}
}

// TestSSEWireBadEndpoint: an endpoint on another host fails the connect
// at once, saying why; a stream that never names one fails it after the
// wait.
func TestSSEWireBadEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ endpoint, want string }{
		{"http://elsewhere.example/messages", "another host"},
		{"", "no endpoint event"},
	} {
		var ts *httptest.Server
		if tc.endpoint != "" {
			ts = (&legacyServer{endpoint: tc.endpoint}).start(t)
		} else {
			ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				flush(w, ": nothing here\n\n")
				<-r.Context().Done()
			}))
			t.Cleanup(ts.Close)
		}
		var rec wireRecorder
		lost := func(error) {}
		t0 := time.Now()
		_, err := startSSE(context.Background(), ts.URL+"/sse", ts.Client(), rec.inbox(t), false, 300*time.Millisecond, lost)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("endpoint %q: %v, want %q", tc.endpoint, err, tc.want)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("endpoint %q: failed after %v", tc.endpoint, d)
		}
	}
}

// TestSSEWireTooLarge: an answer over max_response_bytes fails its request
// with *ResponseTooLargeError; the stream cannot go on after it, so the
// loss is reported.
func TestSSEWireTooLarge(t *testing.T) {
	t.Parallel()
	l := &legacyServer{endpoint: "/messages"}
	l.onPost = func(body string, send func(string)) {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal([]byte(body), &m)
		send(fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"x\":\"%s\"}}\n\n", m.ID, strings.Repeat("a", 8192)))
	}
	ts := l.start(t)
	var rec wireRecorder
	lost := make(chan error, 1)
	w, err := startSSE(context.Background(), ts.URL+"/sse", newHTTPClient(nil, 4096, zerolog.Nop()), rec.inbox(t), false, 5*time.Second, func(err error) { lost <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var tl *ResponseTooLargeError
	if _, _, err := w.call(context.Background(), "px-1", "tools/call", nil, nil); !errors.As(err, &tl) || tl.Limit != 4096 {
		t.Errorf("err %v, want *ResponseTooLargeError", err)
	}
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Error("the loss of the stream was not reported")
	}
}

// TestSSEWireConnectBounded: a stream URL that answers 200 with another
// content type and then holds its body open fails the connect within the
// connect's deadline.
func TestSSEWireConnectBounded(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		flush(w, "{")
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	var rec wireRecorder
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := startSSE(ctx, ts.URL, ts.Client(), rec.inbox(t), false, 5*time.Second, func(error) {})
	if err == nil || !strings.Contains(err.Error(), "not text/event-stream") {
		t.Errorf("err %v", err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("the connect took %v with a 300 ms deadline", d)
	}
}
