package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

const rpcBody = `{"jsonrpc":"2.0","id":1,"method":"x"}`

// post sends rpcBody to url with ctx marked with method ("" leaves it
// unmarked).
func post(ctx context.Context, client *http.Client, url, method string) (*http.Response, error) {
	if method != "" {
		ctx = withMethod(ctx, method)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(rpcBody))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return client.Do(req)
}

// scriptServer answers the i-th request with statuses[i] (the last one
// repeats) and records the bodies it received.
type scriptServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newScriptServer(t *testing.T, retryAfter string, statuses ...int) *scriptServer {
	t.Helper()
	s := &scriptServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, string(body))
		s.mu.Unlock()
		status := statuses[min(n, len(statuses)-1)]
		if status != http.StatusOK && retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"attempt":`+string(rune('0'+n))+`}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

func TestRetryResponses(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		retryAfter string
		statuses   []int
		wantStatus int
		wantTries  int
	}{
		{"503 with Retry-After, tools/list", "tools/list", "0", []int{503, 200}, 200, 2},
		{"503 with Retry-After, tools/call", "tools/call", "0", []int{503, 200}, 503, 1},
		{"429 with Retry-After, resources/read", "resources/read", "0", []int{429, 200}, 200, 2},
		{"429 with Retry-After, tools/call", "tools/call", "0", []int{429, 200}, 429, 1},
		{"429 without Retry-After", "tools/list", "", []int{429, 200}, 429, 1},
		{"503 without Retry-After", "initialize", "", []int{503, 200}, 503, 1},
		{"Retry-After as an HTTP date in the past", "ping", "Mon, 02 Jan 2006 15:04:05 GMT", []int{503, 200}, 200, 2},
		{"Retry-After not a number", "ping", "soon", []int{503, 200}, 503, 1},
		{"Retry-After too long", "tools/list", "3600", []int{503, 200}, 503, 1},
		{"500 is never retried", "tools/list", "0", []int{500, 200}, 500, 1},
		{"502 is never retried", "tools/list", "0", []int{502, 200}, 502, 1},
		{"unmarked request", "", "0", []int{503, 200}, 503, 1},
		{"at most 2 retries", "prompts/list", "0", []int{503}, 503, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScriptServer(t, tt.retryAfter, tt.statuses...)
			client := newHTTPClient(nil, 1<<20, zerolog.Nop())
			resp, err := post(t.Context(), client, srv.URL, tt.method)
			if err != nil {
				t.Fatalf("request failed: %v", err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("reading the final body: %v", err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			reqs := srv.requests()
			if len(reqs) != tt.wantTries {
				t.Errorf("server saw %d requests, want %d", len(reqs), tt.wantTries)
			}
			for i, b := range reqs {
				if b != rpcBody {
					t.Errorf("request %d carried body %q, want %q", i, b, rpcBody)
				}
			}
			if want := `{"attempt":` + string(rune('0'+len(reqs)-1)) + `}`; string(body) != want {
				t.Errorf("final body = %q, want %q (the last attempt's)", body, want)
			}
		})
	}
}

// countingDialer counts the connections a transport tries to open.
func countingTransport(dials *atomic.Int32) *http.Transport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	return base
}

func closedPortURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/mcp"
}

func TestRetryRefusedDial(t *testing.T) {
	url := closedPortURL(t)
	for _, method := range []string{"tools/call", "tools/list", ""} {
		t.Run("method "+method, func(t *testing.T) {
			var dials atomic.Int32
			client := newHTTPClient(countingTransport(&dials), 1<<20, zerolog.Nop())
			resp, err := post(t.Context(), client, url, method)
			if err == nil {
				resp.Body.Close()
				t.Fatal("request to a closed port succeeded")
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("err = %v, want connection refused", err)
			}
			if n := dials.Load(); n != 1+retryMax {
				t.Fatalf("dialled %d times, want %d", n, 1+retryMax)
			}
		})
	}
}

// resetServer accepts connections, reads the request head and resets the
// connection without answering.
func resetServer(t *testing.T) (url string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			br := bufio.NewReader(conn)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			_ = conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String() + "/mcp", accepted
}

func TestRetryNeverAfterReset(t *testing.T) {
	for _, method := range []string{"tools/call", "tools/list"} {
		t.Run(method, func(t *testing.T) {
			url, accepted := resetServer(t)
			client := newHTTPClient(nil, 1<<20, zerolog.Nop())
			resp, err := post(t.Context(), client, url, method)
			if err == nil {
				resp.Body.Close()
				t.Fatal("request to a resetting server succeeded")
			}
			if n := accepted.Load(); n != 1 {
				t.Fatalf("server accepted %d connections, want exactly 1", n)
			}
		})
	}
}

func TestRetryContentLengthOverLimit(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(bytes.Repeat([]byte("a"), 2048))
	}))
	defer srv.Close()
	client := newHTTPClient(nil, 1024, zerolog.Nop())
	resp, err := post(t.Context(), client, srv.URL, "tools/list")
	if err == nil {
		resp.Body.Close()
		t.Fatal("an over-limit response was accepted")
	}
	var tooLarge *ResponseTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Limit != 1024 {
		t.Fatalf("err = %v, want *ResponseTooLargeError{1024}", err)
	}
	if !strings.HasSuffix(err.Error(), "MCP response body exceeds the 1024-byte limit") {
		t.Fatalf("err text = %q", err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	srv := newScriptServer(t, "5", 503, 200)
	client := newHTTPClient(nil, 1<<20, zerolog.Nop())
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	resp, err := post(ctx, client, srv.URL, "tools/list")
	if err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded after its context was cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// The server asked for 5 s; the cancel must cut that wait short.
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("returned after %v: the backoff ignored the context", d)
	}
	if n := len(srv.requests()); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
}

