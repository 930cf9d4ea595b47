package integration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sfSamplingText is the text of a sampling request's first message.
func sfSamplingText(req *mcp.CreateMessageRequest) string {
	if req.Params == nil || len(req.Params.Messages) == 0 {
		return ""
	}
	if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// sfSampler answers every sampling request with "answer to [<its text>]"
// and counts them.
type sfSampler struct {
	mu        sync.Mutex
	n         int
	maxTokens []int64
}

func (s *sfSampler) handle(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	s.mu.Lock()
	s.n++
	s.maxTokens = append(s.maxTokens, req.Params.MaxTokens)
	s.mu.Unlock()
	return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: "answer to [" + sfSamplingText(req) + "]"}, Model: "sf-model", Role: "assistant"}, nil
}

func (s *sfSampler) calls() (int, []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, append([]int64(nil), s.maxTokens...)
}

// sfProgressLog collects the progress notifications a client receives.
type sfProgressLog struct {
	mu    sync.Mutex
	seen  map[string][]*mcp.ProgressNotificationParams // by token, as fmt %v
	delay time.Duration
}

func (l *sfProgressLog) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if l.delay > 0 {
		time.Sleep(l.delay) // a slow client
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string][]*mcp.ProgressNotificationParams{}
	}
	k := fmt.Sprintf("%T:%v", req.Params.ProgressToken, req.Params.ProgressToken)
	l.seen[k] = append(l.seen[k], req.Params)
}

func (l *sfProgressLog) get(token string) []*mcp.ProgressNotificationParams {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), l.seen["string:"+token]...)
}

func (l *sfProgressLog) tokens() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.seen {
		out = append(out, k)
	}
	return out
}

// sfCheckProgress checks that the notifications of one call carry the
// client's token and strictly increasing progress, and end at total.
func sfCheckProgress(t testing.TB, got []*mcp.ProgressNotificationParams, total float64) {
	t.Helper()
	if len(got) == 0 {
		t.Errorf("no progress notification with the client's token")
		return
	}
	for i, p := range got {
		if p.Total != total {
			t.Errorf("progress %d: total %v, want %v", i, p.Total, total)
		}
		if i > 0 && p.Progress <= got[i-1].Progress {
			t.Errorf("progress went from %v to %v at notification %d: order not kept", got[i-1].Progress, p.Progress, i)
			break
		}
	}
	if last := got[len(got)-1].Progress; last != total {
		t.Errorf("the last progress is %v, want %v (the total)", last, total)
	}
}

// sfLogLog collects log messages by logger.
type sfLogLog struct {
	mu   sync.Mutex
	data map[string][]string
}

func (l *sfLogLog) handle(_ context.Context, req *mcp.LoggingMessageRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.data == nil {
		l.data = map[string][]string{}
	}
	l.data[req.Params.Logger] = append(l.data[req.Params.Logger], fmt.Sprint(req.Params.Data))
}

func (l *sfLogLog) get(logger string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.data[logger]...)
}

