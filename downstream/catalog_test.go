package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

func TestExposeToolRewritesOnlyNameAndUnsafeDescription(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		wantRaw  string
		wantDesc string
	}{
		{
			name:     "kept as is",
			raw:      `{"name":"t","description":"caf\u00e9 \"q\"","inputSchema":{"type":"object","title":"T"},"_meta":{"a":1},"icons":[]}`,
			wantRaw:  `{"name":"fx__t","description":"caf\u00e9 \"q\"","inputSchema":{"type":"object","title":"T"},"_meta":{"a":1},"icons":[]}`,
			wantDesc: "café \"q\"",
		},
		{
			name:     "no description",
			raw:      `{"inputSchema":{"type":"object"},"name":"t"}`,
			wantRaw:  `{"inputSchema":{"type":"object"},"name":"fx__t","description":"MCP tool t from fx"}`,
			wantDesc: "MCP tool t from fx",
		},
		{
			name:     "empty description",
			raw:      `{"name":"t","description":"","x":[1]}`,
			wantRaw:  `{"name":"fx__t","description":"MCP tool t from fx","x":[1]}`,
			wantDesc: "MCP tool t from fx",
		},
		{
			name:     "description not a string",
			raw:      `{"name":"t","description":{"text":"hi"}}`,
			wantRaw:  `{"name":"fx__t","description":"MCP tool t from fx"}`,
			wantDesc: "MCP tool t from fx",
		},
		{
			name:     "TAG characters as UTF-8",
			raw:      "{\"name\":\"t\",\"description\":\"Read\U000E0049\U000E0047\U000E004E files\",\"annotations\":{\"readOnlyHint\":true}}",
			wantRaw:  `{"name":"fx__t","description":"Read files","annotations":{"readOnlyHint":true}}`,
			wantDesc: "Read files",
		},
		{
			name:     "TAG characters as escapes",
			raw:      `{"name":"t","description":"Read\uDB40\uDC41\udb40\udc7f files","inputSchema":{"type":"object"}}`,
			wantRaw:  `{"name":"fx__t","description":"Read files","inputSchema":{"type":"object"}}`,
			wantDesc: "Read files",
		},
		{
			name:     "only TAG characters",
			raw:      `{"name":"t","description":"\uDB40\uDC41"}`,
			wantRaw:  `{"name":"fx__t","description":"MCP tool t from fx"}`,
			wantDesc: "MCP tool t from fx",
		},
		{
			name:     "pretty-printed",
			raw:      "{\n  \"name\": \"t\",\n  \"description\": \"d\",\n  \"inputSchema\": {\"type\": \"object\"}\n}",
			wantRaw:  `{"name":"fx__t","description":"d","inputSchema":{"type":"object"}}`,
			wantDesc: "d",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := buildCatalog(namespace.StyleZeroclaw, []serverTools{{name: "fx", prefix: "fx", connected: true, tools: []upstream.Tool{rawTool(tt.raw)}}})
			e, ok := c.Lookup("fx__t")
			if !ok {
				t.Fatalf("fx__t not in the catalog (warnings %v)", c.Warnings())
			}
			if string(e.Raw) != tt.wantRaw {
				t.Errorf("Raw =\n%s\nwant\n%s", e.Raw, tt.wantRaw)
			}
			if e.Description != tt.wantDesc {
				t.Errorf("Description = %q, want %q", e.Description, tt.wantDesc)
			}
			if e.Server != "fx" || e.Name != "t" || !e.Connected {
				t.Errorf("entry = %+v", e)
			}
			if want := "[" + tt.wantRaw + "]"; string(listJSON(c)) != want {
				t.Errorf("listed = %s, want %s", listJSON(c), want)
			}
		})
	}
}

func TestCatalogNeverModifiesUpstreamBytes(t *testing.T) {
	raw := `{"name":"t","description":"x\uDB40\uDC41"}`
	tool := rawTool(raw)
	buildCatalog(namespace.StyleZeroclaw, []serverTools{{name: "fx", prefix: "fx", connected: true, tools: []upstream.Tool{tool}}})
	if string(tool.Raw) != raw {
		t.Fatalf("upstream tool bytes changed: %s", tool.Raw)
	}
}

