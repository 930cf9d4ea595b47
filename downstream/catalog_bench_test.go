package downstream

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// BenchmarkCatalogBuild2000 builds the catalog of 20 servers of 100 tools
// each from nothing (no previous catalog to reuse), the work a cold start
// or a reload does: without tool integrity; with it on first sight (every
// tool fingerprinted, scanned and pinned, pin files written); with pins
// from an earlier run (a new guard: every tool fingerprinted and scanned,
// the pin files read, nothing written: a proxy's start); and with it once
// the guard has seen every tool (the bytes are cached, the pins read). The
// build before the timed ones writes the pins and lets the last case see
// every tool first.
func BenchmarkCatalogBuild2000(b *testing.B) {
	var yaml strings.Builder
	yaml.WriteString("blobs: {mode: passthrough}\nservers:\n")
	servers := make([]serverTools, 20)
	for s := range servers {
		name := fmt.Sprintf("fx%d", s)
		fmt.Fprintf(&yaml, "  %s: {command: fixture}\n", name)
		tools := make([]upstream.Tool, 100)
		for i := range tools {
			tools[i] = rawTool(fmt.Sprintf(`{"name":"tool_%03d","description":"Search the issue tracker of project %d for issues matching a query and return their keys, titles and states.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"Free-text search query."},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["query"]}}`, i, s))
		}
		servers[s] = serverTools{name: name, prefix: name, connected: true, tools: tools}
	}
	run := func(b *testing.B, guard func(b *testing.B) *integrity.Guard) {
		cfg := yaml.String()
		p := New(Options{Config: parseConfig(b, cfg), Logger: testLogger(), Version: "test"})
		p.opts.Integrity = guard(b)
		rebuildCatalog(p.style(), servers, nil, p.catalogs.reviewer(p.gen()), nil) // a guard that keeps what it saw has seen it
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			b.StopTimer()
			p.opts.Integrity = guard(b)
			b.StartTimer()
			cat := rebuildCatalog(p.style(), servers, nil, p.catalogs.reviewer(p.gen()), nil)
			if len(cat.tools) != 2000 {
				b.Fatalf("%d tools", len(cat.tools))
			}
		}
	}
	open := func(b *testing.B, dir string) *integrity.Guard {
		g, err := integrity.Open(integrity.Options{StateDir: dir}, nil)
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	b.Run("integrity=off", func(b *testing.B) {
		run(b, func(*testing.B) *integrity.Guard { return nil })
	})
	b.Run("integrity=first-sight", func(b *testing.B) {
		run(b, func(b *testing.B) *integrity.Guard { return open(b, b.TempDir()) })
	})
	b.Run("integrity=pinned", func(b *testing.B) {
		dir := b.TempDir()
		run(b, func(b *testing.B) *integrity.Guard { return open(b, dir) })
	})
	b.Run("integrity=seen", func(b *testing.B) {
		g := open(b, b.TempDir())
		run(b, func(*testing.B) *integrity.Guard { return g })
	})
}
