package namespace

import (
	"fmt"
	"testing"
)

// benchInputs is 20 servers of 100 tools, a quarter of them unprefixed and
// colliding, with a few names that need sanitizing or cutting.
func benchInputs() []Input {
	in := make([]Input, 20)
	for s := range in {
		server := fmt.Sprintf("server-%02d", s)
		prefix := server
		if s%4 == 0 {
			prefix = ""
		}
		names := make([]string, 100)
		for i := range names {
			switch i % 10 {
			case 0:
				names[i] = fmt.Sprintf("shared tool %d", i)
			case 1:
				names[i] = fmt.Sprintf("a.rather.long.dotted.tool.name.that.goes.well.past.the.sixty.four.byte.limit.%d", i)
			default:
				names[i] = fmt.Sprintf("tool_%d_of_%d", i, s)
			}
		}
		in[s] = Input{Server: server, Prefix: prefix, Names: names}
	}
	return in
}

func BenchmarkBuild(b *testing.B) {
	in := benchInputs()
	for _, style := range []Style{StyleZeroclaw, StyleHermes} {
		b.Run(string(style), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tbl, _ := Build(style, in)
				if tbl.Len() != 2000 {
					b.Fatalf("Len = %d", tbl.Len())
				}
			}
		})
	}
}

func BenchmarkLookup(b *testing.B) {
	tbl, _ := Build(StyleZeroclaw, benchInputs())
	names := make([]string, 0, tbl.Len())
	for _, e := range tbl.Routes() {
		names = append(names, e.Exposed)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := tbl.Lookup(names[i%len(names)]); !ok {
			b.Fatal("miss")
		}
		i++
	}
}