func TestCompactLines(t *testing.T) {
	tests := []struct {
		in, want string
		same     bool
	}{
		{`{"a":1}`, `{"a":1}`, true},
		{`{"a":"line\nbreak"}`, `{"a":"line\nbreak"}`, true},
		{"{\n  \"a\": 1,\n  \"b\": [1, 2]\n}", `{"a":1,"b":[1,2]}`, false},
		{"{\r\n\t\"a\" : \"x y\"\r\n}", `{"a":"x y"}`, false},
		{"{\n  \"a\": ", "{\n  \"a\": ", true}, // invalid: kept
	}
	for _, tt := range tests {
		in := []byte(tt.in)
		got := compactLines(in)
		if string(got) != tt.want {
			t.Errorf("compactLines(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if tt.same && !sameBytes(got, in) {
			t.Errorf("compactLines(%q) copied its input", tt.in)
		}
	}
}

func TestCatalogSortedAcrossServers(t *testing.T) {
	c := buildCatalog(namespace.StyleZeroclaw, []serverTools{
		{name: "zeta", prefix: "zeta", connected: true, tools: []upstream.Tool{rawTool(`{"name":"a"}`)}},
		{name: "alpha", prefix: "alpha", connected: true, tools: []upstream.Tool{rawTool(`{"name":"b"}`), rawTool(`{"name":"a"}`)}},
	})
	var names []string
	for _, e := range c.Tools() {
		names = append(names, e.Exposed)
	}
	if got := joinStrings(names); got != "alpha__a alpha__b zeta__a" {
		t.Errorf("Tools = %s", got)
	}
	if _, ok := c.Lookup("nope"); ok {
		t.Error("Lookup(nope) = true")
	}
}

func joinStrings(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(x)
	}
	return b.String()
}

func TestCatalogServerFilter(t *testing.T) {
	tools := []upstream.Tool{rawTool(`{"name":"read_file"}`), rawTool(`{"name":"write_file"}`), rawTool(`{"name":"list"}`)}
	tests := []struct {
		name             string
		include, exclude []string
		listed           string
	}{
		{"none", nil, nil, "fx__list fx__read_file fx__write_file"},
		{"include", []string{"read_*", "list"}, nil, "fx__list fx__read_file"},
		{"exclude", nil, []string{"write_*"}, "fx__list fx__read_file"},
		{"include wins", []string{"write_file"}, []string{"write_*"}, "fx__write_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := buildCatalog(namespace.StyleZeroclaw, []serverTools{{name: "fx", prefix: "fx", include: tt.include, exclude: tt.exclude, connected: true, tools: tools}})
			var listed []string
			for _, e := range c.Tools() {
				if e.Connected && !e.Filtered {
					listed = append(listed, e.Exposed)
				}
			}
			if got := joinStrings(listed); got != tt.listed {
				t.Errorf("listed = %q, want %q", got, tt.listed)
			}
			for _, name := range listed {
				if !bytes.Contains(listJSON(c), []byte(`"`+name+`"`)) {
					t.Errorf("%s missing from ListJSON %s", name, listJSON(c))
				}
			}
			for _, e := range c.Tools() {
				if e.Filtered && bytes.Contains(listJSON(c), []byte(`"`+e.Exposed+`"`)) {
					t.Errorf("filtered %s is in ListJSON", e.Exposed)
				}
			}
		})
	}
}

func TestServerFilterFromConfig(t *testing.T) {
	fx := connected(`{"name":"read_file"}`, `{"name":"write_file"}`)
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[]}`), nil
	}
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  fx:
    command: fixture
    tools:
      exclude: ["write_*"]
`, map[string]*fakeUpstream{"fx": fx})
	if got := string(listJSON(p.Catalog())); got != `[{"name":"fx__read_file","description":"MCP tool read_file from fx"}]` {
		t.Errorf("listed = %s", got)
	}
	_, err := p.CallTool(context.Background(), "", nil, "fx__write_file", []byte(`{}`))
	var werr *wireError
	if !errors.As(err, &werr) || werr.Code != codeInvalidParams || werr.Message != "unknown tool: fx__write_file" {
		t.Errorf("calling an excluded tool: %v, want unknown tool", err)
	}
	if len(fx.requests()) != 0 {
		t.Error("an excluded tool reached the upstream")
	}
}

