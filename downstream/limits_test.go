package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// limitsYAML: server fx takes 2 calls a minute; agent bot may call fx__a*
// once a second with no burst; agent other has no limit of its own.
const limitsYAML = `
startup_wait: 2s
blobs: {mode: passthrough}
servers:
  fx:
    command: fixture
    timeout: 5s
    limits: {per_minute: 2}
  slow:
    command: fixture
    timeout: 2s
    limits: {max_concurrent: 1}
bundles:
  all: {servers: [fx, slow]}
agents:
  bot:
    mcp_bundles: [all]
    limits: [{tools: ["fx__a*"], per_minute: 60, burst: 1}]
  other: {mcp_bundles: [all]}
default_agent: bot
`

// clock is a settable time for the rate limits.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// limitsProxy is a proxy over limitsYAML on a test clock, with metrics.
func limitsProxy(t *testing.T, yaml string) (*Proxy, map[string]*fakeUpstream, *clock, *prometheus.Registry) {
	t.Helper()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	ok := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
	}
	ups := map[string]*fakeUpstream{
		"fx":   connected(`{"name":"alpha","inputSchema":{"type":"object"}}`, `{"name":"beta","inputSchema":{"type":"object"}}`),
		"slow": connected(`{"name":"sleep","inputSchema":{"type":"object"}}`),
	}
	ups["fx"].RequestFn, ups["slow"].RequestFn = ok, ok
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]Upstream{}
	for k, v := range ups {
		in[k] = v
	}
	p := New(Options{Config: parseConfig(t, yaml), Upstreams: in, Logger: zerolog.Nop(), Version: "test", Metrics: m})
	p.now = clk.Now
	p.cur.Load().limits = buildLimits(p.gen().cfg, nil, clk.Now(), p.opts.Store.Limits())
	p.Refresh()
	return p, ups, clk, reg
}