func TestRetryLogsAtDebugSanitized(t *testing.T) {
	srv := newScriptServer(t, "0", 503, 200)
	var buf bytes.Buffer
	logger := zerolog.New(&buf).Level(zerolog.DebugLevel)
	client := newHTTPClient(nil, 1<<20, logger)
	resp, err := post(t.Context(), client, srv.URL+"/mcp?token=s3cr3t", "tools/list")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	out := buf.String()
	if !strings.Contains(out, `"level":"debug"`) || !strings.Contains(out, "retryablehttp: retrying request") {
		t.Fatalf("no debug retry line in %q", out)
	}
	if strings.Contains(out, "s3cr3t") || strings.Contains(out, `"level":"error"`) {
		t.Fatalf("retry log leaks the query or logs above debug: %q", out)
	}

	buf.Reset()
	quiet := newHTTPClient(nil, 1<<20, zerolog.New(&buf).Level(zerolog.InfoLevel))
	resp, err = post(t.Context(), quiet, srv.URL, "tools/list")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if buf.Len() != 0 {
		t.Fatalf("an info-level logger got retry lines: %q", buf.String())
	}
}

func TestCheckRetry(t *testing.T) {
	ctx := t.Context()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	resp := func(status int, retryAfter string) *http.Response {
		r := &http.Response{StatusCode: status, Header: http.Header{}}
		if retryAfter != "" {
			r.Header.Set("Retry-After", retryAfter)
		}
		return r
	}
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name    string
		ctx     context.Context
		resp    *http.Response
		err     error
		want    bool
		wantErr error
	}{
		{"dial error, tools/call", withMethod(ctx, "tools/call"), nil, dialErr, true, nil},
		{"dial error, unmarked", ctx, nil, dialErr, true, nil},
		{"DNS error", ctx, nil, &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, true, nil},
		{"read error", withMethod(ctx, "tools/list"), nil, &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false, nil},
		{"EOF", withMethod(ctx, "tools/list"), nil, io.ErrUnexpectedEOF, false, nil},
		{"timeout", withMethod(ctx, "tools/list"), nil, context.DeadlineExceeded, false, nil},
		{"context ended", cancelled, nil, dialErr, false, context.Canceled},
		{"503 + Retry-After", withMethod(ctx, "tools/list"), resp(503, "1"), nil, true, nil},
		{"429 + Retry-After", withMethod(ctx, "resources/list"), resp(429, "2"), nil, true, nil},
		{"429 + Retry-After at the cap", withMethod(ctx, "resources/list"), resp(429, "5"), nil, true, nil},
		{"429 + Retry-After over the cap", withMethod(ctx, "resources/list"), resp(429, "6"), nil, false, nil},
		{"503 + Retry-After, tools/call", withMethod(ctx, "tools/call"), resp(503, "1"), nil, false, nil},
		{"503 + negative Retry-After", withMethod(ctx, "tools/list"), resp(503, "-1"), nil, false, nil},
		{"503 alone", withMethod(ctx, "tools/list"), resp(503, ""), nil, false, nil},
		{"500 + Retry-After", withMethod(ctx, "tools/list"), resp(500, "1"), nil, false, nil},
		{"200", withMethod(ctx, "tools/list"), resp(200, ""), nil, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkRetry(tt.ctx, tt.resp, tt.err)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("checkRetry = %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	resp := func(retryAfter string) *http.Response {
		return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {retryAfter}}}
	}
	const lo, hi = 250 * time.Millisecond, 5 * time.Second
	tests := []struct {
		name    string
		attempt int
		resp    *http.Response
		min     time.Duration
		max     time.Duration
	}{
		{"first dial retry", 0, nil, lo, lo},
		{"second dial retry", 1, nil, 2 * lo, 2 * lo},
		{"doubling capped", 10, nil, hi, hi},
		{"huge attempt capped", 1 << 30, nil, hi, hi},
		{"Retry-After seconds", 0, resp("3"), 3 * time.Second, 3 * time.Second},
		{"Retry-After zero", 1, resp("0"), 0, 0},
		{"Retry-After capped", 0, resp("120"), hi, hi},
		{"Retry-After enormous", 0, resp("99999999999999999"), hi, hi},
		{"Retry-After date", 0, resp(time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)), time.Second, 3 * time.Second},
		{"Retry-After date in the past", 0, resp("Sun, 06 Nov 1994 08:49:37 GMT"), 0, 0},
		{"Retry-After garbage falls back", 1, resp("later"), 2 * lo, 2 * lo},
		{"response without Retry-After", 0, &http.Response{StatusCode: 503, Header: http.Header{}}, lo, lo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := retryBackoff(lo, hi, tt.attempt, tt.resp)
			if got < tt.min || got > tt.max {
				t.Fatalf("retryBackoff = %v, want within [%v, %v]", got, tt.min, tt.max)
			}
		})
	}
}
