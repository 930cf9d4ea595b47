package confrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// Check is one entry of a scenario's checks.json.
type Check struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING or INFO
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// Result is what the runner recorded for one scenario.
type Result struct {
	Checks []Check
}

// Count returns how many checks have the status.
func (s *Result) Count(status string) int {
	n := 0
	for _, c := range s.Checks {
		if c.Status == status {
			n++
		}
	}
	return n
}

// Passed applies the runner's own rule: a scenario fails when any check
// is a FAILURE or a WARNING.
func (s *Result) Passed() bool {
	return s.Count("FAILURE") == 0 && s.Count("WARNING") == 0
}

// Problems describes the failing and warning checks, one per line.
func (s *Result) Problems() string {
	var b strings.Builder
	for _, c := range s.Checks {
		if c.Status != "FAILURE" && c.Status != "WARNING" {
			continue
		}
		fmt.Fprintf(&b, "    %s %s: %s\n", c.Status, c.ID, c.ErrorMessage)
		if len(c.Details) > 0 && string(c.Details) != "null" {
			fmt.Fprintf(&b, "      details: %s\n", testproc.Tail(string(c.Details), 1500))
		}
	}
	return b.String()
}

// ReadChecks reads one checks.json.
func ReadChecks(path string) (*Result, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var checks []Check
	if err := json.Unmarshal(raw, &checks); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Result{Checks: checks}, nil
}

// ClientRun is the outcome of one client scenario.
type ClientRun struct {
	Result   *Result
	ExitCode int    // the runner's
	Output   string // the runner's stdout and stderr
	Stderr   string // the client command's stderr, as the runner kept it
}

// Client runs `conformance client --command command --scenario scenario
// --timeout timeoutMS -o outDir` with r.Env plus env, until it ends or ctx
// does, and reads back the scenario's checks. The runner runs command
// (split on spaces, through a shell) with the scenario's MCP URL as its
// last argument and waits for it to exit. A non-zero exit is not an error
// here: the caller judges ExitCode and Result.
func (r *Runner) Client(ctx context.Context, command, scenario, timeoutMS, outDir string, env ...string) (*ClientRun, error) {
	args := append([]string{"client", "--command", command, "--scenario", scenario, "--timeout", timeoutMS, "-o", outDir}, r.ClientArgs...)
	cmd := r.Command(ctx, args...)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	run := &ClientRun{Output: string(out)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("conformance client --scenario %s did not finish in time (%v):\n%s", scenario, ctx.Err(), testproc.Tail(run.Output, 4000))
	case errors.As(err, &exit):
		run.ExitCode = exit.ExitCode()
	case err != nil:
		return nil, fmt.Errorf("conformance client --scenario %s: %w", scenario, err)
	}
	var found []string
	_ = filepath.WalkDir(outDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "checks.json" {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 1 {
		return nil, fmt.Errorf("conformance client --scenario %s wrote %d checks.json files under %s, want 1:\n%s", scenario, len(found), outDir, testproc.Tail(run.Output, 4000))
	}
	if run.Result, err = ReadChecks(found[0]); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(found[0]), "stderr.txt")); err == nil {
		run.Stderr = string(b)
	}
	return run, nil
}
