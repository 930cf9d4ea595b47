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
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The floor scenarios put the thinnest possible stand-in where the proxy
// goes, so that the report shows what any proxy process pays on this
// machine before doing any work of its own:
//
//   - floor-call-stdio-c1/c8: a line relay (this binary, re-executed) that
//     spawns the fixture and copies each line from its stdin to the child's
//     and back, with no parsing.
//   - floor-coldstart-20: the 20 fleet fixtures started at once and each
//     asked for its tools directly, until all have answered, against the one
//     fixture holding all 2,000 tools.
//
//   - floor-call-http-c8: a plain HTTP reverse proxy (the same binary, its
//     own net/http server and client, no parsing) in front of the fixture's
//     Streamable HTTP endpoint.
//
// They have no target: they bound the proxy's ratios from below.

// relayEnv, set in a process's environment, makes this binary (or its test
// binary) the line relay of the floor scenarios for the command in its
// arguments.
const relayEnv = "MCP_PROXY_LOADTEST_RELAY"

// runRelayIfAsked runs the relay and exits when relayEnv is set: "1" the
// stdio line relay, "http" the reverse proxy to the URL in the arguments.
func runRelayIfAsked() {
	var err error
	switch os.Getenv(relayEnv) {
	case "":
		return
	case "http":
		err = relayHTTP(os.Args[1:])
	default:
		err = relay(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "relay: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// relay runs argv as a child and copies lines between this process's stdio
// and the child's until the child's stdout ends.
func relay(argv []string) error {
	if len(argv) == 0 {
		return errors.New("no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, relayEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
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

// relaySpec runs the relay in front of the fixture with args.
func (e *env) relaySpec(args []string) (procSpec, error) {
	self, err := os.Executable()
	if err != nil {
		return procSpec{}, fmt.Errorf("relay: %w", err)
	}
	return procSpec{name: "relay", path: self, args: append([]string{e.o.fixture}, args...), stdio: true,
		env: []string{relayEnv + "=1"}}, nil
}

// floorCallStdio is callStdio with the relay in place of the proxy.
func floorCallStdio(conc int) func(context.Context, *env) (*result, error) {
	return func(ctx context.Context, e *env) (res *result, err error) {
		direct, err := dialStdio(ctx, e.fleet, e.fixtureSpec("fixture", nil))
		if err != nil {
			return nil, err
		}
		defer joinErr(&err, direct.close)
		spec, err := e.relaySpec(nil)
		if err != nil {
			return nil, err
		}
		relayed, err := dialStdio(ctx, e.fleet, spec)
		if err != nil {
			return nil, err
		}
		defer joinErr(&err, relayed.close)
		sides := [2]*side{echoSide("direct", direct, "echo", 0), echoSide("relay", relayed, "echo", 0)}
		return e.measure(ctx, sides, e.o.n, conc)
	}
}

// floorColdStart times the fleet's fixtures started and listed directly, all
// at once, against the one fixture with the whole catalog.
func floorColdStart(ctx context.Context, e *env) (*result, error) {
	var acc [2]samples
	for r := 0; r < e.o.rounds; r++ {
		for _, i := range roundOrder(r) {
			var d time.Duration
			var err error
			if i == 0 {
				d, err = timeToCatalog(ctx, e.fleet, e.fixtureSpec("fixture", fullCatalogArgs))
			} else {
				d, err = e.fleetToCatalogs(ctx)
			}
			if err != nil {
				return nil, fmt.Errorf("%s cold start %d: %w", floorLabels[i], r+1, err)
			}
			acc[i].add([]time.Duration{d}, 0)
			e.progressf("  cold start %d/%d %-6s %7.1f ms", r+1, e.o.rounds, floorLabels[i], ms(d))
		}
	}
	return newResult(acc[0].summarize(false), acc[1].summarize(false)), nil
}

var floorLabels = [2]string{"direct", "fleet"}

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

// relayHTTP serves a reverse proxy to argv[0] on a loopback port and says
// where on stderr ("listening on URL", as the fixture does).
func relayHTTP(argv []string) error {
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

// floorCallHTTP is callHTTP with the reverse proxy in place of the proxy.
func floorCallHTTP(conc int) func(context.Context, *env) (*result, error) {
	return func(ctx context.Context, e *env) (res *result, err error) {
		fx, fxURL, err := e.fleet.startReady(ctx, e.httpFixtureSpec())
		if fx != nil {
			defer joinErr(&err, fx.stop)
		}
		if err != nil {
			return nil, err
		}
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		rp, rpURL, err := e.fleet.startReady(ctx, procSpec{name: "relay (http)", path: self, args: []string{fxURL},
			ready: fixtureURL, env: []string{relayEnv + "=http"}})
		if rp != nil {
			defer joinErr(&err, rp.stop)
		}
		if err != nil {
			return nil, err
		}
		direct, err := dialHTTP(ctx, fxURL)
		if err != nil {
			return nil, err
		}
		defer joinErr(&err, func() error { return direct.close(ctx) })
		relayed, err := dialHTTP(ctx, rpURL)
		if err != nil {
			return nil, fmt.Errorf("relay: %w (%s)", err, rp.failure())
		}
		defer joinErr(&err, func() error { return relayed.close(ctx) })
		sides := [2]*side{echoSide("direct", direct, "echo", 0), echoSide("relay", relayed, "echo", 0)}
		return e.measure(ctx, sides, e.o.n, conc)
	}
}
