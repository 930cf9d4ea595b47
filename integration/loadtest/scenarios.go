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

// scenario is one measurement: run returns a result with both sides filled.
type scenario struct {
	name   string
	target target
	run    func(ctx context.Context, e *env) (*result, error)
}

// scenarios is every scenario, in report order.
var scenarios = []scenario{
	{"call-stdio-c1", target{measure: "p50", limit: 1.5, atMost: true}, callStdio(1, 0, false)},
	{"call-stdio-c8", target{measure: "throughput", limit: 0.7}, callStdio(pipelineDepth, 0, false)},
	{"call-http-c1", target{}, callHTTP(1)},
	{"call-http-c8", target{measure: "throughput", limit: 0.9}, callHTTP(pipelineDepth)},
	{"call-64k", target{measure: "added", limit: 1, atMost: true}, callStdio(1, 64<<10, false)},
	{"call-1m", target{measure: "added", limit: 1, atMost: true}, callStdio(1, 1<<20, true)},
	{"list-20x100", target{measure: "p50", limit: 1.3, atMost: true}, listFleet},
	{"coldstart-20", target{measure: "p50", limit: 2, atMost: true}, coldStart},
	{"rss-20x100", target{measure: "rss", limit: 40, below: true}, rssFleet},
	// Floors (floor.go): the thinnest stand-in in the proxy's place.
	{"floor-call-stdio-c1", target{}, floorCallStdio(1)},
	{"floor-call-stdio-c8", target{}, floorCallStdio(pipelineDepth)},
	{"floor-call-http-c8", target{}, floorCallHTTP(pipelineDepth)},
	{"floor-coldstart-20", target{}, floorColdStart},
}

// side is one way to the upstream, direct or through the proxy: check
// verifies a full answer once, op is one measured operation (i counts from
// 0 within a batch).
type side struct {
	label string
	check func(ctx context.Context) error
	op    func(ctx context.Context, i int) error
}

// callStdio measures tools/call of echo over stdio at concurrency conc,
// the fixture padding the text to payload bytes (0: no padding). large
// scenarios send fewer requests (see env.largeN).
func callStdio(conc, payload int, large bool) func(context.Context, *env) (*result, error) {
	return func(ctx context.Context, e *env) (res *result, err error) {
		var fxArgs []string
		if payload > 0 {
			fxArgs = []string{"-payload-bytes", strconv.Itoa(payload)}
		}
		direct, err := dialStdio(ctx, e.fleet, e.fixtureSpec("fixture", fxArgs))
		if err != nil {
			return nil, err
		}
		defer joinErr(&err, direct.close)
		cfg, err := e.writeConfig(map[string]serverConfig{"fx": {Command: e.o.fixture, Args: fxArgs}})
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
		sides := [2]*side{echoSide("direct", direct, "echo", payload), echoSide("proxy", proxy, "fx__echo", payload)}
		return e.measure(ctx, sides, n, conc)
	}
}

// callHTTP measures tools/call of echo over Streamable HTTP: one fixture
// HTTP server, reached directly and through an HTTP proxy.
func callHTTP(conc int) func(context.Context, *env) (*result, error) {
	return func(ctx context.Context, e *env) (res *result, err error) {
		fx, url, err := e.fleet.startReady(ctx, e.httpFixtureSpec())
		if fx != nil {
			defer joinErr(&err, fx.stop)
		}
		if err != nil {
			return nil, err
		}
		direct, err := dialHTTP(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("fixture: %w (%s)", err, fx.failure())
		}
		defer joinErr(&err, func() error { return direct.close(ctx) })
		cfg, err := e.writeConfig(map[string]serverConfig{"fx": {URL: url}})
		if err != nil {
			return nil, err
		}
		// The URL line is logged at info; the config's warn level would hide it.
		px, purl, err := e.fleet.startReady(ctx, procSpec{name: "mcp-proxy (http)", path: e.o.proxy,
			args: []string{"serve", "--config", cfg, "--listen", loopback + ":0", "--log-level", "info"}, ready: proxyURL})
		if px != nil {
			defer joinErr(&err, px.stop)
		}
		if err != nil {
			return nil, err
		}
		proxy, err := dialHTTP(ctx, purl)
		if err != nil {
			return nil, fmt.Errorf("proxy: %w (%s)", err, px.failure())
		}
		defer joinErr(&err, func() error { return proxy.close(ctx) })
		if _, err := waitTools(ctx, proxy, hasTool("fx__echo")); err != nil {
			return nil, fmt.Errorf("proxy: %w (%s)", err, px.failure())
		}
		sides := [2]*side{echoSide("direct", direct, "echo", 0), echoSide("proxy", proxy, "fx__echo", 0)}
		return e.measure(ctx, sides, e.o.n, conc)
	}
}

