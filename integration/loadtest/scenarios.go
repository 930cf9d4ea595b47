package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Scenario shapes and bounds.
const (
	// fleetSize and toolsEach make the 20 × 100 = 2000-tool catalog of the
	// list, cold start and memory scenarios.
	fleetSize = 20
	toolsEach = 100
	// rssCalls and rssLists are the load before peak RSS is read.
	rssCalls = 1000
	rssLists = 20
	// pipelineDepth is the concurrency of the c8 scenarios and the memory load.
	pipelineDepth = 8
	// maxWarmup bounds the unmeasured requests that warm each side up.
	maxWarmup = 100
	// pollEvery and maxPolls bound waiting for a catalog to be complete:
	// maxPolls × pollEvery is longer than the proxy's 10 s startup_wait.
	pollEvery = 10 * time.Millisecond
	maxPolls  = 3000
	// maxListPages bounds following tools/list cursors.
	maxListPages = 1000
)

// scenario is one measurement, run once per upstream it lists: run returns
// a result with its sides filled.
type scenario struct {
	name      string
	upstreams []string
	target    target
	run       func(ctx context.Context, e *env, upstream string) (*result, error)
}

// optIn are the scenarios that run only when -scenarios names them: they
// take minutes, or more of the machine than the others, or (store-*) need
// a redis-server.
var optIn = map[string]bool{"sessions-http": true,
	"store-http-c1": true, "store-http-c8": true, "store-http-c1-limited": true, "store-http-c8-limited": true}

// The upstreams of the scenarios: the call scenarios run with both; the
// catalog and process scenarios need the fixture's synthetic tools.
var (
	bothUpstreams = []string{upGoSDK, upFixture}
	fixtureOnly   = []string{upFixture}
)

// scenarios is every scenario, in report order. The targets of the call
// scenarios are issue 14's, judged with the go-sdk upstream against the
// floor measured in the same rounds.
var scenarios = []scenario{
	{"call-stdio-c1", bothUpstreams, target{measure: "p50", base: sideFloor, limit: 1.3, atMost: true, upstream: upGoSDK}, callStdio(1, 0, false)},
	{"call-stdio-c8", bothUpstreams, target{measure: "throughput", base: sideFloor, limit: 0.85, upstream: upGoSDK}, callStdio(pipelineDepth, 0, false)},
	{"call-http-c1", bothUpstreams, target{measure: "p50", base: sideFloor, limit: 1.5, atMost: true, upstream: upGoSDK}, callHTTP(1, 0)},
	{"call-http-c8", bothUpstreams, target{measure: "throughput", base: sideFloor, limit: 0.85, upstream: upGoSDK}, callHTTP(pipelineDepth, 0)},
	{"call-64k-stdio", bothUpstreams, target{measure: "p50", base: sideDirect, limit: 1.3, atMost: true, upstream: upGoSDK}, callStdio(1, 64<<10, false)},
	{"call-64k-http", bothUpstreams, target{measure: "p50", base: sideDirect, limit: 1.3, atMost: true, upstream: upGoSDK}, callHTTP(1, 64<<10)},
	{"call-1m", fixtureOnly, target{measure: "added", base: sideDirect, limit: 1, atMost: true}, callStdio(1, 1<<20, true)},
	{"call-httpup-c8", bothUpstreams, target{}, callHTTPUpstream(pipelineDepth)},
	{"list-20x100", fixtureOnly, target{measure: "p50", base: sideDirect, limit: 1.1, atMost: true}, listFleet},
	{"coldstart-20", fixtureOnly, target{measure: "p50", base: sideDirect, limit: 2, atMost: true}, coldStart},
	{"rss-20x100", fixtureOnly, target{measure: "rss", limit: 30, below: true}, rssFleet},
	// Issue 38: every feature on against the bare proxy, and each alone.
	{"features-http-c1", bothUpstreams, target{measure: "p50", base: sideBare, side: sideFull, limit: 1.1, atMost: true, upstream: upGoSDK}, featureCalls(true, 1, fullAndBare)},
	{"features-http-c8", bothUpstreams, target{measure: "throughput", base: sideBare, side: sideFull, limit: 0.9, upstream: upGoSDK}, featureCalls(true, pipelineDepth, fullAndBare)},
	{"features-stdio-c1", bothUpstreams, target{measure: "p50", base: sideBare, side: sideFull, limit: 1.1, atMost: true, upstream: upGoSDK}, featureCalls(false, 1, fullAndBare)},
	{"features-stdio-c8", bothUpstreams, target{measure: "throughput", base: sideBare, side: sideFull, limit: 0.9, upstream: upGoSDK}, featureCalls(false, pipelineDepth, fullAndBare)},
	{"features-each-http", bothUpstreams, target{}, featureCalls(true, 1, eachFeature)},
	{"features-each-stdio", bothUpstreams, target{}, featureCalls(false, 1, eachFeature)},
	{"sessions-http", bothUpstreams, target{}, sessionsHTTP},
	// Issue 32's: the proxy on a Redis store against the same proxy on the
	// memory store, in the same rounds.
	{"store-http-c1", bothUpstreams, target{measure: "p50", base: sideMemory, limit: 1.3, atMost: true, upstream: upGoSDK}, callStore(1, false)},
	{"store-http-c8", bothUpstreams, target{measure: "throughput", base: sideMemory, limit: 0.8, upstream: upGoSDK}, callStore(pipelineDepth, false)},
	{"store-http-c1-limited", bothUpstreams, target{measure: "p50", base: sideMemory, limit: 1.3, atMost: true, upstream: upGoSDK}, callStore(1, true)},
	{"store-http-c8-limited", bothUpstreams, target{measure: "throughput", base: sideMemory, limit: 0.8, upstream: upGoSDK}, callStore(pipelineDepth, true)},
}