// TestSurfaceRelays: server-everything on stdio (everything), on
// Streamable HTTP (evhttp) and on legacy SSE (evsse, sampling, elicitation
// and progress) behind the proxy, used over stdio and over HTTP,
// on both protocol eras: its sampling and elicitation requests reach the
// go-sdk client's handlers and their answers come back in the results;
// progress notifications arrive with the client's own token, in order, up
// to the total; its log messages arrive with the server's name as logger.
// On 2026-07-28 (the go-sdk default) server-to-client requests have to use
// that revision's multi-round-trip mechanism (docs/protocol.md#downstream-protocol); the outcome the
// host sees must be the same.
func TestSurfaceRelays(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "", everythingServer("everything"), httpServer("evhttp", everythingHTTP(t)),
		httpServer("evsse", everythingSSE(t), "transport: sse"))
	for _, tr := range []string{"stdio", "http"} {
		for _, proto := range []string{"2025-11-25", ""} {
			t.Run(tr+"/"+cmp.Or(proto, "sdk default"), func(t *testing.T) {
				t.Parallel()
				sampler := &sfSampler{}
				var elicited atomic.Value
				progress := &sfProgressLog{}
				logs := &sfLogLog{}
				cs := sfConnect(t, tr, cfg, &mcp.ClientOptions{
					CreateMessageHandler: sampler.handle,
					ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						elicited.Store(req.Params.Message)
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{
							"name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7,
						}}, nil
					},
					ProgressNotificationHandler: progress.handle,
					LoggingMessageHandler:       logs.handle,
				}, &mcp.ClientSessionOptions{ProtocolVersion: proto}).cs
				modern := cs.InitializeResult().ProtocolVersion >= "2026"
				levelErr := cs.SetLoggingLevel(testCtx(t, callTimeout), &mcp.SetLoggingLevelParams{Level: "debug"})
				if levelErr != nil && !modern {
					t.Fatalf("logging/setLevel: %v", levelErr)
				}
				// A stateless 2026-07-28 client over HTTP is asked through
				// input_required results and its retries (roundtrip.go): the
				// handlers run once and the results are the same.
				for _, srv := range []string{"everything", "evhttp", "evsse"} {
					t.Run(srv+"/sampling", func(t *testing.T) {
						n0, _ := sampler.calls()
						prompt := "sf-" + tr + "-" + srv
						res := sfCall(t, cs, srv+"__trigger-sampling-request", map[string]any{"prompt": prompt, "maxTokens": 50})
						out := contentText(res)
						if res.IsError {
							t.Fatalf("sampling through the proxy failed: %q", out)
						}
						if want := "answer to [Resource trigger-sampling-request context: " + prompt + "]"; !strings.Contains(out, want) || !strings.Contains(out, "sf-model") {
							t.Errorf("sampling: the result %q lacks the client's answer %q and model", tail(out, 400), want)
						}
						if n, caps := sampler.calls(); n != n0+1 || caps[len(caps)-1] != 50 {
							t.Errorf("the sampling handler ran %d times (maxTokens %v), want once more with 50", n-n0, caps)
						}
					})
					t.Run(srv+"/elicitation", func(t *testing.T) {
						elicited.Store("")
						res := sfCall(t, cs, srv+"__trigger-elicitation-request", map[string]any{})
						out := contentText(res)
						if res.IsError {
							t.Fatalf("elicitation through the proxy failed: %q", out)
						}
						for _, want := range []string{"- Name: Ada Lovelace", "- Agreed to terms: true", "- Email: ada@example.com", "- Favorite Integer: 7"} {
							if !strings.Contains(out, want) {
								t.Errorf("elicitation: the result lacks %q: %q", want, tail(out, 600))
							}
						}
						if m, _ := elicited.Load().(string); m != "Please provide inputs for the following fields:" {
							t.Errorf("the elicitation handler saw message %q", m)
						}
					})
					t.Run(srv+"/progress", func(t *testing.T) {
						token := "sf-progress-" + srv
						params := &mcp.CallToolParams{Name: srv + "__trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 4}}
						params.SetProgressToken(token)
						res, err := cs.CallTool(testCtx(t, callTimeout), params)
						if err != nil || res.IsError {
							t.Fatalf("long-running operation: %v %s", err, jsonOf(t, res))
						}
						if !sfWaitFor(5*time.Second, func() bool {
							got := progress.get(token)
							return len(got) > 0 && got[len(got)-1].Progress == 4
						}) {
							t.Errorf("progress with token %q: %s", token, jsonOf(t, progress.get(token)))
						}
						sfCheckProgress(t, progress.get(token), 4)
					})
				}
				for _, tok := range progress.tokens() {
					if !strings.HasPrefix(tok, "string:sf-progress-") {
						t.Errorf("a progress notification with a token the client never sent: %s", tok)
					}
				}

				if modern {
					// A 2026-07-28 client gets log messages only on the stream
					// of a request whose _meta names a level (MCP 2026-07-28,
					// server/utilities/logging: never on a listen, nor outside
					// a request): server-everything's timer logs belong to no
					// request, so they have nowhere to go, on stdio as over
					// HTTP (where the go-sdk's logging/setLevel is also refused
					// with 400).
					return
				}
				t.Run("logging", func(t *testing.T) {
					if levelErr != nil {
						t.Logf("logging/setLevel on %s: %v", cs.InitializeResult().ProtocolVersion, levelErr)
					}
					// On (one message at once, then one every 5 s), then off.
					for _, srv := range []string{"everything", "evhttp"} {
						sfOK(t, cs, srv+"__toggle-simulated-logging", map[string]any{})
					}
					for _, srv := range []string{"everything", "evhttp"} {
						if !sfWaitFor(12*time.Second, func() bool {
							for _, d := range logs.get(srv) {
								if strings.Contains(d, "-level message") || strings.Contains(d, "level-message") {
									return true
								}
							}
							return false
						}) {
							logs.mu.Lock()
							t.Errorf("no simulated log message with logger %q within 12s; messages by logger: %v", srv, logs.data)
							logs.mu.Unlock()
						}
						sfOK(t, cs, srv+"__toggle-simulated-logging", map[string]any{})
					}
					logs.mu.Lock()
					defer logs.mu.Unlock()
					for logger := range logs.data {
						if logger != "everything" && logger != "evhttp" && logger != "evsse" {
							t.Errorf("a log message with logger %q, want the server names only", logger)
						}
					}
				})
			})
		}
	}
}