func TestDownServerKeepsNamesButIsNotListed(t *testing.T) {
	// Both servers expose bare names that collide, so both fall back to
	// their prefixed forms. When b goes down its last tools still count:
	// a's tool must not be renamed to the bare name.
	a := connected(`{"name":"x"}`)
	b := connected(`{"name":"x"}`, `{"name":"y"}`)
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  a: {command: fixture, prefix: ""}
  b: {command: fixture, prefix: ""}
`, map[string]*fakeUpstream{"a": a, "b": b})
	before := exposedNames(p.Catalog())
	if before != "a__x b__x y" {
		t.Fatalf("names = %q", before)
	}
	b.set(upstream.StateFailed)
	p.Refresh()
	c := p.Catalog()
	if got := exposedNames(c); got != before {
		t.Errorf("names after b went down = %q, want %q", got, before)
	}
	for _, name := range []string{"b__x", "y"} {
		e, ok := c.Lookup(name)
		if !ok || e.Connected {
			t.Errorf("Lookup(%s) = %+v, %v; want a known, unconnected entry", name, e, ok)
		}
	}
	if got := string(listJSON(c)); got != `[{"name":"a__x","description":"MCP tool x from a"}]` {
		t.Errorf("listed = %s, want only a's tool", got)
	}
	_, err := p.CallTool(context.Background(), "", nil, "y", []byte(`{}`))
	var werr *wireError
	if !errors.As(err, &werr) || werr.Code != codeServerError || werr.Message != "MCP server 'b' is not connected" {
		t.Errorf("calling a down server's tool: %v", err)
	}

	// Back up: listed again under the same names.
	b.set(upstream.StateConnected, `{"name":"x"}`, `{"name":"y"}`)
	p.Refresh()
	if got := exposedNames(p.Catalog()); got != before {
		t.Errorf("names after b came back = %q", got)
	}
	if got := string(listJSON(p.Catalog())); !bytes.Contains([]byte(got), []byte(`"y"`)) {
		t.Errorf("listed after b came back = %s", got)
	}
}

func exposedNames(c *Catalog) string {
	var names []string
	for _, e := range c.Tools() {
		names = append(names, e.Exposed)
	}
	return joinStrings(names)
}

func TestRebuildCatalogHoldsListedBytesOnce(t *testing.T) {
	a := []upstream.Tool{rawTool(`{"name":"x","description":"X"}`), rawTool(`{"name":"y"}`)}
	b := []upstream.Tool{rawTool(`{"name":"z","description":"Z"}`)}
	servers := []serverTools{
		{name: "a", prefix: "a", connected: true, tools: a},
		{name: "b", prefix: "b", connected: true, tools: b},
	}
	first := rebuildCatalog(namespace.StyleZeroclaw, servers, nil, nil, nil)
	firstList := string(listJSON(first))
	checkAliases(t, "first", first)

	// b changes its tool and goes down; a sends the same bytes (a copy).
	servers[0].tools = []upstream.Tool{rawTool(`{"name":"x","description":"X"}`), rawTool(`{"name":"y"}`)}
	servers[1].connected = false
	servers[1].tools = []upstream.Tool{rawTool(`{"name":"z","description":"Z2"}`)}
	second := rebuildCatalog(namespace.StyleZeroclaw, servers, first, nil, nil)
	checkAliases(t, "second", second)
	if got := string(listJSON(second)); got != `[{"name":"a__x","description":"X"},{"name":"a__y","description":"MCP tool y from a"}]` {
		t.Errorf("second listed %s", got)
	}
	down, _ := second.Lookup("b__z")
	if down.Connected || down.Description != "Z2" || !bytes.Contains(down.Raw, []byte(`"Z2"`)) {
		t.Errorf("b__z after the change: %+v, Raw %s", down, down.Raw)
	}

	// Only the connectivity changes: the entry that was unlisted comes back.
	servers[1].connected = true
	third := rebuildCatalog(namespace.StyleZeroclaw, servers, second, nil, nil)
	checkAliases(t, "third", third)
	if want := buildCatalog(namespace.StyleZeroclaw, servers); string(listJSON(third)) != string(listJSON(want)) {
		t.Errorf("rebuilt listed %s, want %s", listJSON(third), listJSON(want))
	}
	// Building from first changed nothing of it.
	checkAliases(t, "first after rebuilds", first)
	if string(listJSON(first)) != firstList {
		t.Errorf("first list changed to %s", listJSON(first))
	}
	if e, _ := first.Lookup("b__z"); !e.Connected || string(e.Raw) != `{"name":"b__z","description":"Z"}` {
		t.Errorf("first's b__z changed: %+v", e)
	}
}

// checkAliases checks that c's listed entries' Raw are slices of its
// result (one copy of the bytes) and the unlisted ones are not.
func checkAliases(t *testing.T, label string, c *Catalog) {
	t.Helper()
	list := c.result
	for _, e := range c.Tools() {
		in := len(e.Raw) > 0 && len(list) > 0 &&
			uintptr(unsafe.Pointer(&e.Raw[0])) >= uintptr(unsafe.Pointer(&list[0])) &&
			uintptr(unsafe.Pointer(&e.Raw[0])) < uintptr(unsafe.Pointer(&list[0]))+uintptr(len(list))
		if in != (e.Connected && !e.Filtered) {
			t.Errorf("%s: %s (connected %v, filtered %v): Raw in the list bytes = %v", label, e.Exposed, e.Connected, e.Filtered, in)
		}
		if in && cap(e.Raw) != len(e.Raw) {
			t.Errorf("%s: %s: Raw has room to append into the list", label, e.Exposed)
		}
	}
}

func TestRebuildCatalogRenamedToolIsRewritten(t *testing.T) {
	// Same upstream bytes, new exposed name (prefix changed by a reload).
	tools := []upstream.Tool{rawTool(`{"name":"x"}`)}
	first := rebuildCatalog(namespace.StyleZeroclaw, []serverTools{{name: "a", prefix: "a", connected: true, tools: tools}}, nil, nil, nil)
	second := rebuildCatalog(namespace.StyleZeroclaw, []serverTools{{name: "a", prefix: "p", connected: true, tools: tools}}, first, nil, nil)
	if got := string(listJSON(second)); got != `[{"name":"p__x","description":"MCP tool x from a"}]` {
		t.Errorf("listed = %s", got)
	}
}

func TestSameListing(t *testing.T) {
	build := func(connected bool, include []string, raws ...string) *Catalog {
		var tools []upstream.Tool
		for _, r := range raws {
			tools = append(tools, rawTool(r))
		}
		return buildCatalog(namespace.StyleZeroclaw, []serverTools{
			{name: "a", prefix: "a", connected: true, tools: []upstream.Tool{rawTool(`{"name":"k"}`)}},
			{name: "b", prefix: "b", connected: connected, include: include, tools: tools},
		})
	}
	base := build(true, nil, `{"name":"x"}`, `{"name":"y"}`)
	tests := []struct {
		name string
		c    *Catalog
		want bool
	}{
		{"equal", build(true, nil, `{"name":"x"}`, `{"name":"y"}`), true},
		{"bytes differ", build(true, nil, `{"name":"x","description":"d"}`, `{"name":"y"}`), false},
		{"one tool less", build(true, nil, `{"name":"x"}`), false},
		{"server down", build(false, nil, `{"name":"x"}`, `{"name":"y"}`), false},
		{"filtered", build(true, []string{"x"}, `{"name":"x"}`, `{"name":"y"}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sameListing(base, tt.c); got != tt.want {
				t.Errorf("sameListing = %v, want %v", got, tt.want)
			}
			if got := sameListing(tt.c, base); got != tt.want {
				t.Errorf("sameListing reversed = %v, want %v", got, tt.want)
			}
		})
	}
	// Both unlisted, same count: nothing listed either way.
	if !sameListing(build(false, nil, `{"name":"x"}`), build(false, nil, `{"name":"x","description":"d"}`)) {
		t.Error("two catalogs listing the same tools are not the same listing")
	}
}