// side is one way to the upstream: check verifies a full answer once, op is
// one measured operation (i counts from 0 within a batch). proc, when set,
// is the process in the proxy's place, whose CPU time is reported; extra,
// when set, a helper of that process (an OTLP sink) whose CPU time is
// reported apart.
type side struct {
	name  string
	proc  *proc
	extra *proc
	check func(ctx context.Context) error
	op    func(ctx context.Context, i int) error
}

// callStdio measures tools/call of echo over stdio at concurrency conc,
// the upstream padding the text to payload bytes (0: no padding): direct,
// through the line relay, and through the proxy. large scenarios send fewer
// requests (see env.largeN).
func callStdio(conc, payload int, large bool) func(context.Context, *env, string) (*result, error) {
	return func(ctx context.Context, e *env, u string) (res *result, err error) {
		spec, err := e.upstreamSpec(u, payload)
		if err != nil {
			return nil, err
		}
		direct, err := dialStdio(ctx, e.fleet, spec)
		if err != nil {
			return nil, err
		}
		defer joinErr(&err, direct.close)
		if spec, err = e.floorSpec(roleRelay, u, payload); err != nil {
			return nil, err
		}
		floor, err := dialStdio(ctx, e.fleet, spec)
		if err != nil {
			return nil, err
		}
		defer joinErr(&err, floor.close)
		sc, err := e.upstreamServer(u, payload)
		if err != nil {
			return nil, err
		}
		cfg, err := e.writeConfig(map[string]serverConfig{"fx": sc})
		if err != nil {
			return nil, err
		}
		proxy, err := dialStdio(ctx, e.fleet, e.proxySpec(cfg))
		if err != nil {
			return nil, err
		}
		defer joinErr(&err, proxy.close)
		if _, err := waitTools(ctx, proxy, hasTool("fx__echo")); err != nil {
			return nil, fmt.Errorf("proxy: %w (%s)", err, proxy.proc.failure())
		}
		n := e.o.n
		if large {
			n = e.largeN()
		}
		return e.measure(ctx, []*side{
			echoSide(sideDirect, direct, nil, "echo", payload),
			echoSide(sideFloor, floor, floor.proc, "echo", payload),
			echoSide(sideProxy, proxy, proxy.proc, "fx__echo", payload),
		}, n, conc)
	}
}