// TestSurfaceSamplingTwoSessions: two HTTP sessions call server-everything
// (over ITS Streamable HTTP) at once; each one's sampling request reaches
// that session's handler, whose distinct answer comes back to it. Both
// requests are in flight together (each handler waits for the other).
func TestSurfaceSamplingTwoSessions(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "", httpServer("evhttp", everythingHTTP(t)))
	url, _ := startHTTPProxy(t, cfg)
	var entered atomic.Int32
	both := make(chan struct{})
	var closeOnce sync.Once
	handler := func(name string, prompts *[]string, mu *sync.Mutex) func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			mu.Lock()
			*prompts = append(*prompts, sfSamplingText(req))
			mu.Unlock()
			if entered.Add(1) == 2 {
				closeOnce.Do(func() { close(both) })
			}
			select {
			case <-both:
			case <-time.After(10 * time.Second):
			}
			return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: "answer from session " + name}, Model: "m", Role: "assistant"}, nil
		}
	}
	var muA, muB sync.Mutex
	var seenA, seenB []string
	a := sdkHTTP(t, url, &mcp.ClientOptions{CreateMessageHandler: handler("A", &seenA, &muA)}, sfSession())
	b := sdkHTTP(t, url, &mcp.ClientOptions{CreateMessageHandler: handler("B", &seenB, &muB)}, sfSession())
	outs := make([]string, 2)
	var wg sync.WaitGroup
	for i, cs := range []*mcp.ClientSession{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(testCtx(t, callTimeout), &mcp.CallToolParams{Name: "evhttp__trigger-sampling-request",
				Arguments: map[string]any{"prompt": fmt.Sprintf("from session %c", 'A'+i)}})
			if err != nil {
				outs[i] = "error: " + err.Error()
				return
			}
			outs[i] = contentText(res)
		}()
	}
	wg.Wait()
	select {
	case <-both:
	default:
		t.Errorf("the two sampling requests were never in flight together (%d handler calls)", entered.Load())
	}
	for i, name := range []string{"A", "B"} {
		if !strings.Contains(outs[i], "answer from session "+name) {
			t.Errorf("session %s's call got %q, want its own handler's answer", name, tail(outs[i], 300))
		}
	}
	muA.Lock()
	muB.Lock()
	defer muA.Unlock()
	defer muB.Unlock()
	if len(seenA) != 1 || !strings.HasSuffix(seenA[0], "from session A") || len(seenB) != 1 || !strings.HasSuffix(seenB[0], "from session B") {
		t.Errorf("handler A saw %q, handler B saw %q: each must see its own session's request only", seenA, seenB)
	}
}

// TestSurfaceSamplingWithoutClientSupport: a client that did not declare
// sampling: the upstream's sampling request is refused with a clear error,
// and the call completes (server-everything and the fixture alike).
func TestSurfaceSamplingWithoutClientSupport(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "", everythingServer("everything"), fixtureServer("fx", []string{"-no-weird"}))
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			cs := sfConnect(t, tr, cfg, nil, sfSession()).cs
			start := time.Now()
			res := sfCall(t, cs, "everything__trigger-sampling-request", map[string]any{"prompt": "nobody answers"})
			if out := contentText(res); !res.IsError || !strings.Contains(out, "does not support sampling") {
				t.Errorf("server-everything's sampling without client support: isError %v %q", res.IsError, out)
			}
			if got, want := sfToolError(t, cs, "fx__sample", map[string]any{"prompt": "p"}),
				"sample: client error -32601: the client of this call does not support sampling"; got != want {
				t.Errorf("fixture sample without client support: %q, want %q", got, want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the refused sampling calls took %s", took)
			}
		})
	}
}