func TestRefreshWithoutNewSnapshotsKeepsCatalog(t *testing.T) {
	fx := connected(`{"name":"x"}`)
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
`, map[string]*fakeUpstream{"fx": fx})
	c := p.Catalog()
	p.Refresh()
	if p.Catalog() != c {
		t.Error("Refresh without a new snapshot built a new catalog")
	}
	fx.set(upstream.StateConnected, `{"name":"x"}`, `{"name":"y"}`)
	p.Refresh()
	if got := exposedNames(p.Catalog()); got != "fx__x fx__y" {
		t.Errorf("names after a new snapshot = %q", got)
	}
}

func TestRefreshCallsWaitingForABuildShareTheNext(t *testing.T) {
	fx := connected(`{"name":"v0"}`)
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
`, map[string]*fakeUpstream{"fx": fx})
	var builds atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	fx.SnapshotFn = func() *upstream.Snapshot {
		if builds.Add(1) == 1 {
			close(entered)
			<-release // the first build holds the lock
		}
		return fx.snap.Load()
	}
	var wg sync.WaitGroup
	wg.Go(p.Refresh)
	<-entered
	const waiters = 5
	for i := 1; i <= waiters; i++ {
		fx.set(upstream.StateConnected, fmt.Sprintf(`{"name":"v%d"}`, i))
		wg.Go(func() {
			p.Refresh()
			// This call's snapshot (or a later one) is in the catalog.
			if names := exposedNames(p.Catalog()); names == "fx__v0" {
				t.Errorf("Refresh returned before a build saw its snapshot: %q", names)
			}
		})
	}
	for p.catalogs.calls.Load() < 2+waiters { // newProxy's, the held one, the waiters
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if got := exposedNames(p.Catalog()); got != fmt.Sprintf("fx__v%d", waiters) {
		t.Errorf("names = %q, want the last snapshot's", got)
	}
	if n := builds.Load(); n != 2 {
		t.Errorf("%d builds read the snapshot, want 2: the held one and one for all waiters", n)
	}
}

