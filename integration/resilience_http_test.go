package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// rsStartFixtureHTTP runs the fixture as a Streamable HTTP server with extra
// environment variables and returns its MCP URL and process.
func rsStartFixtureHTTP(t testing.TB, env []string, args ...string) (string, *proc) {
	t.Helper()
	urls := make(chan string, 1)
	onLine := func(line string) {
		if _, rest, ok := strings.Cut(line, "listening on "); ok {
			select {
			case urls <- strings.TrimSpace(rest):
			default:
			}
		}
	}
	cmd := exec.Command(fixtureBin, append([]string{"-http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Environ(), env...)
	p := startProc(t, "fixture (http)", cmd, onLine)
	select {
	case u := <-urls:
		return u, p
	case <-p.done:
		t.Fatalf("fixture exited before listening: %v\n%s", p.err, p.stderr.String())
	case <-time.After(startTimeout):
		t.Fatalf("fixture did not listen within %s", startTimeout)
	}
	return "", nil
}

// rsFront is an HTTP server in front of an HTTP upstream: it counts the
// JSON-RPC requests by method, can answer some with 503 + Retry-After
// instead of forwarding them, and can switch its upstream.
type rsFront struct {
	srv *httptest.Server

	mu      sync.Mutex
	target  *url.URL
	counts  map[string]int         // POSTed requests by JSON-RPC method
	times   map[string][]time.Time // their arrival times
	refuse  map[string]int         // method → how many more to answer 503
	refused map[string]int         // method → how many were answered 503
}

func rsNewFront(t testing.TB, target string) *rsFront {
	t.Helper()
	f := &rsFront{counts: map[string]int{}, times: map[string][]time.Time{}, refuse: map[string]int{}, refused: map[string]int{}}
	f.setTarget(t, target)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			f.mu.Lock()
			u := f.target
			f.mu.Unlock()
			r.SetURL(u)
			r.Out.URL.Path = u.Path
			r.Out.Host = u.Host
		},
		FlushInterval: -1,
	}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		if r.Method == http.MethodPost && json.Unmarshal(body, &msg) == nil && msg.Method != "" {
			f.mu.Lock()
			f.counts[msg.Method]++
			f.times[msg.Method] = append(f.times[msg.Method], time.Now())
			refuse := f.refuse[msg.Method] > 0
			if refuse {
				f.refuse[msg.Method]--
				f.refused[msg.Method]++
			}
			f.mu.Unlock()
			if refuse {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "busy, come back later", http.StatusServiceUnavailable)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *rsFront) setTarget(t testing.TB, target string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.target = u
	f.mu.Unlock()
}

// url is the front's MCP URL (the upstream's path).
func (f *rsFront) url() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.srv.URL + f.target.Path
}

func (f *rsFront) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[method]
}

func (f *rsFront) refuseNext(method string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse[method] = n
}

// TestResilienceHTTPRetryAndExpiry: an HTTP upstream behind a front that
// answers 503 with Retry-After once: discovery's tools/list is retried after
// the wait and succeeds; a tools/call is not retried (exactly one reaches the
// front) and the client gets the error, and the connection still works.
// Then the upstream restarts, so the proxy's session id is unknown to it
// (404): the proxy initializes again and the call succeeds, run exactly once.
func TestResilienceHTTPRetryAndExpiry(t *testing.T) {
	t.Parallel()
	record1 := filepath.Join(t.TempDir(), "first.record.jsonl")
	up1, p1 := rsStartFixtureHTTP(t, []string{"FIXTURE_RECORD=" + record1}, "-no-weird")
	front := rsNewFront(t, up1)
	front.refuseNext("tools/list", 1)
	cfg := writeConfig(t, "", httpServer("web", front.url()))
	cs, _, _ := sdkStdioProxyCmd(t, cfg, nil, nil)

	rsWaitListed(t, cs, callTimeout, "web__echo")
	front.mu.Lock()
	lists, listTimes, refusedLists := front.counts["tools/list"], front.times["tools/list"], front.refused["tools/list"]
	front.mu.Unlock()
	if refusedLists != 1 || lists < 2 {
		t.Errorf("the front saw %d tools/list (%d answered 503), want the 503 and then a retry", lists, refusedLists)
	} else {
		gap := listTimes[1].Sub(listTimes[0])
		t.Logf("MEASURE tools/list retried %s after the 503 (Retry-After: 1)", gap.Round(time.Millisecond))
		if gap < 900*time.Millisecond {
			t.Errorf("tools/list was retried %s after a 503 with Retry-After: 1, want after about 1s", gap)
		}
	}

	t.Run("tools/call 503 not retried", func(t *testing.T) {
		front.refuseNext("tools/call", 1)
		before := front.count("tools/call")
		res, err := rsCall(cs, "web__echo", map[string]any{"text": "refused call"}, callTimeout)
		if err == nil && !res.IsError {
			t.Errorf("web__echo answered 503 by the front: result %s, want an error", rsJSON(res))
		}
		t.Logf("tools/call answered 503: err %v result %s", err, rsJSON(res))
		time.Sleep(2500 * time.Millisecond) // longer than Retry-After plus a retry's backoff
		if n := front.count("tools/call") - before; n != 1 {
			t.Errorf("the front saw %d tools/call requests for one call answered 503, want exactly 1 (never retried)", n)
		}
		if got := rsRecordLines(t, record1, "refused call"); len(got) != 0 {
			t.Errorf("the upstream ran the refused call: %q", got)
		}
		if got := contentText(callTool(t, cs, "web__echo", map[string]any{"text": "after 503"})); got != "after 503" {
			t.Errorf("web__echo after the 503: %q", got)
		}
	})

	t.Run("session expired", func(t *testing.T) {
		// Two sessions: the proxy's, and the one its calls for this client
		// go on, declaring the client's capabilities (it has no sampling
		// nor elicitation; docs/protocol.md#upstream-protocol).
		inits := front.count("initialize")
		if inits != 2 {
			t.Errorf("the front saw %d initialize requests before the restart, want 2", inits)
		}
		p1.stop(t)
		record2 := filepath.Join(t.TempDir(), "second.record.jsonl")
		up2, _ := rsStartFixtureHTTP(t, []string{"FIXTURE_RECORD=" + record2}, "-no-weird")
		front.setTarget(t, up2)
		start := time.Now()
		if got := contentText(callTool(t, cs, "web__echo", map[string]any{"text": "after restart"})); got != "after restart" {
			t.Errorf("web__echo after the upstream restarted: %q", got)
		}
		t.Logf("MEASURE call across a session expiry took %s", time.Since(start).Round(time.Millisecond))
		if n := front.count("initialize"); n != inits+1 {
			t.Errorf("the front saw %d initialize requests in all, want %d (one re-initialize after the 404)", n, inits+1)
		}
		if got := rsRecordLines(t, record2, "after restart"); len(got) != 1 {
			t.Errorf("the restarted upstream ran the call %d times, want once: %q", len(got), got)
		}
		if got := contentText(callTool(t, cs, "web__echo", map[string]any{"text": "steady"})); got != "steady" {
			t.Errorf("web__echo on the new session: %q", got)
		}
	})
}