// TestSurfaceProgressFlood: 5,000 progress notifications as fast as the
// fixture can write them, to a client that takes about 1 ms per
// notification: the last one (5000) arrives, order is kept, and the proxy's
// memory stays bounded.
func TestSurfaceProgressFlood(t *testing.T) {
	t.Parallel()
	const steps = 5000
	cfg := writeConfig(t, "", fixtureServer("fx", []string{"-no-weird"}))
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			progress := &sfProgressLog{delay: time.Millisecond}
			p := sfConnect(t, tr, cfg, &mcp.ClientOptions{ProgressNotificationHandler: progress.handle}, sfSession())
			callTool(t, p.cs, "fx__echo", map[string]any{"text": "warm"})
			hwm0, _ := sfMem(t, p.pid)
			params := &mcp.CallToolParams{Name: "fx__progress", Arguments: map[string]any{"steps": steps, "ms": 0}}
			params.SetProgressToken("flood")
			start := time.Now()
			res, err := p.cs.CallTool(testCtx(t, 2*callTimeout), params)
			callTook := time.Since(start)
			if err != nil || contentText(res) != fmt.Sprintf("progress done: %d steps", steps) {
				t.Fatalf("progress call: %v %s", err, jsonOf(t, res))
			}
			if !sfWaitFor(callTimeout, func() bool {
				got := progress.get("flood")
				return len(got) > 0 && got[len(got)-1].Progress == steps
			}) {
				got := progress.get("flood")
				t.Errorf("the last progress (%d) did not arrive within %s; %d arrived", steps, callTimeout, len(got))
			}
			allTook := time.Since(start)
			got := progress.get("flood")
			sfCheckProgress(t, got, steps)
			hwm1, rss1 := sfMem(t, p.pid)
			t.Logf("FIGURES progress flood over %s (%s): %d of %d notifications delivered to a 1 ms/notification client; "+
				"call returned after %s, last notification after %s; proxy VmHWM %d -> %d KiB (+%d), VmRSS %d KiB",
				tr, sfBuild(), len(got), steps, callTook.Round(time.Millisecond), allTook.Round(time.Millisecond), hwm0, hwm1, hwm1-hwm0, rss1)
			if hwm1-hwm0 > 256<<10 {
				t.Errorf("the proxy's peak memory grew by %d KiB relaying %d progress notifications", hwm1-hwm0, steps)
			}
		})
	}
}

// TestSurfaceCancel: cancelling the go-sdk call's context mid-call, over
// stdio and over HTTP, on both protocol eras, reaches the upstream: the
// fixture records notifications/cancelled for its sleep in flight, and the
// client's connection goes on.
func TestSurfaceCancel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ tr, proto string }{{"stdio", "2025-11-25"}, {"http", "2025-11-25"}, {"stdio", ""}, {"http", ""}} {
		t.Run(c.tr+"/"+cmp.Or(c.proto, "sdk default"), func(t *testing.T) {
			t.Parallel()
			srv, record := sfRecorder(t, "fx", []string{"-no-weird"})
			cs := sfConnect(t, c.tr, writeConfig(t, "", srv), nil, &mcp.ClientSessionOptions{ProtocolVersion: c.proto}).cs
			start := time.Now()
			err := sfCancelAfter(t, func() bool { return sfRecordHas(t, record, `"tool":"sleep"`) }, func(ctx context.Context) error {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__sleep", Arguments: map[string]any{"ms": 5000}})
				return err
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("the cancelled call returned %v, want context.Canceled", err)
			}
			if !sfWaitFor(10*time.Second, func() bool {
				return sfRecordHas(t, record, `"cancelled"`, `"inflight":true`, `"method":"tools/call"`, `"tool":"sleep"`)
			}) {
				t.Errorf("the fixture recorded no cancellation of its sleep in flight:\n%s", strings.Join(sfRecordLines(t, record), "\n"))
			}
			if took := time.Since(start); took >= 5*time.Second {
				t.Errorf("the cancellation reached the upstream only after %s, the sleep's own length", took)
			}
			res, err := cs.CallTool(testCtx(t, callTimeout), &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "after cancel"}})
			if err != nil || contentText(res) != "after cancel" {
				t.Errorf("the client's next call after the cancellation failed: %v %s", err, jsonOf(t, res))
			}
		})
	}
}