func TestSessionListSharesTheCatalogListWhenItIsTheSame(t *testing.T) {
	const yaml = `
blobs: {mode: passthrough}
servers:
  fs: {command: fixture}
bundles:
  all: {servers: [fs]}
agents:
  all: {mcp_bundles: [all]}
  some: {mcp_bundles: [all], excluded_tools: [fs__write_file]}
  none: {mcp_bundles: [all], excluded_tools: ["fs__*"]}
default_agent: all
`
	p := newProxy(t, yaml, map[string]*fakeUpstream{"fs": connected(`{"name":"read_file"}`, `{"name":"write_file"}`)})
	list := listJSON(p.Catalog())
	if got, again := p.views.listFor(agentSession(t, p, "all")), p.views.listFor(agentSession(t, p, "all")); &got[0] != &again[0] {
		t.Errorf("all: the result was built twice: %s", got)
	}
	for agent, want := range map[string]string{
		"all":  `{"tools":[{"name":"fs__read_file","description":"MCP tool read_file from fs"},{"name":"fs__write_file","description":"MCP tool write_file from fs"}]}`,
		"some": `{"tools":[{"name":"fs__read_file","description":"MCP tool read_file from fs"}]}`,
		"none": `{"tools":[]}`,
	} {
		if got := string(p.views.listFor(agentSession(t, p, agent))); got != want {
			t.Errorf("%s: list = %s, want %s", agent, got, want)
		}
	}
	if string(listJSON(p.Catalog())) != string(list) {
		t.Errorf("the catalog list changed to %s", listJSON(p.Catalog()))
	}
}

// The catalog's result leads with the own tools the default agent is
// offered (here mcp_resources, since the server offers resources), so that
// agent's sessions share it; an agent offered other own tools gets a list
// of its own, and a catalog whose tools are all hidden still lists the
// own tools as valid JSON.
func TestCatalogResultLeadsWithTheDefaultOwnTools(t *testing.T) {
	const yaml = `
blobs: {mode: passthrough}
servers:
  fs: {command: fixture}
bundles:
  all: {servers: [fs]}
agents:
  main: {mcp_bundles: [all]}
  bare: {mcp_bundles: [all], excluded_tools: [mcp_resources]}
default_agent: main
`
	fs := &fakeUpstream{}
	snap := &upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true},
		Tools: []upstream.Tool{rawTool(`{"name":"read_file"}`)}}
	fs.snap.Store(snap)
	p := newProxy(t, yaml, map[string]*fakeUpstream{"fs": fs})
	c := p.Catalog()
	main := p.views.listFor(agentSession(t, p, "main"))
	if &main[0] != &c.result[0] || !bytes.HasPrefix(main, append([]byte(`{"tools":[`), mcpResourcesDef...)) {
		t.Fatalf("main's list is not the catalog's result led by mcp_resources: %.120s", main)
	}
	bare := p.views.listFor(agentSession(t, p, "bare"))
	if want := `{"tools":[{"name":"fs__read_file","description":"MCP tool read_file from fs"}]}`; string(bare) != want {
		t.Errorf("bare: %s, want %s", bare, want)
	}
	for _, list := range [][]byte{main, bare} {
		var v struct{ Tools []json.RawMessage }
		if err := json.Unmarshal(list, &v); err != nil {
			t.Fatalf("%s: %v", list, err)
		}
	}

	// Every tool filtered out: the result is the own tools alone.
	hidden := rebuildCatalog(namespace.StyleZeroclaw, []serverTools{{name: "fs", prefix: "fs", connected: true,
		exclude: []string{"*"}, tools: snap.Tools}}, nil, nil, append(append([]byte(nil), mcpResourcesDef...), ','))
	if want := `{"tools":[` + string(mcpResourcesDef) + `]}`; string(hidden.result) != want || len(hidden.listed) != 0 {
		t.Errorf("all hidden: %s", hidden.result)
	}
}

