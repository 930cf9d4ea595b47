package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
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
			inW, outR := answeringChild(b, func(id json.RawMessage, _ string) string {
				return strings.Replace(resp, "%ID%", string(id), 1)
			})
			tr := newStdioTransport(newLineReader(outR, 4<<20), inW, zerolog.Nop())
			tr.start(context.Background())
			defer func() { _ = tr.Close() }()
			b.SetBytes(int64(len(resp)))
			b.ReportAllocs()
			ctx := context.Background()
			id := 0
			for b.Loop() {
				id++
				r, _, err := tr.call(ctx, "px-"+strconv.Itoa(id), "tools/call", nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if len(r) < size.n {
					b.Fatalf("result of %d bytes", len(r))
				}
			}
		})
	}
}

// BenchmarkStdioPasses measures, per MiB of a response line, the two passes
// of the stdio read path without pipes: the line limiter (ReadLine over an
// in-memory stdout) and the transport's handling of one line (one
// validating envelope scan, routing, the result copied out).
func BenchmarkStdioPasses(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}} {
		line := []byte(strings.Replace(bigResponse(size.n), "%ID%", `"px-1"`, 1))
		b.Run(size.name+"/ReadLine", func(b *testing.B) {
			src := &repeatReader{line: line}
			l := newLineReader(src, 4<<20)
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				got, err := l.ReadLine()
				if err != nil || len(got) != len(line) {
					b.Fatalf("%d bytes, %v", len(got), err)
				}
			}
		})
		b.Run(size.name+"/handleLine", func(b *testing.B) {
			tr := newStdioTransport(nil, nil, zerolog.Nop())
			ch := make(chan rpcReply, 1)
			tr.pending.m = map[string]chan rpcReply{}
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				tr.pending.mu.Lock() // the channel reused: the benchmark measures the line
				tr.pending.m[rawjson.IDKey(json.RawMessage(`"px-1"`))] = ch
				tr.pending.mu.Unlock()
				tr.handleLine(line, false)
				if r := <-ch; r.err != nil || len(r.result) < size.n {
					b.Fatal("no result")
				}
			}
		})
	}
}

// answeringChild is a stdio "child" on real pipes, run by a goroutine: every
// request line written to stdin is answered on stdout with reply(its id,
// the line). The pipes are closed at the end of the test.
func answeringChild(tb testing.TB, reply func(id json.RawMessage, line string) string) (stdin *os.File, stdout *os.File) {
	tb.Helper()
	inR, inW, err := os.Pipe() // proxy -> child
	if err != nil {
		tb.Fatal(err)
	}
	outR, outW, err := os.Pipe() // child -> proxy
	if err != nil {
		tb.Fatal(err)
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
			if _, err := outW.WriteString(reply(req.ID, line)); err != nil {
				return
			}
		}
	}()
	tb.Cleanup(func() {
		_ = inW.Close()
		_ = inR.Close()
		_ = outR.Close()
	})
	return inW, outR
}

// repeatReader returns line over and over, in pipe-sized reads.
type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p[:min(len(p), 64<<10)], r.line[r.off:])
	r.off = (r.off + n) % len(r.line)
	return n, nil
}

// BenchmarkSSEAnswer measures reading the answer to a request from an SSE
// response whose one event is a large tool result: the event reader, the
// envelope scan and the result copied out (httpWire.streamAnswer), next to
// encoding/json's decoding of that message into a generic response, for
// scale.
func BenchmarkSSEAnswer(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}} {
		msg := strings.Replace(strings.TrimSuffix(bigResponse(size.n), "\n"), "%ID%", `"px-1"`, 1)
		event := []byte("event: message\nid: 1\ndata: " + msg + "\n\n")
		w := &httpWire{in: inbox{log: zerolog.Nop(), requests: newRequestServer(zerolog.Nop()), life: context.Background()}}
		key := rawjson.IDKey(json.RawMessage(`"px-1"`))
		b.Run(size.name+"/streamAnswer", func(b *testing.B) {
			b.SetBytes(int64(len(event)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := w.streamAnswer(context.Background(), io.NopCloser(bytes.NewReader(event)), replyTo{}, key)
				if err != nil || len(r.result) < size.n {
					b.Fatalf("%d bytes, %v", len(r.result), err)
				}
			}
		})
		b.Run(size.name+"/json-decode", func(b *testing.B) {
			b.SetBytes(int64(len(event)))
			b.ReportAllocs()
			for b.Loop() {
				var r struct {
					ID     json.RawMessage `json:"id"`
					Result json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal([]byte(msg), &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
