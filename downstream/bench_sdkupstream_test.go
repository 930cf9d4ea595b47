package downstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// The benchmarks in this file run a tools/call through the whole proxy
// process as it runs in production, minus the process boundary on the
// client side: a real stdio upstream (the load test's go-sdk echo server, a
// child process behind OS pipes and upstream.Conn), the client on OS pipes
// (stdio) or loopback HTTP. BenchmarkStdioCall and BenchmarkHTTPCall, with a
// fake upstream that answers in the same goroutine, show the route's own
// cost; these add what a call costs around it (the upstream client, the
// goroutine hand-offs, the system calls), which is where most of a real
// call's CPU time goes. Profile with -cpuprofile and -focus on the proxy's
// packages; the client's share is in the same profile.

// cpuClock reads this process's CPU time (user + system, every thread): the
// proxy and the benchmark's client, not the upstream child.
func cpuClock(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the CPU time per call since start as "cpu-ns/op", which
// noise from other processes on a shared machine moves far less than the
// wall time.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuClock(b)-start)/float64(b.N), "cpu-ns/op")
}

// sdkUpstreamBuildTimeout bounds building the load test binary.
const sdkUpstreamBuildTimeout = 3 * time.Minute

// sdkUpstreamProxy builds the load test binary, connects to its go-sdk echo
// server over stdio (padding each echo to payload bytes, 0 = none) and
// returns a proxy with it as server fx.
func sdkUpstreamProxy(b *testing.B, payload int) *Proxy {
	b.Helper()
	root, err := testproc.ModuleRoot("..")
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "loadtest")
	if err := testproc.Build(root, bin, "./integration/loadtest", false, sdkUpstreamBuildTimeout); err != nil {
		b.Fatal(err)
	}
	cfg := parseConfig(b, fmt.Sprintf(`
startup_wait: 2s
log:
  level: warn
blobs:
  mode: passthrough
servers:
  fx:
    command: %s
    args: ["-payload-bytes", "%d"]
    env:
      MCP_PROXY_LOADTEST_ROLE: sdk-echo
    timeout: 10s
`, bin, payload))
	conn := upstream.New(cfg.Servers["fx"], upstream.Options{Logger: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(func() { cancel(); _ = conn.Close() })
	conn.Start(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for conn.Snapshot().State != upstream.StateConnected {
		if time.Now().After(deadline) {
			b.Fatalf("the go-sdk upstream did not connect: %v", conn.Snapshot().Err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p := New(Options{Config: cfg, Upstreams: map[string]Upstream{"fx": conn}, Logger: zerolog.Nop(), Version: "bench"})
	p.Refresh()
	return p
}

// BenchmarkStdioCallSDKUpstream: one tools/call at a time over stdio (OS
// pipes) to the go-sdk echo server over stdio.
func BenchmarkStdioCallSDKUpstream(b *testing.B) { benchStdioCallSDKUpstream(b, 0, 1) }

// BenchmarkStdioCall64KSDKUpstream: the same with the echo padded to 64 KiB
// (the load test's call-64k-stdio).
func BenchmarkStdioCall64KSDKUpstream(b *testing.B) { benchStdioCallSDKUpstream(b, 64<<10, 1) }

// BenchmarkStdioCall8SDKUpstream: 8 calls in flight on the one stdio
// session (the load test's call-stdio-c8).
func BenchmarkStdioCall8SDKUpstream(b *testing.B) { benchStdioCallSDKUpstream(b, 0, 8) }

func benchStdioCallSDKUpstream(b *testing.B, payload, inflight int) {
	p := sdkUpstreamProxy(b, payload)
	// The proxy's stdin is a pipe in blocking mode, as a client's pipe is.
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		b.Fatal(err)
	}
	inR, inW := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "client")
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, "", nil, inR, outW) }()
	lines := bufio.NewReaderSize(outR, 1<<20)
	roundTrip := func(s string) string {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			b.Fatal(err)
		}
		if s == `{"jsonrpc":"2.0","method":"notifications/initialized"}` {
			return ""
		}
		l, err := lines.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	roundTrip(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if l := roundTrip(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hello"}}}`); !strings.Contains(l, `"text":"hello`) {
		b.Fatalf("tools/call answered %.200s", l)
	}
	call := func(i int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hello"}}}`, i)
	}
	b.ResetTimer()
	cpu0 := cpuClock(b)
	if inflight <= 1 {
		for i := 2; i < b.N+2; i++ {
			roundTrip(call(i))
		}
	} else {
		// A writer keeps inflight calls outstanding; each answer read
		// lets the next one go.
		slots := make(chan struct{}, inflight)
		writeErr := make(chan error, 1)
		go func() {
			for i := 2; i < b.N+2; i++ {
				slots <- struct{}{}
				if _, err := io.WriteString(inW, call(i)+"\n"); err != nil {
					writeErr <- err
					return
				}
			}
			writeErr <- nil
		}()
		for range b.N {
			if l, err := lines.ReadString('\n'); err != nil || !strings.Contains(l, `"result"`) {
				b.Fatalf("answer %q, %v", l, err)
			}
			<-slots
		}
		if err := <-writeErr; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu0)
	_ = inW.Close()
	cancel()
	<-done
	_ = outW.Close()
	_ = outR.Close()
	_ = inR.Close()
}

// BenchmarkHTTPCallSDKUpstream: one tools/call at a time over loopback
// Streamable HTTP to the go-sdk echo server over stdio.
func BenchmarkHTTPCallSDKUpstream(b *testing.B) {
	p := sdkUpstreamProxy(b, 0)
	srv := httptest.NewServer(p.HTTPHandler(""))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	post := func(sid, body string) (string, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Mcp-Session-Id"), string(data)
	}
	sid, _ := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if _, body := post(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hello"}}}`); !strings.Contains(body, `"text":"hello"`) {
		b.Fatalf("tools/call answered %s", body)
	}
	b.ResetTimer()
	cpu0 := cpuClock(b)
	for i := 2; i < b.N+2; i++ {
		post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hello"}}}`, i))
	}
	b.StopTimer()
	reportCPU(b, cpu0)
}