// callHTTP measures tools/call of echo over Streamable HTTP with a stdio
// upstream behind: direct is the upstream's own HTTP mode (the same server
// code answering HTTP itself; a reference only, the targets are against the
// floor), the floor is the bridge over a stdio upstream, the proxy serves
// HTTP with the same stdio upstream, and so does the peer with -peer (with
// the go-sdk upstream only: the peer's mcp-go client refuses the fixture's
// catalog, whose edge-case schema holds the number 1e400).
func callHTTP(conc, payload int) func(context.Context, *env, string) (*result, error) {
	return func(ctx context.Context, e *env, u string) (res *result, err error) {
		var cl closers
		defer joinErr(&err, cl.close)
		spec, err := e.upstreamHTTPSpec(u, payload)
		direct, err := e.openHTTP(ctx, &cl, spec, err)
		if err != nil {
			return nil, err
		}
		spec, err = e.floorSpec(roleBridge, u, payload)
		floor, err := e.openHTTP(ctx, &cl, spec, err)
		if err != nil {
			return nil, err
		}
		sc, err := e.upstreamServer(u, payload)
		if err != nil {
			return nil, err
		}
		proxy, err := e.startHTTPProxy(ctx, &cl, sc)
		if err != nil {
			return nil, err
		}
		sides := []*side{
			echoSide(sideDirect, direct.c, nil, "echo", payload),
			echoSide(sideFloor, floor.c, floor.proc, "echo", payload),
			echoSide(sideProxy, proxy.c, proxy.proc, "fx__echo", payload),
		}
		if e.o.peer != "" && u == upGoSDK {
			spec, err = e.peerSpec(u, payload)
			peer, err := e.openHTTP(ctx, &cl, spec, err)
			if err != nil {
				return nil, err
			}
			if _, err := waitTools(ctx, peer.c, hasTool("echo")); err != nil {
				return nil, fmt.Errorf("peer: %w (%s)", err, peer.proc.failure())
			}
			sides = append(sides, echoSide(sidePeer, peer.c, peer.proc, "echo", payload))
		}
		return e.measure(ctx, sides, e.o.n, conc)
	}
}

// callHTTPUpstream measures tools/call of echo over Streamable HTTP with an
// HTTP upstream: direct is the upstream's HTTP endpoint, the floor a plain
// reverse proxy in front of it, the proxy has it as its url: upstream.
func callHTTPUpstream(conc int) func(context.Context, *env, string) (*result, error) {
	return func(ctx context.Context, e *env, u string) (res *result, err error) {
		var cl closers
		defer joinErr(&err, cl.close)
		spec, err := e.upstreamHTTPSpec(u, 0)
		direct, err := e.openHTTP(ctx, &cl, spec, err)
		if err != nil {
			return nil, err
		}
		self, err := selfPath()
		floor, err := e.openHTTP(ctx, &cl, procSpec{name: roleReverseProxy, path: self, args: []string{direct.url},
			ready: fixtureURL, env: roleEnvOf(roleReverseProxy)}, err)
		if err != nil {
			return nil, err
		}
		proxy, err := e.startHTTPProxy(ctx, &cl, serverConfig{URL: direct.url})
		if err != nil {
			return nil, err
		}
		return e.measure(ctx, []*side{
			echoSide(sideDirect, direct.c, nil, "echo", 0),
			echoSide(sideFloor, floor.c, floor.proc, "echo", 0),
			echoSide(sideProxy, proxy.c, proxy.proc, "fx__echo", 0),
		}, e.o.n, conc)
	}
}

// closers are a scenario's HTTP endpoints, closed at its end, newest first.
type closers []func() error

func (cl *closers) close() error {
	var errs []error
	for i := len(*cl) - 1; i >= 0; i-- {
		errs = append(errs, (*cl)[i]())
	}
	*cl = nil
	return errors.Join(errs...)
}

// openHTTP starts the HTTP server spec describes (specErr is the error of
// building spec, returned as it is) and opens a session there, to be
// closed with cl.
func (e *env) openHTTP(ctx context.Context, cl *closers, spec procSpec, specErr error) (*httpEndpoint, error) {
	if specErr != nil {
		return nil, specErr
	}
	h, err := e.startHTTP(ctx, spec)
	if err != nil {
		return nil, err
	}
	*cl = append(*cl, func() error { return h.close(ctx) })
	return h, nil
}

// httpEndpoint is a started HTTP server process with a session open on it.
type httpEndpoint struct {
	proc *proc
	url  string
	c    *httpClient
}

