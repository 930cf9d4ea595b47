package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
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
	runRelayIfAsked()
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
	scenarios []string
	n         int
	rounds    int
	jsonPath  string
	timeout   time.Duration
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
	for _, sc := range scenarios {
		if !o.selected(sc.name) {
			continue
		}
		e.progressf("%s ...", sc.name)
		sctx, cancel := context.WithTimeout(ctx, o.timeout)
		res, err := sc.run(sctx, e)
		cancel()
		if err != nil {
			broken = append(broken, fmt.Errorf("%s: %w", sc.name, err))
			res = &result{Error: err.Error()}
		}
		res.Scenario = sc.name
		res.judge(sc.target)
		rep.Results = append(rep.Results, res)
		if ctx.Err() != nil {
			break
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
	var names string
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.proxy, "proxy", "", "mcp-proxy binary (go build -o /tmp/mcp-proxy ./cmd/mcp-proxy)")
	fs.StringVar(&o.fixture, "fixture", "", "fixture binary (go build -o /tmp/fixture ./integration/fixture)")
	fs.StringVar(&names, "scenarios", "", "comma-separated scenarios (default all): "+strings.Join(scenarioNames(), ","))
	fs.IntVar(&o.n, "n", 2000, "requests per side (call-1m and list-20x100 send n/10)")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds of direct/proxy alternation (and cold starts per side)")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "time limit of one scenario")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	for _, p := range []*string{&o.proxy, &o.fixture} {
		if err := absExecutable(p); err != nil {
			problems = append(problems, err)
		}
	}
	if o.rounds < 1 {
		problems = append(problems, errors.New("-rounds must be at least 1"))
	}
	if o.n < o.rounds {
		problems = append(problems, errors.New("-n must be at least -rounds"))
	}
	if o.timeout <= 0 {
		problems = append(problems, errors.New("-timeout must be positive"))
	}
	if names != "" {
		for _, n := range strings.Split(names, ",") {
			n = strings.TrimSpace(n)
			o.scenarios = append(o.scenarios, n)
			if !knownScenario(n) {
				problems = append(problems, fmt.Errorf("unknown scenario %q (known: %s)", n, strings.Join(scenarioNames(), ", ")))
			}
		}
	}
	if err := errors.Join(problems...); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

// absExecutable makes *p absolute (the proxy's config names the fixture)
// and checks it is an executable file.
func absExecutable(p *string) error {
	if *p == "" {
		return errors.New("-proxy and -fixture are required")
	}
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

func (o options) selected(name string) bool {
	if len(o.scenarios) == 0 {
		return true
	}
	for _, s := range o.scenarios {
		if s == name {
			return true
		}
	}
	return false
}

func scenarioNames() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.name)
	}
	return out
}

func knownScenario(name string) bool {
	for _, s := range scenarios {
		if s.name == name {
			return true
		}
	}
	return false
}
