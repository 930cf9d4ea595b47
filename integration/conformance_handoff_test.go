//go:build chromium

package integration

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/atomicfile"
	"github.com/mcp-proxy/mcp-proxy/internal/confrunner"
	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// A client scenario of the MCP conformance suite whose client under test
// the test drives itself (the status page's Log in, in Chromium): the
// runner starts the scenario's authorization and MCP servers and runs
// integration/conformance/handoffhost, which hands the MCP URL over
// through a folder and waits for the test's verdict; once the test says
// pass, handoffhost exits 0 and the runner judges what the scenario's
// servers saw.

const (
	// handoffClientTimeout is the runner's --timeout for handoffhost (ms):
	// the whole browser test runs while the scenario waits.
	handoffClientTimeout = "600000"
	// handoffRunTimeout bounds the runner process.
	handoffRunTimeout = 11 * time.Minute
)

// handoffScenario is one running client scenario.
type handoffScenario struct {
	name string
	url  string // the scenario's MCP server
	dir  string // the hand-off folder

	cancel context.CancelFunc
	ended  chan struct{} // closed when the runner has ended
	run    *confrunner.ClientRun
	err    error
}

// startHandoffScenario runs `conformance client --scenario name` with
// handoffhost and returns once the scenario's MCP URL was handed over. The
// scenario ends with finish; a test that ends first fails it.
func startHandoffScenario(t *testing.T, name string) *handoffScenario {
	t.Helper()
	integ, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	r, err := confrunner.Find(integ)
	if err != nil {
		t.Fatal(err)
	}
	root, err := testproc.ModuleRoot("..")
	if err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(t.TempDir(), "handoffhost")
	if err := testproc.Build(root, host, "./integration/conformance/handoffhost", false, buildTimeout); err != nil {
		t.Fatal(err)
	}
	h := &handoffScenario{name: name, dir: t.TempDir(), ended: make(chan struct{})}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), handoffRunTimeout)
	h.cancel = cancel
	go func() {
		defer close(h.ended)
		h.run, h.err = r.Client(ctx, host, name, handoffClientTimeout, out, "MCP_PROXY_HANDOFF_DIR="+h.dir)
	}()
	t.Cleanup(func() {
		select {
		case <-h.ended:
		default:
			h.verdict(t, "fail: the test ended first")
			select {
			case <-h.ended:
			case <-time.After(exitTimeout):
			}
		}
		cancel()
		<-h.ended
	})
	deadline := time.Now().Add(startTimeout)
	for {
		b, err := os.ReadFile(filepath.Join(h.dir, "url"))
		if err == nil {
			h.url = string(b)
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		select {
		case <-h.ended:
			output := ""
			if h.run != nil {
				output = h.run.Output
			}
			t.Fatalf("conformance client --scenario %s ended before handing its URL over: %v\n%s", name, h.err, tail(output, 4000))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("conformance client --scenario %s handed no URL over within %s", name, startTimeout)
		}
	}
	if !strings.HasPrefix(h.url, "http://localhost:") {
		t.Fatalf("scenario %s MCP URL %q", name, h.url)
	}
	return h
}

// verdict writes the hand-off's done file.
func (h *handoffScenario) verdict(t *testing.T, v string) {
	t.Helper()
	if err := atomicfile.WriteFile(filepath.Join(h.dir, "done"), []byte(v), 0o600); err != nil {
		t.Error(err)
	}
}

// finish tells handoffhost to exit 0 and returns the runner's result, or
// fails the test if the runner does not end in time.
func (h *handoffScenario) finish(t *testing.T) *confrunner.ClientRun {
	t.Helper()
	h.verdict(t, "pass")
	select {
	case <-h.ended:
	case <-time.After(callTimeout):
		t.Fatalf("conformance client --scenario %s did not end within %s of the verdict", h.name, callTimeout)
	}
	if h.err != nil {
		t.Fatalf("conformance client --scenario %s: %v", h.name, h.err)
	}
	return h.run
}
