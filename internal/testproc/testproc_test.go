package testproc

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTail(t *testing.T) {
	if Tail("abc", 5) != "abc" || Tail("abcdef", 2) != "…ef" {
		t.Fatal(Tail("abcdef", 2))
	}
}

func TestRaceReport(t *testing.T) {
	if got := RaceReport("started\nstopped\n"); got != "" {
		t.Errorf("no race: %q", got)
	}
	out := "started\n==================\nWARNING: DATA RACE\nWrite at 0x1 by goroutine 7:\n" + strings.Repeat("x", 9000)
	got := RaceReport(out)
	if !strings.HasPrefix(got, "WARNING: DATA RACE\nWrite at 0x1") || len(got) != 8000 {
		t.Errorf("RaceReport = %.40q… (%d bytes); want the report from its first line, 8000 bytes", got, len(got))
	}
}

// TestRunning finds a child by binary and argument, and not once it exited.
func TestRunning(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sleep, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Start returns once the child has begun its exec, which sets the
	// child's argument list a moment later (until then its cmdline reads
	// empty): look for a while.
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if pids = Running(sleep, "30"); slices.Contains(pids, cmd.Process.Pid) || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Contains(pids, cmd.Process.Pid) {
		t.Fatalf("Running(%s, 30) = %v, want %d in it", sleep, pids, cmd.Process.Pid)
	}
	if slices.Contains(Running(sleep, "31"), cmd.Process.Pid) {
		t.Fatal("matched a process without the argument")
	}
	_ = cmd.Process.Signal(os.Kill)
	_ = cmd.Wait()
	if pids := WaitGone(2*time.Second, sleep, "30"); slices.Contains(pids, cmd.Process.Pid) {
		t.Fatalf("still running after kill: %v", pids)
	}
}

func TestModuleRootAndBuild(t *testing.T) {
	root, err := ModuleRoot(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ModuleRoot("."); err == nil {
		t.Error("a directory without go.mod was taken as the module root")
	}
	out := filepath.Join(t.TempDir(), "fixture")
	if err := Build(root, out, "./integration/fixture", false, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Errorf("built binary: %v", err)
	}
	err = Build(root, out, "./no/such/package", false, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "go build -o") {
		t.Errorf("building a missing package: %v; want the go build error", err)
	}
}

// TestFreePort: the port FreePort gives can be listened on at once.
func TestFreePort(t *testing.T) {
	port := MustFreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	_ = l.Close()
}