// closeTimeout bounds ending an HTTP session, which also runs after the
// scenario's context has ended.
const closeTimeout = 10 * time.Second

// close ends the session, then the process.
func (h *httpEndpoint) close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	return errors.Join(h.c.close(ctx), h.proc.stop())
}

// startHTTP starts spec, waits for the URL in its ready line and opens a
// session there. On error nothing is left running.
func (e *env) startHTTP(ctx context.Context, spec procSpec) (*httpEndpoint, error) {
	return e.startHTTPToken(ctx, spec, "")
}

// startHTTPToken is startHTTP with a client that sends token as a bearer
// token ("" none).
func (e *env) startHTTPToken(ctx context.Context, spec procSpec, token string) (*httpEndpoint, error) {
	p, url, err := e.fleet.startReady(ctx, spec)
	if err != nil {
		if p != nil {
			err = errors.Join(err, p.stop())
		}
		return nil, err
	}
	c, err := dialHTTPRetry(ctx, url, token)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w (%s)", spec.name, err, p.failure()), p.stop())
	}
	return &httpEndpoint{proc: p, url: url, c: c}, nil
}

// startHTTPProxy starts the proxy serving Streamable HTTP with one upstream,
// fx, to be closed with cl, and waits until it lists fx__echo.
func (e *env) startHTTPProxy(ctx context.Context, cl *closers, upstream serverConfig) (*httpEndpoint, error) {
	return e.startHTTPProxyWith(ctx, cl, upstream, nil, nil)
}

// startHTTPProxyWith is startHTTPProxy with the config edited by edit
// (nil: none) and env added to the proxy's environment.
func (e *env) startHTTPProxyWith(ctx context.Context, cl *closers, upstream serverConfig, edit func(*proxyConfig), env []string) (*httpEndpoint, error) {
	cfg, err := e.writeConfigWith(map[string]serverConfig{"fx": upstream}, edit)
	if err != nil {
		return nil, err
	}
	return e.startHTTPProxyEnv(ctx, cl, cfg, "", env)
}

// startHTTPProxyConfig starts the proxy serving Streamable HTTP with config
// file cfg, whose one upstream is fx, to be closed with cl, and waits until
// it lists fx__echo. The client sends token as a bearer token ("" none).
func (e *env) startHTTPProxyConfig(ctx context.Context, cl *closers, cfg, token string) (*httpEndpoint, error) {
	return e.startHTTPProxyEnv(ctx, cl, cfg, token, nil)
}

// startHTTPProxyEnv is startHTTPProxyConfig with env added to the proxy's
// environment.
func (e *env) startHTTPProxyEnv(ctx context.Context, cl *closers, cfg, token string, env []string) (*httpEndpoint, error) {
	// The URL line is logged at info; the config's warn level would hide it.
	spec := procSpec{name: "mcp-proxy (http)", path: e.o.proxy,
		args: []string{"serve", "--config", cfg, "--listen", loopback + ":0", "--log-level", "info"}, ready: proxyURL, env: env}
	h, err := e.startHTTPToken(ctx, spec, token)
	if err != nil {
		return nil, err
	}
	*cl = append(*cl, func() error { return h.close(ctx) })
	if _, err := waitTools(ctx, h.c, hasTool("fx__echo")); err != nil {
		return nil, fmt.Errorf("proxy: %w (%s)", err, h.proc.failure())
	}
	return h, nil
}

// listFleet measures tools/list of 20 upstreams × 100 tools through the
// proxy against one fixture with all 2000 tools, on warm connections.
func listFleet(ctx context.Context, e *env, _ string) (res *result, err error) {
	direct, proxy, err := e.dialFleet(ctx)
	if err != nil {
		return nil, err
	}
	defer joinErr(&err, proxy.close)
	defer joinErr(&err, direct.close)
	return e.measure(ctx, []*side{listSide(sideDirect, direct, nil), listSide(sideProxy, proxy, proxy.proc)}, e.largeN(), 1)
}