// callText calls a tool for agent and returns its text and isError.
func callText(t *testing.T, p *Proxy, agent, name string) (string, bool) {
	t.Helper()
	res, err := p.CallTool(context.Background(), agent, nil, name, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return resultText(t, res)
}

func TestServerRateLimit(t *testing.T) {
	p, ups, clk, reg := limitsProxy(t, limitsYAML)
	for i := range 2 {
		if text, isErr := callText(t, p, "other", "fx__beta"); isErr {
			t.Fatalf("call %d: %s", i+1, text)
		}
	}
	text, isErr := callText(t, p, "other", "fx__beta")
	if !isErr || text != "tool 'fx__beta' is denied by rate_limited: server 'fx' takes 2 calls a minute; retry in 30 s" {
		t.Fatalf("3rd call = %q (isError %v)", text, isErr)
	}
	if n := len(ups["fx"].requests()); n != 2 {
		t.Fatalf("the upstream got %d calls, want 2", n)
	}
	clk.advance(29 * time.Second)
	if text, _ := callText(t, p, "other", "fx__beta"); !strings.HasSuffix(text, "retry in 1 s") {
		t.Fatalf("after 29 s: %q", text)
	}
	clk.advance(time.Second)
	if text, isErr := callText(t, p, "other", "fx__beta"); isErr {
		t.Fatalf("after the refill: %s", text)
	}
	if got := counterValue(t, reg, "mcp_proxy_rate_limited_total", map[string]string{"agent": "other", "server": "fx", "limit": "server_rate"}); got != 2 {
		t.Errorf("rate_limited_total{server_rate} = %v, want 2", got)
	}
	if got := counterValue(t, reg, "mcp_proxy_policy_denials_total", map[string]string{"agent": "other", "rule": "rate_limited"}); got != 2 {
		t.Errorf("policy_denials_total{rate_limited} = %v, want 2", got)
	}
	if got := counterValue(t, reg, "mcp_proxy_tool_calls_total", map[string]string{"tool": "beta", "outcome": "denied"}); got != 2 {
		t.Errorf("tool_calls_total{denied} = %v, want 2", got)
	}
}

func TestAgentRateLimit(t *testing.T) {
	p, ups, clk, reg := limitsProxy(t, limitsYAML)
	if text, isErr := callText(t, p, "bot", "fx__alpha"); isErr {
		t.Fatal(text)
	}
	text, isErr := callText(t, p, "bot", "fx__alpha")
	if !isErr || text != "tool 'fx__alpha' is denied by rate_limited: agent 'bot' may make 60 calls a minute (burst 1) to fx__a*; retry in 1 s" {
		t.Fatalf("2nd call = %q (isError %v)", text, isErr)
	}
	// The refused call took no server token: beta still gets the server's
	// second call, and another agent is not bound by bot's limit.
	if text, isErr := callText(t, p, "bot", "fx__beta"); isErr {
		t.Fatalf("a tool outside the patterns: %s", text)
	}
	if text, _ := callText(t, p, "other", "fx__alpha"); !strings.Contains(text, "server 'fx' takes 2 calls a minute") {
		t.Fatalf("other agent, server bucket empty: %q", text)
	}
	clk.advance(time.Minute)
	if text, isErr := callText(t, p, "bot", "fx__alpha"); isErr {
		t.Fatalf("after a minute: %s", text)
	}
	if n := len(ups["fx"].requests()); n != 3 {
		t.Errorf("the upstream got %d calls, want 3", n)
	}
	if got := counterValue(t, reg, "mcp_proxy_rate_limited_total", map[string]string{"agent": "bot", "server": "fx", "limit": "agent"}); got != 1 {
		t.Errorf("rate_limited_total{agent} = %v, want 1", got)
	}
}

// TestAgentLimitIsSharedBySessions: one bucket per agent entry, whichever
// session calls.
func TestAgentLimitIsSharedBySessions(t *testing.T) {
	p, _, _, _ := limitsProxy(t, limitsYAML)
	a, _ := testSession(p, "bot", nil)
	b, _ := testSession(p, "bot", nil)
	ctx := context.Background()
	if res, _ := p.calls.forwardCall(ctx, reqFor(a, "tools/call", nil), "fx__alpha", nil, nil); IsErrorResult(res) {
		t.Fatalf("session a: %s", res)
	}
	res, _ := p.calls.forwardCall(ctx, reqFor(b, "tools/call", nil), "fx__alpha", nil, nil)
	if text, _ := resultText(t, res); !strings.Contains(text, "denied by rate_limited: agent 'bot'") {
		t.Fatalf("session b = %q", text)
	}
}

func TestMaxConcurrent(t *testing.T) {
	// slow's timeout (4 s) bounds c's wait for a slot; a ends 2 s in, so a
	// loaded machine has 2 s on either side: c is refused after b got the
	// slot, and b ends before its own timeout (counted from when it got it).
	p, ups, _, reg := limitsProxy(t, strings.Replace(limitsYAML, "timeout: 2s", "timeout: 4s", 1))
	// The n-th upstream call answers when ends[n] closes.
	ends := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	var started atomic.Int32
	ups["slow"].RequestFn = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		n := started.Add(1) - 1
		select {
		case <-ends[n]:
			return json.RawMessage(`{"content":[{"type":"text","text":"slept"}]}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	slots := p.gen().limits.servers["slow"].slots
	type outcome struct {
		text string
		err  error
	}
	call := func() chan outcome {
		out := make(chan outcome, 1)
		go func() {
			res, err := p.CallTool(context.Background(), "other", nil, "slow__sleep", nil)
			text := ""
			if err == nil {
				text, _ = resultText(t, res)
			}
			out <- outcome{text, err}
		}()
		return out
	}
	// a runs; b, then c, wait for its slot.
	a := call()
	for started.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	b := call()
	for !slots.Queued() {
		time.Sleep(time.Millisecond)
	}
	c := call()
	for slots.Waiting() != 2 {
		time.Sleep(time.Millisecond)
	}
	// a ends 2 s later: b, first in line, gets its slot; c waits on until
	// its timeout (4 s) and is refused without reaching the upstream,
	// while b, whose timeout began 2 s later, still runs.
	time.Sleep(2 * time.Second)
	close(ends[0])
	if got := <-a; got.err != nil || got.text != "slept" {
		t.Fatalf("a = %q, %v", got.text, got.err)
	}
	got := <-c
	if got.err != nil || got.text != "tool 'slow__sleep' is denied by rate_limited: server 'slow' takes 1 call at a time, and none of those in flight ended within 4s; retry once they have" {
		t.Fatalf("c = %q, %v", got.text, got.err)
	}
	if n := started.Load(); n != 2 {
		t.Fatalf("the upstream started %d calls, want 2 (a, b)", n)
	}
	close(ends[1])
	if got := <-b; got.err != nil || got.text != "slept" {
		t.Errorf("b = %q, %v", got.text, got.err)
	}
	if got := counterValue(t, reg, "mcp_proxy_rate_limited_total", map[string]string{"server": "slow", "limit": "server_concurrent"}); got != 1 {
		t.Errorf("rate_limited_total{server_concurrent} = %v, want 1", got)
	}
}

// TestMaxConcurrentWaitEndsWithTheClient: a call waiting for a slot ends
// when its client cancels it.
func TestMaxConcurrentWaitEndsWithTheClient(t *testing.T) {
	p, ups, _, _ := limitsProxy(t, strings.Replace(limitsYAML, "timeout: 2s", "timeout: 30s", 1))
	release := make(chan struct{})
	defer close(release)
	ups["slow"].RequestFn = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return json.RawMessage(`{"content":[]}`), nil
	}
	go func() { _, _ = p.CallTool(context.Background(), "other", nil, "slow__sleep", nil) }()
	for len(ups["slow"].requests()) != 1 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := p.CallTool(ctx, "other", nil, "slow__sleep", nil); done <- err }()
	slots := p.gen().limits.servers["slow"].slots
	for !slots.Queued() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "request cancelled") {
			t.Errorf("cancelled wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call did not end with its client")
	}
	if slots.Waiting() != 0 || len(ups["slow"].requests()) != 1 {
		t.Errorf("after the cancel: %d waiting, %d upstream calls", slots.Waiting(), len(ups["slow"].requests()))
	}
}

// TestRateGateGivesBackForAQuestion: a call that asks its client for input
// (a stateless client's approval) gives its tokens back, as the retry with
// the answer takes them again.
func TestRateGateGivesBackForAQuestion(t *testing.T) {
	p, _, _, _ := limitsProxy(t, limitsYAML)
	st, _ := testSession(p, "bot", nil)
	e, _ := p.Catalog().Lookup("fx__alpha")
	asks := p.calls.rateGate(func(_ context.Context, c *toolCall) (json.RawMessage, *wireError) {
		c.input = &inputRequired{result: json.RawMessage(`{"resultType":"input_required"}`)}
		return c.input.result, nil
	})
	for i := range 3 {
		c := &toolCall{r: reqFor(st, "tools/call", nil), name: "fx__alpha", entry: e}
		if res, werr := asks(context.Background(), c); werr != nil || c.input == nil || string(res) != `{"resultType":"input_required"}` {
			t.Fatalf("question %d refused: %s %+v", i+1, res, werr)
		}
	}
	if text, isErr := callText(t, p, "bot", "fx__alpha"); isErr {
		t.Fatalf("after three questions: %s", text)
	}
}

// TestReloadKeepsUnchangedBuckets: a reload that leaves a limit as it was
// keeps its bucket (a SIGHUP is no way around a limit); a changed limit
// starts afresh.
func TestReloadKeepsUnchangedBuckets(t *testing.T) {
	p, _, _, _ := limitsProxy(t, limitsYAML)
	callText(t, p, "other", "fx__beta")
	callText(t, p, "other", "fx__beta")
	g := p.gen()
	p.Reload(parseConfig(t, limitsYAML), g.ups)
	if text, isErr := callText(t, p, "other", "fx__beta"); !isErr || !strings.Contains(text, "rate_limited") {
		t.Fatalf("after a reload with the same limit: %q", text)
	}
	changed := strings.Replace(limitsYAML, "limits: {per_minute: 2}", "limits: {per_minute: 3}", 1)
	p.Reload(parseConfig(t, changed), g.ups)
	if text, isErr := callText(t, p, "other", "fx__beta"); isErr {
		t.Fatalf("after a reload that changed the limit: %q", text)
	}
	none := strings.NewReplacer("limits: {per_minute: 2}", "", "limits: {max_concurrent: 1}", "",
		`limits: [{tools: ["fx__a*"], per_minute: 60, burst: 1}]`, "").Replace(limitsYAML)
	p.Reload(parseConfig(t, none), g.ups)
	if p.gen().limits != nil {
		t.Error("a config without limits has limits")
	}
}
