package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// The store scenarios compare the proxy on its memory store (the base,
// side "memory") with the same proxy on a Redis store (side "proxy") over
// Streamable HTTP (docs/shared-state.md).
const (
	// sideMemory is the proxy with the memory store.
	sideMemory = "memory"
	// storeKeyPrefix is the proxy's store.key_prefix there.
	storeKeyPrefix = "mcp-proxy:"
	// tripCalls is how many calls, one at a time, the store round trips
	// are counted over.
	tripCalls = 100
	// Limits of the limited scenarios: high enough never to refuse a call
	// of the run, so that only their cost is measured.
	storePerMinute     = 100_000_000
	storeMaxConcurrent = 64
)

// storeFigures are what a store scenario learns of the Redis store besides
// latencies: the round trips of one tools/call by operation (the proxy's
// mcp_proxy_store_requests_total over tripCalls calls), and the size of a
// go-sdk client's session after two calls (the sum of MEMORY USAGE of the
// keys it made).
type storeFigures struct {
	TripsPerCall map[string]float64 `json:"trips_per_call"`
	SessionBytes int64              `json:"session_bytes"`
	SessionKeys  int                `json:"session_keys"`
}

// callStore measures tools/call over Streamable HTTP at concurrency conc
// through two proxies with the same upstream, one on the memory store and
// one on a Redis store (a redis-server this run starts), with or without
// a per_minute and a max_concurrent limit on the server.
func callStore(conc int, limited bool) func(context.Context, *env, string) (*result, error) {
	return func(ctx context.Context, e *env, u string) (res *result, err error) {
		if e.o.redisServer == "" {
			return nil, errors.New("redis-server not found: give -redis-server or install it (apt-get install redis-server)")
		}
		var cl closers
		defer joinErr(&err, cl.close)
		rs, err := startRedis(ctx, e.fleet, e.o.redisServer, e.dir)
		if err != nil {
			return nil, err
		}
		cl = append(cl, rs.close)
		sc, err := e.upstreamServer(u, 0)
		if err != nil {
			return nil, err
		}
		if limited {
			sc.Limits = &limitsConfig{PerMinute: storePerMinute, MaxConcurrent: storeMaxConcurrent}
		}
		memory, err := e.startHTTPProxy(ctx, &cl, sc)
		if err != nil {
			return nil, err
		}
		metricsAddr, err := testproc.FreePort()
		if err != nil {
			return nil, err
		}
		metricsURL := "http://" + loopback + ":" + strconv.Itoa(metricsAddr) + "/metrics"
		onRedis, err := e.startHTTPProxyWith(ctx, &cl, sc, func(c *proxyConfig) {
			c.Store = map[string]string{"type": "redis", "url": rs.url(), "key_prefix": storeKeyPrefix, "encryption_key": "${MCP_PROXY_LOADTEST_STORE_KEY}"}
			c.Metrics = map[string]string{"listen": loopback + ":" + strconv.Itoa(metricsAddr)}
		}, []string{"MCP_PROXY_LOADTEST_STORE_KEY=" + storeKey})
		if err != nil {
			return nil, err
		}
		res, err = e.measure(ctx, []*side{
			echoSide(sideMemory, memory.c, memory.proc, "fx__echo", 0),
			echoSide(sideProxy, onRedis.c, onRedis.proc, "fx__echo", 0),
		}, e.o.n, conc)
		if err != nil {
			return nil, err
		}
		if res.Store, err = measureStore(ctx, rs, onRedis, metricsURL); err != nil {
			return nil, err
		}
		return res, nil
	}
}

// measureStore counts the store's round trips per call and sizes a go-sdk
// client's session with two calls.
func measureStore(ctx context.Context, rs *redisServer, p *httpEndpoint, metricsURL string) (*storeFigures, error) {
	before, err := storeRequests(ctx, metricsURL)
	if err != nil {
		return nil, err
	}
	op := echoSide(sideProxy, p.c, nil, "fx__echo", 0).op
	for i := range tripCalls {
		if err := op(ctx, i); err != nil {
			return nil, err
		}
	}
	after, err := storeRequests(ctx, metricsURL)
	if err != nil {
		return nil, err
	}
	f := &storeFigures{TripsPerCall: map[string]float64{}}
	for k, v := range after {
		if upkeep(k) {
			continue
		}
		if d := v - before[k]; d > 0 {
			f.TripsPerCall[k] = d / tripCalls
		}
	}
	old, err := rs.keys(ctx, storeKeyPrefix+"session:")
	if err != nil {
		return nil, err
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "loadtest-session", Version: "1.0.0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: p.url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		return nil, fmt.Errorf("go-sdk client: %w", err)
	}
	defer cs.Close()
	for i := range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "session-" + strconv.Itoa(i)}})
		if err != nil || res.IsError {
			return nil, fmt.Errorf("go-sdk client: call %d: %v", i+1, err)
		}
	}
	now, err := rs.keys(ctx, storeKeyPrefix)
	if err != nil {
		return nil, err
	}
	var made []string
	for k := range now {
		if strings.HasPrefix(k, storeKeyPrefix+"session:") && !old[k] {
			made = append(made, k)
		}
	}
	slices.Sort(made)
	if len(made) == 0 {
		return nil, errors.New("the go-sdk client's session made no key in Redis")
	}
	f.SessionKeys = len(made)
	if f.SessionBytes, err = rs.memoryUsage(ctx, made); err != nil {
		return nil, err
	}
	return f, nil
}

// upkeep reports whether op/outcome key k is the store's own upkeep, which
// runs on its own clock beside the calls: the ping, the replica's liveness
// key and the read of its inbox.
func upkeep(k string) bool {
	op, _, _ := strings.Cut(k, "/")
	return op == "ping" || op == "replica_alive" || op == "inbox_read"
}

// storeRequests reads mcp_proxy_store_requests_total, keyed "op/outcome".
func storeRequests(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("metrics: %s: %s", resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "mcp_proxy_store_requests_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %w", sc.Text(), err)
		}
		out[labelValue(labels, "op")+"/"+labelValue(labels, "outcome")] = v
	}
	return out, sc.Err()
}

// labelValue is the value of label name in a Prometheus label list.
func labelValue(labels, name string) string {
	for _, l := range strings.Split(labels, ",") {
		if v, ok := strings.CutPrefix(l, name+"="); ok {
			if s, err := strconv.Unquote(v); err == nil {
				return s
			}
		}
	}
	return ""
}

// tripsText is the round trips per call, "op outcome n" by op.
func (f *storeFigures) tripsText() string {
	keys := make([]string, 0, len(f.TripsPerCall))
	total := 0.0
	for k, v := range f.TripsPerCall {
		keys = append(keys, k)
		total += v
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, f.TripsPerCall[k])
	}
	list := strings.Join(parts, ", ")
	if list == "" {
		list = "none"
	}
	return fmt.Sprintf("%.2f store round trips a call (%s); a go-sdk session with 2 calls: %d B in %d key(s)",
		total, list, f.SessionBytes, f.SessionKeys)
}