// coldStart times spawn → first complete tools/list, rounds times each side
// in rotating order: one fixture with the whole catalog (direct), the 20
// fleet fixtures started at once and listed directly (floor), and the
// 20-upstream proxy. The summaries' p50 is the median.
func coldStart(ctx context.Context, e *env, _ string) (*result, error) {
	cfg, err := e.writeConfig(fleetServers(e))
	if err != nil {
		return nil, err
	}
	starts := []func() (time.Duration, error){
		func() (time.Duration, error) {
			return timeToCatalog(ctx, e.fleet, e.fixtureSpec("fixture", fullCatalogArgs))
		},
		func() (time.Duration, error) { return e.fleetToCatalogs(ctx) },
		func() (time.Duration, error) { return timeToCatalog(ctx, e.fleet, e.proxySpec(cfg)) },
	}
	names := []string{sideDirect, sideFloor, sideProxy}
	acc := make([]samples, len(starts))
	for r := 0; r < e.o.rounds; r++ {
		for _, i := range roundOrder(r, len(starts)) {
			d, err := starts[i]()
			if err != nil {
				return nil, fmt.Errorf("%s cold start %d: %w", names[i], r+1, err)
			}
			acc[i].add([]time.Duration{d}, 0)
			e.progressf("  cold start %d/%d %-6s %7.1f ms", r+1, e.o.rounds, names[i], ms(d))
		}
	}
	sums := map[string]summary{}
	for i, name := range names {
		sums[name] = acc[i].summarize(false)
	}
	return newResult(sums), nil
}

// timeToCatalog spawns spec and returns the time until a tools/list answer
// holds the whole catalog; the process is stopped before it returns.
func timeToCatalog(ctx context.Context, f *fleet, spec procSpec) (d time.Duration, err error) {
	t0 := time.Now()
	c, err := dialStdio(ctx, f, spec)
	if err != nil {
		return 0, err
	}
	defer joinErr(&err, c.close)
	if _, err := waitTools(ctx, c, hasCount(fleetSize*toolsEach)); err != nil {
		return 0, fmt.Errorf("%w (%s)", err, c.proc.failure())
	}
	return time.Since(t0), nil
}

// rssFleet loads the 20 × 100 proxy with lists and calls, then reads its
// peak RSS; the direct fixture gets the same load for reference.
func rssFleet(ctx context.Context, e *env, _ string) (res *result, err error) {
	direct, proxy, err := e.dialFleet(ctx)
	if err != nil {
		return nil, err
	}
	defer joinErr(&err, proxy.close)
	defer joinErr(&err, direct.close)
	calls := min(rssCalls, e.o.n)
	sums := map[string]summary{}
	for _, c := range []struct {
		name string
		conn *stdioConn
	}{{sideDirect, direct}, {sideProxy, proxy}} {
		list := listSide(c.name, c.conn, nil)
		if err := list.check(ctx); err != nil {
			return nil, err
		}
		if _, _, err := runOps(ctx, list.op, rssLists, 1); err != nil {
			return nil, err
		}
		lat, wall, err := runOps(ctx, syntheticCall(c.conn, c.name == sideProxy), calls, pipelineDepth)
		if err != nil {
			return nil, err
		}
		var s samples
		s.add(lat, wall)
		sum := s.summarize(true)
		rss, err := c.conn.proc.peakRSSBytes()
		if err != nil {
			return nil, err
		}
		sum.PeakRSSMB = mib(rss)
		sums[c.name] = sum
	}
	return newResult(sums), nil
}

// syntheticCall calls tool_0001 of each upstream in turn (through the
// proxy) or of the one fixture (direct).
func syntheticCall(c client, viaProxy bool) func(context.Context, int) error {
	return func(ctx context.Context, i int) error {
		name := "tool_0001"
		if viaProxy {
			name = fmt.Sprintf("fx%d__tool_0001", i%fleetSize+1)
		}
		params := json.RawMessage(`{"name":"` + name + `","arguments":{"query":"load"}}`)
		res, err := c.request(ctx, "tools/call", params)
		if err != nil {
			return err
		}
		return checkText(res, "tool_0001 ok")
	}
}