// TestListChangedFollowsTheCatalog: a session gets one
// notifications/tools/list_changed per change of the listed tools as
// servers come, change and go, and none when nothing it lists changed.
func TestListChangedFollowsTheCatalog(t *testing.T) {
	a := connected(`{"name":"x"}`)
	b, r := &fakeUpstream{}, &fakeUpstream{}
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  a: {command: fixture}
  b: {command: fixture}
  r: {command: fixture}
`, map[string]*fakeUpstream{"a": a, "b": b, "r": r})
	c := startStdio(t, p)
	c.initialize()
	notified := 0
	step := func(what, wantListed string) {
		t.Helper()
		p.Refresh()
		if got := exposedNames(p.Catalog()); got != wantListed {
			t.Errorf("%s: catalog %q, want %q", what, got, wantListed)
		}
		notified++
		deadline := time.Now().Add(5 * time.Second)
		for c.count(`"notifications/tools/list_changed"`) < notified && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := c.count(`"notifications/tools/list_changed"`); got != notified {
			t.Errorf("%s: %d list_changed notifications in all, want %d", what, got, notified)
		}
	}
	b.set(upstream.StateConnected, `{"name":"y"}`, `{"name":"z"}`)
	step("b connected", "a__x b__y b__z")
	b.set(upstream.StateConnected, `{"name":"z"}`, `{"name":"w"}`)
	step("b changed its tools", "a__x b__w b__z")
	b.set(upstream.StateFailed)
	step("b went down", "a__x b__w b__z")
	if got := string(listJSON(p.Catalog())); got != `[{"name":"a__x","description":"MCP tool x from a"}]` {
		t.Errorf("listed while b is down: %s", got)
	}
	// A server with resources and no tools: the list gains mcp_resources.
	r.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true}})
	step("r with resources connected", "a__x b__w b__z")
	if got := p.views.listFor(testState(t, p)); !bytes.Contains(got, []byte(`"name":"mcp_resources"`)) {
		t.Errorf("the list after r connected: %s", got)
	}
	// It offers prompts as well now: mcp_prompts is listed too.
	r.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true, Prompts: true}})
	step("r added prompts", "a__x b__w b__z")
	// A ping answered after the last step: no late extra notification.
	c.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	c.recv(`9`)
	if got := c.count(`"notifications/tools/list_changed"`); got != notified {
		t.Errorf("%d list_changed notifications in all, want %d", got, notified)
	}
}

// A reload that gives the default agent other own tools gives the
// catalog's result those own tools: the build resolves the default agent
// from the new config, not from agents cached before the reload.
func TestReloadLeadsWithTheNewDefaultOwnTools(t *testing.T) {
	const yaml = `
blobs: {mode: passthrough}
servers:
  r: {command: fixture}
bundles:
  all: {servers: [r]}
agents:
  main: {mcp_bundles: [all]}
  bare: {mcp_bundles: [all], excluded_tools: [mcp_resources]}
default_agent: %s
`
	r := &fakeUpstream{}
	r.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true},
		Tools: []upstream.Tool{rawTool(`{"name":"x"}`)}})
	p := newProxy(t, fmt.Sprintf(yaml, "main"), map[string]*fakeUpstream{"r": r})
	if !bytes.Contains(p.Catalog().own, []byte(`"mcp_resources"`)) {
		t.Fatalf("own tools before the reload: %s", p.Catalog().own)
	}
	p.Reload(parseConfig(t, fmt.Sprintf(yaml, "bare")), p.gen().ups)
	c := p.Catalog()
	if len(c.own) != 0 {
		t.Fatalf("own tools after the reload: %s", c.own)
	}
	if got := p.views.listFor(testState(t, p)); &got[0] != &c.result[0] {
		t.Errorf("the new default agent's list is not the catalog's result: %.100s", got)
	}
}

// The own tools of an agent other than the default can change while the
// default agent's do not (here the default agent may not call
// mcp_resources): list_changed goes out all the same (to every session, as
// every list_changed does).
func TestListChangedForAnotherAgentsOwnTools(t *testing.T) {
	r := &fakeUpstream{}
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  a: {command: fixture}
  r: {command: fixture}
bundles:
  all: {servers: [a, r]}
agents:
  main: {mcp_bundles: [all], excluded_tools: [mcp_resources]}
  other: {mcp_bundles: [all]}
default_agent: main
`, map[string]*fakeUpstream{"a": connected(`{"name":"x"}`), "r": r})
	session := startStdio(t, p)
	session.initialize()
	old := p.Catalog()
	r.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true}})
	p.Refresh()
	for deadline := time.Now().Add(5 * time.Second); session.count(`"notifications/tools/list_changed"`) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no list_changed after r came with resources")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := p.Catalog()
	if !bytes.Equal(c.own, old.own) || !sameListing(c, old) {
		t.Fatalf("the default agent's list changed: own %q -> %q", old.own, c.own)
	}
	if got := p.views.listFor(agentSession(t, p, "other")); !bytes.Contains(got, []byte(`"name":"mcp_resources"`)) {
		t.Errorf("other's list: %s", got)
	}
}

