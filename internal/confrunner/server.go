package confrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// ServerRun is the outcome of one `conformance server` run.
type ServerRun struct {
	ExitCode int    // the runner's
	Output   string // the runner's stdout and stderr
	// Scenarios holds each scenario's checks, by scenario name.
	Scenarios map[string]*Result
}

// Server runs `conformance server --url url -o outDir` plus args (such as
// `--requirements 2026-07-28` or `--suite all`) with r.Env, until it ends
// or ctx does, and reads back every scenario's checks. outDir must be
// empty. A non-zero exit is not an error here: the caller judges ExitCode
// and the results.
func (r *Runner) Server(ctx context.Context, url, outDir string, args ...string) (*ServerRun, error) {
	cmd := r.Command(ctx, append([]string{"server", "--url", url, "-o", outDir}, args...)...)
	out, err := cmd.CombinedOutput()
	run := &ServerRun{Output: string(out)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("conformance server --url %s did not finish in time (%v):\n%s", url, ctx.Err(), testproc.Tail(run.Output, 4000))
	case errors.As(err, &exit):
		run.ExitCode = exit.ExitCode()
	case err != nil:
		return nil, fmt.Errorf("conformance server --url %s: %w", url, err)
	}
	if run.Scenarios, err = ReadServerResults(outDir); err != nil {
		return nil, fmt.Errorf("%w\nrunner output (tail):\n%s", err, testproc.Tail(run.Output, 4000))
	}
	if len(run.Scenarios) == 0 {
		return nil, fmt.Errorf("conformance server --url %s (exit %d) wrote no results:\n%s", url, run.ExitCode, testproc.Tail(run.Output, 4000))
	}
	return run, nil
}

// Names returns the run's scenario names, sorted.
func (run *ServerRun) Names() []string {
	names := make([]string, 0, len(run.Scenarios))
	for name := range run.Scenarios {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// serverResultDir is the runner's per-scenario output directory name:
// "server-<scenario>-<ISO time with : and . as ->".
var serverResultDir = regexp.MustCompile(`^server-([a-z0-9][a-z0-9-]*)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// ReadServerResults reads every server-<scenario>-<time>/checks.json under
// dir, by scenario. Any other entry, or a scenario met twice, is an error:
// dir would not hold one run's results.
func ReadServerResults(dir string) (map[string]*Result, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("conformance results: %w", err)
	}
	results := make(map[string]*Result, len(entries))
	for _, e := range entries {
		m := serverResultDir.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			return nil, fmt.Errorf("conformance results: unexpected entry %q in %s", e.Name(), dir)
		}
		if results[m[1]] != nil {
			return nil, fmt.Errorf("conformance results: scenario %s has two result directories in %s", m[1], dir)
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			return nil, fmt.Errorf("conformance results: %w", err)
		}
		var checks []Check
		if err := json.Unmarshal(raw, &checks); err != nil {
			return nil, fmt.Errorf("conformance results: %s/checks.json: %w", e.Name(), err)
		}
		results[m[1]] = &Result{Checks: checks}
	}
	return results, nil
}