// dialFleet starts the full-catalog fixture and the 20-upstream proxy and
// waits until both list all 2000 tools.
func (e *env) dialFleet(ctx context.Context) (direct, proxy *stdioConn, err error) {
	cfg, err := e.writeConfig(fleetServers(e))
	if err != nil {
		return nil, nil, err
	}
	direct, err = dialStdio(ctx, e.fleet, e.fixtureSpec("fixture", fullCatalogArgs))
	if err != nil {
		return nil, nil, err
	}
	proxy, err = dialStdio(ctx, e.fleet, e.proxySpec(cfg))
	if err != nil {
		return nil, nil, errors.Join(err, direct.close())
	}
	for _, c := range []*stdioConn{direct, proxy} {
		if _, err := waitTools(ctx, c, hasCount(fleetSize*toolsEach)); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("%w (%s)", err, c.proc.failure()), proxy.close(), direct.close())
		}
	}
	return direct, proxy, nil
}

// fullCatalogArgs make one fixture list the whole 2000-tool catalog.
var fullCatalogArgs = []string{"-tools", strconv.Itoa(fleetSize * toolsEach), "-only-synthetic"}

// fleetServers is the proxy's 20 upstreams fx1..fx20 of 100 tools each.
func fleetServers(e *env) map[string]serverConfig {
	servers := map[string]serverConfig{}
	for i := 1; i <= fleetSize; i++ {
		name := fmt.Sprintf("fx%d", i)
		servers[name] = serverConfig{Command: e.o.fixture,
			Args: []string{"-tools", strconv.Itoa(toolsEach), "-only-synthetic", "-name", name}}
	}
	return servers
}

// measure warms every side up, then runs n operations on each in rounds
// whose side order rotates, and summarizes them. The CPU time of each
// side's process is read before its first and after its last measured batch
// (it idles while the other sides run), so the clock tick's rounding counts
// once, not once per batch.
func (e *env) measure(ctx context.Context, sides []*side, n, conc int) (*result, error) {
	warm := min(max(n/20, 1), maxWarmup)
	for _, s := range sides {
		if err := s.check(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		if _, _, err := runOps(ctx, s.op, warm, conc); err != nil {
			return nil, fmt.Errorf("%s warm-up: %w", s.name, err)
		}
	}
	acc := make([]samples, len(sides))
	cpu0 := make([]time.Duration, len(sides))
	extra0 := make([]time.Duration, len(sides))
	for i, s := range sides {
		var err error
		if s.proc != nil {
			if cpu0[i], err = s.proc.cpuTime(); err != nil {
				return nil, err
			}
		}
		if s.extra != nil {
			if extra0[i], err = s.extra.cpuTime(); err != nil {
				return nil, err
			}
		}
	}
	for r := 0; r < e.o.rounds; r++ {
		count := n / e.o.rounds
		if r < n%e.o.rounds {
			count++
		}
		for _, i := range roundOrder(r, len(sides)) {
			lat, wall, err := runOps(ctx, sides[i].op, count, conc)
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", sides[i].name, r+1, err)
			}
			acc[i].add(lat, wall)
			e.progressf("  round %d/%d %-6s %5d ops in %8.1f ms", r+1, e.o.rounds, sides[i].name, count, ms(wall))
		}
	}
	sums := map[string]summary{}
	for i, s := range sides {
		if s.proc != nil {
			cpu1, err := s.proc.cpuTime()
			if err != nil {
				return nil, err
			}
			acc[i].cpu, acc[i].hasCPU = cpu1-cpu0[i], true
		}
		if s.extra != nil {
			extra1, err := s.extra.cpuTime()
			if err != nil {
				return nil, err
			}
			acc[i].extraCPU, acc[i].hasExtraCPU = extra1-extra0[i], true
		}
		sums[s.name] = acc[i].summarize(true)
	}
	return newResult(sums), nil
}

// roundOrder is the order of k sides in round r: rotated by one each round,
// so no side always runs on the warmer (or more disturbed) part of a round.
// With two sides it alternates.
func roundOrder(r, k int) []int {
	order := make([]int, k)
	for j := range order {
		order[j] = (r + j) % k
	}
	return order
}

// echoSide calls tool with a short text. check verifies the whole result
// (the padded size when payload > 0); op only needs a non-error response,
// so the client's own work stays the same on every side.
func echoSide(name string, c client, p *proc, tool string, payload int) *side {
	params := json.RawMessage(`{"name":"` + tool + `","arguments":{"text":"ping"}}`)
	want := "ping"
	return &side{
		name: name,
		proc: p,
		check: func(ctx context.Context) error {
			res, err := c.request(ctx, "tools/call", params)
			if err != nil {
				return err
			}
			if payload > 0 {
				return checkTextLen(res, payload)
			}
			return checkText(res, want)
		},
		op: func(ctx context.Context, _ int) error {
			_, err := c.request(ctx, "tools/call", params)
			return err
		},
	}
}