// TestRebuildLeavesPublishedEntriesAlone: calls read the entries of the
// catalog in use while a rebuild runs; a rebuild reusing an entry must not
// write to it, not even the same values (run with -race).
func TestRebuildLeavesPublishedEntriesAlone(t *testing.T) {
	servers := []serverTools{
		{name: "a", prefix: "a", connected: false, tools: []upstream.Tool{rawTool(`{"name":"x"}`)}},
		{name: "b", prefix: "b", connected: true, exclude: []string{"y"}, tools: []upstream.Tool{rawTool(`{"name":"y"}`)}},
	}
	first := buildCatalog(namespace.StyleZeroclaw, servers)
	type state struct{ connected, filtered bool }
	var want []state
	for _, e := range first.Tools() {
		want = append(want, state{e.Connected, e.Filtered})
	}
	stop := make(chan struct{})
	read := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				read <- n
				return
			default:
			}
			for i, e := range first.Tools() {
				if (state{e.Connected, e.Filtered}) != want[i] {
					n++
				}
			}
		}
	}()
	for range 50 {
		if next := rebuildCatalog(namespace.StyleZeroclaw, servers, first, nil, nil); len(next.Tools()) != 2 {
			t.Fatalf("rebuilt %d tools, want 2", len(next.Tools()))
		}
	}
	close(stop)
	if n := <-read; n != 0 {
		t.Errorf("the published entries changed state %d times", n)
	}
}

// TestRebuildCatalogKeepsHeldNames is issue 12, item 2: when an upstream
// adds a tool whose name collides with one it had, the tool that held the
// name keeps it, the newcomer alone gets the hash suffix, and both carry the
// base that policy rules match.
func TestRebuildCatalogKeepsHeldNames(t *testing.T) {
	first := rebuildCatalog(namespace.StyleZeroclaw, []serverTools{{name: "fx1", prefix: "fx1", connected: true,
		tools: []upstream.Tool{rawTool(`{"name":"del_file"}`)}}}, nil, nil, nil)
	second := rebuildCatalog(namespace.StyleZeroclaw, []serverTools{{name: "fx1", prefix: "fx1", connected: true,
		tools: []upstream.Tool{rawTool(`{"name":"del_file"}`), rawTool(`{"name":"del.file"}`)}}}, first, nil, nil)
	held, ok := second.Lookup("fx1__del_file")
	if !ok || held.Name != "del_file" || held.Base != "fx1__del_file" {
		t.Fatalf("fx1__del_file = %+v, %v; want the original del_file with its own base", held, ok)
	}
	var newcomer *ToolEntry
	for _, e := range second.Tools() {
		if e.Name == "del.file" {
			newcomer = e
		}
	}
	if newcomer == nil || !strings.HasPrefix(newcomer.Exposed, "fx1__del_file_") || newcomer.Base != "fx1__del_file" {
		t.Fatalf("newcomer = %+v; want a suffixed name with base fx1__del_file", newcomer)
	}
}

// TestViewSharesCatalogResult: an agent that sees every listed tool and no
// own tool is served the catalog's own tools/list result, not a copy of
// it (a copy per agent was a second megabyte with 2,000 tools).
func TestViewSharesCatalogResult(t *testing.T) {
	p := newProxy(t, "blobs: {mode: passthrough}\nservers:\n  fx: {command: fixture}\n",
		map[string]*fakeUpstream{"fx": connected(`{"name":"a"}`, `{"name":"b"}`)})
	a, err := p.views.resolveAgent("")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Catalog()
	got := p.views.viewFor(&session{agent: a, state: newMemState()}).listJSON
	if want := `{"tools":` + string(listJSON(c)) + `}`; string(got) != want {
		t.Fatalf("view's list %s, want %s", got, want)
	}
	if &got[0] != &c.result[0] || cap(got) != len(got) {
		t.Fatal("the view holds a copy of the catalog's result, or one an append could write into")
	}
}

// listJSON is the JSON array of c's listed tools.
func listJSON(c *Catalog) []byte {
	return append(append(append(make([]byte, 0, len(c.listed)+2), '['), c.listed...), ']')
}