// TestSurfaceSamplingRate: servers.fx.sampling.max_rpm 2: the fixture's
// third sampling request within a minute is refused with a clear error that
// names the setting, the first two reach the client, and /metrics counts
// mcp_proxy_sampling_requests_total{server="fx",outcome="refused_rate"} 1.
// max_tokens_cap lowers the request's maxTokens (64) to the cap.
func TestSurfaceSamplingRate(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "metrics: {listen: \"127.0.0.1:0\"}\n",
		fixtureServer("fx", []string{"-no-weird"}, "sampling: {max_rpm: 2, max_tokens_cap: 16}"))
	sampler := &sfSampler{}
	p := sfStdioProxy(t, cfg, &mcp.ClientOptions{CreateMessageHandler: sampler.handle}, sfSession())
	metricsURL := sfMetricsURL(t, p.stderr)
	for i := 1; i <= 2; i++ {
		prompt := fmt.Sprintf("prompt %d", i)
		if got, want := sfOK(t, p.cs, "fx__sample", map[string]any{"prompt": prompt}), "answer to ["+prompt+"]"; got != want {
			t.Errorf("sample %d: %q, want %q", i, got, want)
		}
	}
	want := "sample: client error -32000: sampling refused: MCP server 'fx' made more than 2 requests in the last minute (servers.fx.sampling.max_rpm)"
	if got := sfToolError(t, p.cs, "fx__sample", map[string]any{"prompt": "prompt 3"}); got != want {
		t.Errorf("the third sample: %q, want %q", got, want)
	}
	if n, caps := sampler.calls(); n != 2 || caps[0] != 16 || caps[1] != 16 {
		t.Errorf("the client was asked %d times with maxTokens %v, want 2 × 16 (the cap)", n, caps)
	}
	const name = "mcp_proxy_sampling_requests_total"
	if got := sfMetric(t, metricsURL, name, `server="fx"`, `outcome="refused_rate"`); got != 1 {
		t.Errorf(`%s{server="fx",outcome="refused_rate"} = %v, want 1`, name, got)
	}
	if got := sfMetric(t, metricsURL, name, `server="fx"`, `outcome="ok"`); got != 2 {
		t.Errorf(`%s{server="fx",outcome="ok"} = %v, want 2`, name, got)
	}
}

// TestSurfaceSampledResource: a resources/read whose upstream asks the
// client for sampling (the fixture's fixture://sampled) reaches the go-sdk
// client's handler over stdio and HTTP, on 2025-11-25 (the session's own
// stream) and on the go-sdk default 2026-07-28 (over HTTP a multi round
// trip: input_required, then the retry with the answer); the contents
// carry the client's answer and the handler runs once.
func TestSurfaceSampledResource(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "", fixtureServer("fx", []string{"-no-weird", "-sampled-resource"}))
	for _, tr := range []string{"stdio", "http"} {
		for _, proto := range []string{"2025-11-25", ""} {
			t.Run(tr+"/"+cmp.Or(proto, "sdk default"), func(t *testing.T) {
				t.Parallel()
				sampler := &sfSampler{}
				cs := sfConnect(t, tr, cfg, &mcp.ClientOptions{CreateMessageHandler: sampler.handle},
					&mcp.ClientSessionOptions{ProtocolVersion: proto}).cs
				list, err := cs.ListResources(testCtx(t, callTimeout), nil)
				if err != nil {
					t.Fatalf("resources/list: %v", err)
				}
				uri := ""
				for _, r := range list.Resources {
					if strings.HasSuffix(r.URI, "fixture://sampled") {
						uri = r.URI
					}
				}
				if uri == "" {
					t.Fatalf("no sampled resource listed: %s", jsonOf(t, list))
				}
				res, err := cs.ReadResource(testCtx(t, callTimeout), &mcp.ReadResourceParams{URI: uri})
				if err != nil {
					t.Fatalf("resources/read %s: %v", uri, err)
				}
				want := "sampled: answer to [describe the sampled resource]"
				if len(res.Contents) != 1 || res.Contents[0].Text != want {
					t.Errorf("contents = %s; want the text %q", jsonOf(t, res.Contents), want)
				}
				if n, _ := sampler.calls(); n != 1 {
					t.Errorf("the sampling handler ran %d times, want once", n)
				}
			})
		}
	}
}
