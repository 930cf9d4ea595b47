package conformance

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/confrunner"
)

// runner is the conformance runner under integration/node_modules.
type runner struct{ *confrunner.Runner }

// findRunner locates the runner and node, and decides on the Node 20 shim.
func findRunner() (*runner, error) {
	dir, err := filepath.Abs("..")
	if err != nil {
		return nil, err
	}
	r, err := confrunner.Find(dir)
	if err != nil {
		return nil, err
	}
	return &runner{r}, nil
}

// scenarioLine is one line of `conformance list --server`: "  - name [versions]".
var scenarioLine = regexp.MustCompile(`^\s+- ([a-z0-9][a-z0-9-]*) \[`)

// serverScenarios lists every server scenario of the runner (the set that
// `--suite all` runs).
func (r *runner) serverScenarios() ([]string, error) {
	names, err := r.listScenarios("--server", scenarioLine)
	if err == nil && len(names) == 0 {
		err = errors.New("conformance list --server printed no scenarios")
	}
	return names, err
}

// listScenarios runs `conformance list <kind>` and returns the names that
// line matches (its first group).
func (r *runner) listScenarios(kind string, line *regexp.Regexp) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	out, err := r.Command(ctx, "list", kind).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("conformance list %s: %w\n%s", kind, err, tail(string(out), 3000))
	}
	var names []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			names = append(names, m[1])
		}
	}
	return names, nil
}

// scenarioResult is what the runner recorded for one scenario.
type scenarioResult = confrunner.Result

// suiteRun is one run of the server suite.
type suiteRun struct {
	output    string // the runner's stdout and stderr
	exitCode  int
	total     string // the runner's "Total: N passed, M failed" line
	scenarios map[string]*scenarioResult
}

// totalLine is the runner's closing summary line.
var totalLine = regexp.MustCompile(`Total: (\d+) passed, (\d+) failed`)

// runSuite runs `conformance server --suite all` against url, writing the
// results under outDir, and reads them back. expected, if not "", is the
// expected-failures file. A non-zero exit is not an error here: the caller
// judges the results.
func (r *runner) runSuite(url, outDir, expected string) (*suiteRun, error) {
	args := []string{"server", "--url", url, "--suite", "all", "-o", outDir}
	if expected != "" {
		args = append(args, "--expected-failures", expected)
	}
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	cmd := r.Command(ctx, args...)
	out, err := cmd.CombinedOutput()
	run := &suiteRun{output: string(out)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("conformance server --url %s did not finish within %s:\n%s", url, suiteTimeout, tail(run.output, 4000))
	case errors.As(err, &exit):
		run.exitCode = exit.ExitCode()
	case err != nil:
		return nil, fmt.Errorf("conformance server --url %s: %w", url, err)
	}
	m := totalLine.FindStringSubmatch(run.output)
	if m == nil {
		return nil, fmt.Errorf("conformance server --url %s (exit %d) printed no %q line:\n%s", url, run.exitCode, "Total: N passed, M failed", tail(run.output, 4000))
	}
	run.total = m[0]
	if run.scenarios, err = readResults(outDir); err != nil {
		return nil, err
	}
	// The runner's totals count SUCCESS and FAILURE checks: the files read
	// back must agree with them, or they are not this run's results.
	var success, failure int
	for _, s := range run.scenarios {
		success += s.Count("SUCCESS")
		failure += s.Count("FAILURE")
	}
	if want := fmt.Sprintf("Total: %d passed, %d failed", success, failure); want != run.total {
		return nil, fmt.Errorf("the checks.json files under %s add up to %q but the runner printed %q", outDir, want, run.total)
	}
	return run, nil
}

// readResults reads every server-<scenario>-<time>/checks.json under dir.
var readResults = confrunner.ReadServerResults

// missing returns the scenarios that have no result in run.
func (run *suiteRun) missing(scenarios []string) []string {
	var out []string
	for _, s := range scenarios {
		if run.scenarios[s] == nil {
			out = append(out, s)
		}
	}
	return out
}

// failedChecks returns how many FAILURE checks the run has in all.
func (run *suiteRun) failedChecks() int {
	n := 0
	for _, s := range run.scenarios {
		n += s.Count("FAILURE")
	}
	return n
}

// passedSet returns the names of the scenarios that passed, sorted.
func (run *suiteRun) passedSet() []string {
	var out []string
	for name, s := range run.scenarios {
		if s.Passed() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
