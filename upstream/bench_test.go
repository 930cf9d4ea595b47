package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
)

// bigResponse is a JSON-RPC response line (its id a placeholder) whose
// result is one text item of n printable ASCII bytes.
func bigResponse(n int) string {
	const unit = "abcdefghijklmnopqrstuvwxyz0123456789"
	text := strings.Repeat(unit, n/len(unit)+1)[:n]
	return `{"jsonrpc":"2.0","id":%ID%,"result":{"content":[{"type":"text","text":"` + text + `"}]}}` + "\n"
}

// BenchmarkStdioTransportResult measures the proxy side of one request over
// stdio with a large result: the line limiter, the stdio transport's read,
// routing by id and the result handed to the caller. The "child" is a
// goroutine on real pipes that answers every request line with the same
// response.
func BenchmarkStdioTransportResult(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			resp := bigResponse(size.n)
			inR, inW, err := os.Pipe() // proxy -> child
			if err != nil {
				b.Fatal(err)
			}
			outR, outW, err := os.Pipe() // child -> proxy
			if err != nil {
				b.Fatal(err)
			}
			go func() {
				defer outW.Close()
				lines := bufio.NewReader(inR)
				for {
					line, err := lines.ReadString('\n')
					if err != nil {
						return
					}
					var req struct {
						ID json.RawMessage `json:"id"`
					}
					if json.Unmarshal([]byte(line), &req) != nil {
						continue
					}
					if _, err := outW.WriteString(strings.Replace(resp, "%ID%", string(req.ID), 1)); err != nil {
						return
					}
				}
			}()
			tr := newStdioTransport(newLineReader(outR, 4<<20), inW, zerolog.Nop())
			if err := tr.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer func() {
				_ = tr.Close()
				_ = inR.Close()
				_ = outR.Close()
			}()
			b.SetBytes(int64(len(resp)))
			b.ReportAllocs()
			ctx := context.Background()
			id := 0
			for b.Loop() {
				id++
				r, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId("px-" + strconv.Itoa(id)), Method: "tools/call"})
				if err != nil {
					b.Fatal(err)
				}
				if len(r.Result) < size.n {
					b.Fatalf("result of %d bytes", len(r.Result))
				}
			}
		})
	}
}