// listFleet measures tools/list of 20 upstreams × 100 tools through the
// proxy against one fixture with all 2000 tools, on warm connections.
func listFleet(ctx context.Context, e *env) (res *result, err error) {
	direct, proxy, err := e.dialFleet(ctx)
	if err != nil {
		return nil, err
	}
	defer joinErr(&err, proxy.close)
	defer joinErr(&err, direct.close)
	sides := [2]*side{listSide("direct", direct), listSide("proxy", proxy)}
	return e.measure(ctx, sides, e.largeN(), 1)
}

// coldStart times spawn → first complete tools/list, rounds times each side
// alternately; the summaries' p50 is the median.
func coldStart(ctx context.Context, e *env) (*result, error) {
	cfg, err := e.writeConfig(fleetServers(e))
	if err != nil {
		return nil, err
	}
	specs := [2]procSpec{e.fixtureSpec("fixture", fullCatalogArgs), e.proxySpec(cfg)}
	var acc [2]samples
	for r := 0; r < e.o.rounds; r++ {
		for _, i := range roundOrder(r) {
			d, err := timeToCatalog(ctx, e.fleet, specs[i])
			if err != nil {
				return nil, fmt.Errorf("%s cold start %d: %w", sideLabels[i], r+1, err)
			}
			acc[i].add([]time.Duration{d}, 0)
			e.progressf("  cold start %d/%d %-6s %7.1f ms", r+1, e.o.rounds, sideLabels[i], ms(d))
		}
	}
	return newResult(acc[0].summarize(false), acc[1].summarize(false)), nil
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
func rssFleet(ctx context.Context, e *env) (res *result, err error) {
	direct, proxy, err := e.dialFleet(ctx)
	if err != nil {
		return nil, err
	}
	defer joinErr(&err, proxy.close)
	defer joinErr(&err, direct.close)
	calls := min(rssCalls, e.o.n)
	var sums [2]summary
	for i, c := range []*stdioConn{direct, proxy} {
		list := listSide(sideLabels[i], c)
		if err := list.check(ctx); err != nil {
			return nil, err
		}
		if _, _, err := runOps(ctx, list.op, rssLists, 1); err != nil {
			return nil, err
		}
		lat, wall, err := runOps(ctx, syntheticCall(c, i == 1), calls, pipelineDepth)
		if err != nil {
			return nil, err
		}
		var s samples
		s.add(lat, wall)
		sums[i] = s.summarize(true)
		rss, err := c.proc.peakRSSBytes()
		if err != nil {
			return nil, err
		}
		sums[i].PeakRSSMB = mib(rss)
	}
	r := newResult(sums[0], sums[1])
	r.RSSRatio = sums[1].PeakRSSMB / sums[0].PeakRSSMB
	return r, nil
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

// measure warms both sides up, then runs n operations on each in rounds
// whose order alternates, and summarizes them.
func (e *env) measure(ctx context.Context, sides [2]*side, n, conc int) (*result, error) {
	warm := min(max(n/20, 1), maxWarmup)
	for _, s := range sides {
		if err := s.check(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", s.label, err)
		}
		if _, _, err := runOps(ctx, s.op, warm, conc); err != nil {
			return nil, fmt.Errorf("%s warm-up: %w", s.label, err)
		}
	}
	var acc [2]samples
	for r := 0; r < e.o.rounds; r++ {
		count := n / e.o.rounds
		if r < n%e.o.rounds {
			count++
		}
		for _, i := range roundOrder(r) {
			lat, wall, err := runOps(ctx, sides[i].op, count, conc)
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", sides[i].label, r+1, err)
			}
			acc[i].add(lat, wall)
			e.progressf("  round %d/%d %-6s %5d ops in %8.1f ms", r+1, e.o.rounds, sides[i].label, count, ms(wall))
		}
	}
	return newResult(acc[0].summarize(true), acc[1].summarize(true)), nil
}

// sideLabels name the sides by index: 0 direct, 1 proxy.
var sideLabels = [2]string{"direct", "proxy"}

// roundOrder alternates which side goes first, so neither always runs on
// the warmer (or more disturbed) half of a round.
func roundOrder(r int) [2]int {
	if r%2 == 0 {
		return [2]int{0, 1}
	}
	return [2]int{1, 0}
}

// echoSide calls tool with a short text. check verifies the whole result
// (the padded size when payload > 0); op only needs a non-error response,
// so the client's own work stays the same on both sides.
func echoSide(label string, c client, tool string, payload int) *side {
	params := json.RawMessage(`{"name":"` + tool + `","arguments":{"text":"ping"}}`)
	want := "ping"
	return &side{
		label: label,
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
func listSide(label string, c client) *side {
	paged := true
	return &side{
		label: label,
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