// An upstream tool exposed under the bare name of an own tool the session
// is offered (here mcp_resources, offered while a server has resources) is
// not listed nor searchable for that session: the own one answers, and a
// list never holds one name twice. While no server has resources the own
// tool is not offered, and the upstream's is listed.
func TestBareToolNamedLikeAnOwnTool(t *testing.T) {
	bare := &fakeUpstream{}
	tools := []upstream.Tool{rawTool(`{"name":"mcp_resources","description":"upstream one"}`), rawTool(`{"name":"echo"}`)}
	bare.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true},
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"r://1","name":"one"}`)}, Tools: tools})
	p := newProxy(t, "blobs: {mode: passthrough}\nservers:\n  bare: {command: fixture, prefix: \"\"}\n", map[string]*fakeUpstream{"bare": bare})
	names := func() []string {
		var v struct {
			Tools []struct{ Name, Description string }
		}
		if err := json.Unmarshal(p.views.listFor(testState(t, p)), &v); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range v.Tools {
			out = append(out, tl.Name+"="+tl.Description)
		}
		return out
	}
	if got := names(); len(got) != 2 || !strings.HasPrefix(got[0], "mcp_resources=") || strings.Contains(got[0], "upstream one") || got[1] != "echo=MCP tool echo from bare" {
		t.Errorf("tools/list = %q; want the own mcp_resources once, then echo", got)
	}
	if _, docs := p.views.searchIndex(testState(t, p)); docs["mcp_resources"] != nil || docs["echo"] == nil {
		t.Error("the tool_search index holds the upstream's mcp_resources, or lacks echo")
	}

	bare.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Tools: tools})
	p.Refresh()
	if got := names(); len(got) != 2 || got[0] != "mcp_resources=upstream one" || got[1] != "echo=MCP tool echo from bare" {
		t.Errorf("with no resources tools/list = %q; want the upstream's mcp_resources and echo, in its order", got)
	}
}

// A tool a server's tools.exclude drops does not exist for clients (docs/agents.md#agents-bundles-and-policy
// rule 2), so it takes no bare name from another server's tool: that one
// stays bare, and a call to the dropped tool's fallback name is still
// unknown.
func TestExcludedToolYieldsBareName(t *testing.T) {
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  a: {command: fixture, prefix: ""}
  b: {command: fixture, prefix: "", tools: {exclude: [echo]}}
`, map[string]*fakeUpstream{"a": connected(`{"name":"echo"}`), "b": connected(`{"name":"echo"}`, `{"name":"other"}`)})
	var v struct {
		Tools []struct{ Name string }
	}
	if err := json.Unmarshal(p.views.listFor(testState(t, p)), &v); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range v.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "echo,other" {
		t.Errorf("tools/list = %v; want a's echo bare and b's other", names)
	}
	if e, ok := p.Catalog().Lookup("echo"); !ok || e.Server != "a" {
		t.Errorf("echo routes to %+v", e)
	}
}

// TestAnnouncedListChangedPassedOn: an upstream's list_changed reaches the
// sessions granted that server even when the list it re-read is the same
// (the snapshot's announcement count grew), for tools, resources and
// prompts alike; a session not granted the server hears nothing, and a new
// snapshot with the same lists and no announcement (a reconnection, say)
// sends nothing either.
func TestAnnouncedListChangedPassedOn(t *testing.T) {
	snap := func(a upstream.Announced) *upstream.Snapshot {
		return &upstream.Snapshot{State: upstream.StateConnected, Announced: a,
			Capabilities: upstream.Capabilities{Resources: true, Prompts: true},
			Tools:        []upstream.Tool{rawTool(`{"name":"x"}`)},
			Resources:    []json.RawMessage{json.RawMessage(`{"uri":"r://1","name":"one"}`)},
			Prompts:      []json.RawMessage{json.RawMessage(`{"name":"p"}`)}}
	}
	b := &fakeUpstream{}
	b.snap.Store(snap(upstream.Announced{}))
	p, aonly, both := grantedApart(t, `{"name":"y"}`, b)
	const (
		tools     = `"notifications/tools/list_changed"`
		resources = `"notifications/resources/list_changed"`
		prompts   = `"notifications/prompts/list_changed"`
	)
	ping := 100
	// settle makes sure every notification sent before it reached both
	// clients: each answers a ping after them.
	settle := func() {
		t.Helper()
		for _, c := range []*stdioClient{aonly, both} {
			ping++
			c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, ping))
			c.recv(fmt.Sprint(ping))
		}
	}
	check := func(what string, want [3]int) {
		t.Helper()
		settle()
		got := [3]int{both.count(tools), both.count(resources), both.count(prompts)}
		if got != want {
			t.Errorf("%s: the session granted b got %v tools, resources, prompts list_changed; want %v", what, got, want)
		}
		if n := aonly.count(tools) + aonly.count(resources) + aonly.count(prompts); n != 0 {
			t.Errorf("%s: the session not granted b got %d list_changed", what, n)
		}
	}
	settle()
	base := [3]int{both.count(tools), both.count(resources), both.count(prompts)}
	step := func(what string, a upstream.Announced, add [3]int) {
		t.Helper()
		b.snap.Store(snap(a))
		p.Refresh()
		for i := range base {
			base[i] += add[i]
		}
		check(what, base)
	}
	step("reconnected, same lists", upstream.Announced{}, [3]int{})
	step("tools announced, same list", upstream.Announced{Tools: 1}, [3]int{1, 0, 0})
	step("resources and prompts announced", upstream.Announced{Tools: 1, Resources: 1, Prompts: 1}, [3]int{0, 1, 1})
	step("reconnected again, same lists", upstream.Announced{Tools: 1, Resources: 1, Prompts: 1}, [3]int{})
	step("tools announced twice between builds", upstream.Announced{Tools: 3, Resources: 1, Prompts: 1}, [3]int{1, 0, 0})
	// A rebuild with no new snapshot at all (verdicts changed) says nothing.
	p.Reevaluate()
	check("re-evaluated", base)
}