// listSide lists every tool. check verifies the count and learns whether
// the list comes in one page; op then sends one tools/list, or walks every
// page when the list is paged.
func listSide(name string, c client, p *proc) *side {
	paged := true
	return &side{
		name: name,
		proc: p,
		check: func(ctx context.Context) error {
			cat, err := listTools(ctx, c)
			if err != nil {
				return err
			}
			if len(cat.names) != fleetSize*toolsEach {
				return fmt.Errorf("tools/list: %d tools, want %d", len(cat.names), fleetSize*toolsEach)
			}
			paged = cat.pages > 1
			return nil
		},
		op: func(ctx context.Context, _ int) error {
			if paged {
				_, err := listTools(ctx, c)
				return err
			}
			_, err := c.request(ctx, "tools/list", json.RawMessage(`{}`))
			return err
		},
	}
}

// catalog is one complete tools/list walk.
type catalog struct {
	names []string
	pages int
}

// listTools follows tools/list cursors to the end.
func listTools(ctx context.Context, c client) (catalog, error) {
	var cat catalog
	params := json.RawMessage(`{}`)
	for cat.pages < maxListPages {
		res, err := c.request(ctx, "tools/list", params)
		if err != nil {
			return cat, err
		}
		cat.pages++
		var page struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return cat, fmt.Errorf("tools/list: bad result: %w", err)
		}
		for _, t := range page.Tools {
			cat.names = append(cat.names, t.Name)
		}
		if page.NextCursor == "" {
			return cat, nil
		}
		cursor, _ := json.Marshal(page.NextCursor) // a string always marshals
		params = json.RawMessage(`{"cursor":` + string(cursor) + `}`)
	}
	return cat, fmt.Errorf("tools/list: more than %d pages", maxListPages)
}

// waitTools lists tools until done accepts the catalog (the proxy lists
// upstreams as they connect), bounded by maxPolls and ctx.
func waitTools(ctx context.Context, c client, done func([]string) bool) (catalog, error) {
	var last catalog
	for range maxPolls {
		cat, err := listTools(ctx, c)
		if err != nil {
			return cat, err
		}
		if done(cat.names) {
			return cat, nil
		}
		last = cat
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for the tool catalog: %w", ctx.Err())
		case <-time.After(pollEvery):
		}
	}
	return last, fmt.Errorf("tool catalog incomplete after %d lists (%d tools)", maxPolls, len(last.names))
}

func hasTool(name string) func([]string) bool {
	return func(names []string) bool {
		for _, n := range names {
			if n == name {
				return true
			}
		}
		return false
	}
}

func hasCount(n int) func([]string) bool {
	return func(names []string) bool { return len(names) >= n }
}

// toolResult is the part of a tools/call result the checks read.
type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func decodeToolResult(res json.RawMessage) (*toolResult, error) {
	var r toolResult
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("tools/call: bad result: %w", err)
	}
	if r.IsError || len(r.Content) == 0 || r.Content[0].Type != "text" {
		return nil, fmt.Errorf("tools/call: unexpected result %.200s", res)
	}
	return &r, nil
}

func checkText(res json.RawMessage, want string) error {
	r, err := decodeToolResult(res)
	if err != nil {
		return err
	}
	if r.Content[0].Text != want {
		return fmt.Errorf("tools/call: text %.100q, want %q", r.Content[0].Text, want)
	}
	return nil
}

func checkTextLen(res json.RawMessage, want int) error {
	r, err := decodeToolResult(res)
	if err != nil {
		return err
	}
	if got := len(r.Content[0].Text); got != want {
		return fmt.Errorf("tools/call: text of %d bytes, want %d", got, want)
	}
	return nil
}

// joinErr runs f (a deferred close) and joins its error into *err.
func joinErr(err *error, f func() error) {
	if cerr := f(); cerr != nil {
		*err = errors.Join(*err, cerr)
	}
}
