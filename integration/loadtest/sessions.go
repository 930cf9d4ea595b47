package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Sessions scenario bounds.
const (
	// defaultSessions is -sessions: issue 38's 10,000 HTTP sessions open at
	// once on one process.
	defaultSessions = 10000
	// sessionOpeners is how many sessions are being opened at once.
	sessionOpeners = 16
	// sessionCalls is the tools/call requests each session makes.
	sessionCalls = 2
	// fdsPerSession is the descriptors one session takes in the load
	// test's process (its connection) and in the proxy's (the other end);
	// fdReserve covers everything else a process holds open.
	fdsPerSession = 1
	fdReserve     = 1024
)

// sessionsHTTP opens e.o.sessions Streamable HTTP sessions on one bare proxy
// (pinning: off, nothing else; the upstream is u over stdio) and keeps all
// of them open: each initializes on a connection of its own, which it keeps
// (no GET stream), and calls echo sessionCalls times. Then it reads the
// proxy's peak RSS. Any error fails the scenario. It raises this process's
// descriptor limit first (the proxy inherits it). The latencies reported
// are those of every request; CPU is the proxy's per session.
func sessionsHTTP(ctx context.Context, e *env, u string) (res *result, err error) {
	n := e.o.sessions
	if err := raiseFDLimit(uint64(n*fdsPerSession + fdReserve)); err != nil {
		return nil, err
	}
	var cl closers
	defer joinErr(&err, cl.close)
	sc, err := e.upstreamServer(u, 0)
	if err != nil {
		return nil, err
	}
	cfg, err := e.writeConfigWith(map[string]serverConfig{"fx": sc}, func(c *proxyConfig) { c.Pinning = "off" })
	if err != nil {
		return nil, err
	}
	proxy, err := e.startHTTPProxyConfig(ctx, &cl, cfg, "")
	if err != nil {
		return nil, err
	}
	cpu0, err := proxy.proc.cpuTime()
	if err != nil {
		return nil, err
	}
	clients := make([]*httpClient, n)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.hc.CloseIdleConnections()
			}
		}
	}()
	params := []byte(`{"name":"fx__echo","arguments":{"text":"ping"}}`)
	lat := make([]time.Duration, 0, n*(sessionCalls+1))
	var mu sync.Mutex
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range min(sessionOpeners, n) {
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				c := newHTTPClient(proxy.url)
				// One connection per session, kept open: the session's own.
				c.hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 1
				clients[i] = c
				t0 := time.Now()
				err := c.initialize(ctx)
				mine = append(mine, time.Since(t0))
				for k := 0; err == nil && k < sessionCalls; k++ {
					t0 = time.Now()
					var out []byte
					if out, err = c.request(ctx, "tools/call", params); err == nil {
						err = checkText(out, "ping")
					}
					mine = append(mine, time.Since(t0))
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("session %d: %w", i+1, err) })
					cancel()
					return
				}
				if (i+1)%(max(n/10, 1)) == 0 {
					mu.Lock() // the progress writer is not safe for concurrent use
					e.progressf("  %d/%d sessions open", i+1, n)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return nil, fmt.Errorf("%w (%s)", firstErr, proxy.proc.failure())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rss, err := proxy.proc.peakRSSBytes()
	if err != nil {
		return nil, err
	}
	cpu1, err := proxy.proc.cpuTime()
	if err != nil {
		return nil, err
	}
	var s samples
	s.add(lat, wall)
	sum := s.summarize(true)
	sum.PeakRSSMB = mib(rss)
	sum.Sessions = n
	perSession := float64(cpu1-cpu0) / float64(time.Microsecond) / float64(n)
	sum.CPUus = &perSession
	return newResult(map[string]summary{sideProxy: sum}), nil
}

// raiseFDLimit sets this process's soft limit on open descriptors to at
// least want (the hard limit cannot be passed). Setting it, even to the
// value the Go runtime raised it to at start, makes children inherit it
// instead of the limit this process started with.
func raiseFDLimit(want uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("descriptor limit: %w", err)
	}
	if lim.Max < want {
		return fmt.Errorf("descriptor limit: %d sessions need %d descriptors, the hard limit is %d", want-fdReserve, want, lim.Max)
	}
	lim.Cur = max(lim.Cur, want)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("descriptor limit: %w", err)
	}
	return nil
}
