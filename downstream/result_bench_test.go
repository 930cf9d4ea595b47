package downstream

import (
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/blobs"
)

// bigTextResult is a tools/call result shaped like the fixture's padded
// echo: one text item of n printable ASCII bytes, no blobs, no TAGs.
func bigTextResult(n int) []byte {
	const unit = "abcdefghijklmnopqrstuvwxyz0123456789"
	text := strings.Repeat(unit, n/len(unit)+1)[:n]
	return []byte(`{"content":[{"type":"text","text":"` + text + `"}],"structuredContent":{"echo":"x"}}`)
}

// BenchmarkResultPasses measures, per result size, each pass the call path
// makes over a tools/call result that nothing changes. b.SetBytes makes the
// figures comparable per MiB.
func BenchmarkResultPasses(b *testing.B) {
	m, err := blobs.New(blobs.Options{Mode: blobs.ModeFile, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []struct {
		name string
		n    int
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}} {
		res := bigTextResult(size.n)
		passes := []struct {
			name string
			fn   func()
		}{
			{"IsErrorResult", func() { IsErrorResult(res) }},
			{"blobsRewrite", func() {
				if _, _, err := m.Rewrite("agent", res, true); err != nil {
					b.Fatal(err)
				}
			}},
			{"compactLines", func() { compactLines(res) }},
			{"stripResultTags", func() { stripResultTags(res) }},
		}
		for _, p := range passes {
			b.Run(size.name+"/"+p.name, func(b *testing.B) {
				b.SetBytes(int64(len(res)))
				b.ReportAllocs()
				for b.Loop() {
					p.fn()
				}
			})
		}
	}
}
