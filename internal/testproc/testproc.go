// Package testproc holds what the test packages share about the
// processes they start: building them, a concurrency-safe output buffer,
// the tail of a log for failure messages, and a scan of /proc for
// processes still running a given binary.
package testproc

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Buffer collects a process's output for a test to read while it runs.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail returns the last n bytes of s, for failure messages.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// raceMarker opens each report of the race detector.
const raceMarker = "WARNING: DATA RACE"

// RaceReport returns the first data race report in s (the output of a
// process built with -race), at most 8000 bytes of it, or "" when s holds
// none.
func RaceReport(s string) string {
	i := strings.Index(s, raceMarker)
	if i < 0 {
		return ""
	}
	return s[i:min(len(s), i+8000)]
}

// Running returns the pids of live (not zombie) processes whose argv[0] is
// binary and whose arguments include every one of args. Test binaries live
// in the test's own temporary directory, so only its processes match.
func Running(binary string, args ...string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if argv[0] != binary || !containsAll(argv[1:], args) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// WaitGone waits until Running(binary, args...) is empty, at most d, and
// returns the pids still running then.
func WaitGone(d time.Duration, binary string, args ...string) []int {
	deadline := time.Now().Add(d)
	for {
		pids := Running(binary, args...)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ModuleRoot returns the repository root at rel from the calling test's
// package directory, after checking that it holds go.mod.
func ModuleRoot(rel string) (string, error) {
	root, err := filepath.Abs(rel)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("module root not found: %w", err)
	}
	return root, nil
}

// Build runs `go build -o out pkg` in root (with -race when race is set),
// within timeout, and says what the compiler said when it fails.
func Build(root, out, pkg string, race bool, timeout time.Duration) error {
	args := []string{"build", "-o", out, pkg}
	if race {
		args = []string{"build", "-race", "-o", out, pkg}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, output)
	}
	return nil
}

// FreePort is a TCP port of 127.0.0.1 that was free a moment ago: a
// process the test starts next is told to listen on it.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// Fataler is the part of testing.TB that MustFreePort uses.
type Fataler interface {
	Helper()
	Fatal(args ...any)
}

// MustFreePort is FreePort, ending the test when no port can be had.
func MustFreePort(t Fataler) int {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
