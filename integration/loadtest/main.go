package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Exit codes: 0 the tool ran (targets missed or not), 1 a scenario or the
// cleanup failed, 2 bad command line.
const (
	exitBroken = 1
	exitUsage  = 2
)

// errUsage marks a bad command line.
var errUsage = errors.New("usage")

func main() {
	runRoleIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadtest: %v\n", err)
		if errors.Is(err, errUsage) {
			os.Exit(exitUsage)
		}
		os.Exit(exitBroken)
	}
}

// options are the command line.
type options struct {
	proxy     string
	fixture   string
	peer      string // optional: another MCP proxy for the HTTP scenarios
	scenarios []string
	upstreams []string
	n         int
	rounds    int
	jsonPath  string
	timeout   time.Duration
	// redisServer is the redis-server binary of the store scenarios ("":
	// not found).
	redisServer string
	// upstreamProtocol is the protocol setting of the proxy's upstreams:
	// by default the version the direct and floor sides speak, so that
	// every side asks the same of the upstream.
	upstreamProtocol string
	// sessions is how many HTTP sessions sessions-http opens.
	sessions int
}

// defaultTimeout bounds one scenario, set-up and teardown included; the
// slowest (call-1m) takes well under a minute on a loaded 2-core machine.
const defaultTimeout = 10 * time.Minute

// run is the whole program. argv[0] is the program name, shown in the
// report's command line. The table goes to stdout, progress to stderr.
func run(ctx context.Context, argv []string, stdout, stderr io.Writer) (err error) {
	o, err := parseOptions(argv[1:], stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mcp-proxy-loadtest-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer joinErr(&err, func() error { return os.RemoveAll(dir) })
	e := &env{o: o, fleet: &fleet{}, dir: dir, progress: stderr}
	defer joinErr(&err, e.fleet.stopAll)

	rep := newReport(o, argv)
	var broken []error
runs:
	for _, sc := range scenarios {
		if !slices.Contains(o.scenarios, sc.name) {
			continue
		}
		for _, u := range sc.upstreams {
			if !slices.Contains(o.upstreams, u) {
				continue
			}
			e.progressf("%s (%s) ...", sc.name, u)
			sctx, cancel := context.WithTimeout(ctx, o.timeout)
			res, err := sc.run(sctx, e, u)
			cancel()
			if err != nil {
				broken = append(broken, fmt.Errorf("%s (%s): %w", sc.name, u, err))
				res = &result{Error: err.Error()}
			}
			res.Scenario, res.Upstream = sc.name, u
			res.judge(sc.target)
			rep.Results = append(rep.Results, res)
			if ctx.Err() != nil {
				break runs
			}
		}
	}
	if err := rep.writeTable(stdout); err != nil {
		return err
	}
	if o.jsonPath != "" {
		if err := rep.writeJSON(o.jsonPath); err != nil {
			return err
		}
	}
	return errors.Join(append(broken, ctx.Err())...)
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	var names, ups string
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.proxy, "proxy", "", "mcp-proxy binary (go build -o /tmp/mcp-proxy ./cmd/mcp-proxy)")
	fs.StringVar(&o.fixture, "fixture", "", "fixture binary (go build -o /tmp/fixture ./integration/fixture)")
	fs.StringVar(&o.peer, "peer", "", "optional: TBXark/mcp-proxy binary, a fourth side of the HTTP call scenarios")
	fs.StringVar(&names, "scenarios", strings.Join(defaultScenarioNames(), ","), "comma-separated scenarios (sessions-http and the store-* ones, which start a redis-server, only when named)")
	fs.IntVar(&o.sessions, "sessions", defaultSessions, "HTTP sessions sessions-http opens at once")
	fs.StringVar(&o.redisServer, "redis-server", "", "redis-server binary of the store scenarios (default: redis-server on PATH)")
	fs.StringVar(&ups, "upstreams", strings.Join(upstreamNames, ","), "comma-separated upstreams of the call scenarios")
	fs.IntVar(&o.n, "n", 2000, "requests per side (call-1m and list-20x100 send n/10)")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds of direct/proxy alternation (and cold starts per side)")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "time limit of one scenario")
	fs.StringVar(&o.upstreamProtocol, "upstream-protocol", protocolVersion, "the proxy's protocol setting for its upstreams (auto: let it discover the era, as by default; the direct and floor sides speak "+protocolVersion+")")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	for _, p := range []*string{&o.proxy, &o.fixture} {
		if *p == "" {
			problems = append(problems, errors.New("-proxy and -fixture are required"))
			break
		}
	}
	for _, p := range []*string{&o.proxy, &o.fixture, &o.peer} {
		if *p == "" {
			continue
		}
		if err := absExecutable(p); err != nil {
			problems = append(problems, err)
		}
	}
	if o.redisServer == "" {
		o.redisServer, _ = exec.LookPath("redis-server")
	} else if err := absExecutable(&o.redisServer); err != nil {
		problems = append(problems, err)
	}
	if o.rounds < 1 {
		problems = append(problems, errors.New("-rounds must be at least 1"))
	}
	if o.n < o.rounds {
		problems = append(problems, errors.New("-n must be at least -rounds"))
	}
	if o.sessions < 1 {
		problems = append(problems, errors.New("-sessions must be at least 1"))
	}
	if o.timeout <= 0 {
		problems = append(problems, errors.New("-timeout must be positive"))
	}
	o.scenarios = splitList(names)
	for _, n := range o.scenarios {
		if !slices.Contains(scenarioNames(), n) {
			problems = append(problems, fmt.Errorf("unknown scenario %q (known: %s)", n, strings.Join(scenarioNames(), ", ")))
		}
	}
	o.upstreams = splitList(ups)
	for _, u := range o.upstreams {
		if !slices.Contains(upstreamNames, u) {
			problems = append(problems, fmt.Errorf("unknown upstream %q (known: %s)", u, strings.Join(upstreamNames, ", ")))
		}
	}
	if err := errors.Join(problems...); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// absExecutable makes *p absolute (the proxy's config names the fixture)
// and checks it is an executable file.
func absExecutable(p *string) error {
	abs, err := filepath.Abs(*p)
	if err != nil {
		return fmt.Errorf("%s: %w", *p, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", abs)
	}
	*p = abs
	return nil
}

func scenarioNames() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.name)
	}
	return out
}

// defaultScenarioNames are the scenarios run when -scenarios is not given:
// all but the opt-in ones.
func defaultScenarioNames() []string {
	var out []string
	for _, s := range scenarios {
		if !optIn[s.name] {
			out = append(out, s.name)
		}
	}
	return out
}
