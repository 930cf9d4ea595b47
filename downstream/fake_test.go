package downstream

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// fakeUpstream is a downstream.Upstream whose behaviour is given by func
// fields. A nil field means: SnapshotFn returns the stored snapshot (see
// set), ReadyFn returns a closed channel, RequestFn fails the test.
type fakeUpstream struct {
	SnapshotFn func() *upstream.Snapshot
	ReadyFn    func() <-chan struct{}
	RequestFn  func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)

	snap atomic.Pointer[upstream.Snapshot]

	mu    sync.Mutex
	calls []fakeCall
}

// fakeCall is one Request the proxy sent to a fakeUpstream.
type fakeCall struct {
	Method string
	Params string
}

var closedReady = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (f *fakeUpstream) Snapshot() *upstream.Snapshot {
	if f.SnapshotFn != nil {
		return f.SnapshotFn()
	}
	if s := f.snap.Load(); s != nil {
		return s
	}
	return &upstream.Snapshot{State: upstream.StateConnecting}
}

func (f *fakeUpstream) Ready() <-chan struct{} {
	if f.ReadyFn != nil {
		return f.ReadyFn()
	}
	return closedReady
}

func (f *fakeUpstream) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{Method: method, Params: string(params)})
	f.mu.Unlock()
	if f.RequestFn == nil {
		panic("fakeUpstream: unexpected Request " + method)
	}
	return f.RequestFn(ctx, method, params)
}

// set publishes a snapshot with state and the tools parsed from raw objects.
func (f *fakeUpstream) set(state upstream.State, raws ...string) {
	s := &upstream.Snapshot{State: state}
	for _, r := range raws {
		s.Tools = append(s.Tools, rawTool(r))
	}
	f.snap.Store(s)
}

func (f *fakeUpstream) requests() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.calls...)
}

// connected returns a fake upstream that is connected with the given tools.
func connected(raws ...string) *fakeUpstream {
	f := &fakeUpstream{}
	f.set(upstream.StateConnected, raws...)
	return f
}

// rawTool reads a tool object the way the upstream package does: Raw is the
// bytes as given, Name and Description the decoded strings.
func rawTool(raw string) upstream.Tool {
	var fields struct {
		Name        string          `json:"name"`
		Description json.RawMessage `json:"description"`
		Annotations struct {
			ReadOnlyHint bool `json:"readOnlyHint"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		panic("rawTool: " + err.Error() + ": " + raw)
	}
	t := upstream.Tool{Name: fields.Name, Raw: json.RawMessage(raw), ReadOnly: fields.Annotations.ReadOnlyHint}
	_ = json.Unmarshal(fields.Description, &t.Description) // not a string: ""
	return t
}

// testEnv is the environment config.Parse sees in these tests.
func testEnv(name string) (string, bool) {
	switch name {
	case "HOME":
		return "/nonexistent-home", true
	}
	return "", false
}

// parseConfig parses a YAML config or fails the test.
func parseConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), testEnv)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, yaml)
	}
	return cfg
}

// oneServerYAML is a config with one stdio server "fx" (never started: the
// tests give the proxy a fake in its place).
const oneServerYAML = `
startup_wait: 2s
blobs:
  mode: passthrough
servers:
  fx:
    command: fixture
    timeout: 5s
`

// newProxy builds a proxy over ups and refreshes its catalog once.
func newProxy(t testing.TB, yaml string, ups map[string]*fakeUpstream) *Proxy {
	t.Helper()
	m := make(map[string]Upstream, len(ups))
	for name, u := range ups {
		m[name] = u
	}
	p := New(Options{
		Config:    parseConfig(t, yaml),
		Upstreams: m,
		Logger:    zerolog.Nop(),
		Version:   "test",
	})
	p.Refresh()
	return p
}

// testState is a session of the default agent with no per-call list.
func testState(t testing.TB, p *Proxy) *session {
	t.Helper()
	return agentSession(t, p, "")
}

// reqFor is a session-based request of s (no client behind it).
func reqFor(s *session, method string, params json.RawMessage) *request {
	return &request{sess: s, id: json.RawMessage("1"), method: method, params: params, out: noStream{}}
}

// agentSession is a stdio-like session of agent with no per-call list.
func agentSession(t testing.TB, p *Proxy, agent string) *session {
	t.Helper()
	s, err := testSession(p, agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testSession starts a stdio-like session of agent with a per-call list.
func testSession(p *Proxy, agent string, perCall []string) (*session, error) {
	a, err := p.views.resolveAgent(agent)
	if err != nil {
		return nil, err
	}
	return newSession("test", transportStdio, a, perCall), nil
}

// recordStream is a stream that keeps what is sent on it.
type recordStream struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recordStream) send(msg []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, string(msg))
	return nil
}

func (r *recordStream) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// testLogger is the logger of proxies the tests build themselves.
func testLogger() zerolog.Logger { return zerolog.Nop() }

// SetLogLevel sends logging/setLevel through RequestFn, the way a
// connected server gets it; with no RequestFn, or for "" (which an
// upstream.Conn only forgets), it sends nothing.
func (f *fakeUpstream) SetLogLevel(ctx context.Context, level string) error {
	if f.RequestFn == nil || level == "" {
		return nil
	}
	_, err := f.Request(ctx, "logging/setLevel", json.RawMessage(`{"level":"`+level+`"}`))
	return err
}
