package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The floors put the thinnest possible stand-in where the proxy goes, as a
// side of the same scenario as the proxy, so that the report shows what any
// proxy process pays on this machine before doing any work of its own:
//
//   - over stdio, a line relay (relay below) that spawns the upstream and
//     copies each line from its stdin to the child's and back, parsing
//     nothing;
//   - over HTTP with a stdio upstream, the bridge (bridge.go) that takes
//     Streamable HTTP POSTs, writes them to the same stdio upstream and
//     answers with the reply, parsing nothing but the id;
//   - over HTTP with an HTTP upstream, net/http's ReverseProxy
//     (reverseProxy below);
//   - for the cold start, the 20 upstreams started at once and each asked
//     for its tools directly (fleetToCatalogs).

// relay runs argv as a child and copies lines between this process's stdio
// and the child's until the child's stdout ends.
func relay(argv []string) error {
	cmd, in, out, err := startChild(argv)
	if err != nil {
		return err
	}
	go func() {
		_ = copyLines(in, os.Stdin)
		_ = in.Close()
	}()
	err = copyLines(os.Stdout, out)
	return errors.Join(err, cmd.Wait())
}

// copyLines writes each line of r to w as soon as it is complete.
func copyLines(w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if _, werr := w.Write(line); werr != nil {
				return werr
			}
		}
		switch {
		case err == nil || errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// fleetToCatalogs starts every fleet fixture at once and returns the time
// until the last of them has listed its tools (stopping them is not timed).
func (e *env) fleetToCatalogs(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, fleetSize)
	took := make([]time.Duration, fleetSize)
	for i := range fleetSize {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "fx" + strconv.Itoa(i+1)
			c, err := dialStdio(ctx, e.fleet, e.fixtureSpec(name, []string{"-tools", strconv.Itoa(toolsEach), "-only-synthetic", "-name", name}))
			if err != nil {
				errs[i] = err
				return
			}
			defer joinErr(&errs[i], c.close)
			if _, err := waitTools(ctx, c, hasCount(toolsEach)); err != nil {
				errs[i] = fmt.Errorf("%s: %w", name, err)
			}
			took[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	return slices.Max(took), errors.Join(errs...)
}

// reverseProxy serves a reverse proxy to argv[0] on a loopback port and
// says where on stderr ("listening on URL", as the fixture does).
func reverseProxy(argv []string) error {
	if len(argv) != 1 {
		return errors.New("want one upstream URL")
	}
	target, err := url.Parse(argv[0])
	if err != nil {
		return err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host}) },
		FlushInterval: -1, // SSE responses go through as they come
		Transport:     &http.Transport{MaxIdleConnsPerHost: 64},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "relay listening on http://%s%s\n", ln.Addr(), target.Path)
	return http.Serve(ln, rp)
}
