//go:build linux

package upstream

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// threads is the number of OS threads of this process.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// TestAwaitExit waits for 20 children at once: while they run, the waits
// hold no OS thread each (cmd.Wait alone would hold 20); each returns once
// its child has exited and leaves it for Wait to reap, with its status.
// Not parallel: the thread count is the process's.
func TestAwaitExit(t *testing.T) {
	const n = 20
	before := threads(t)
	release := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		// Each child exits with its index once its stdin closes.
		cmd := exec.Command("sh", "-c", "read _; exit "+strconv.Itoa(i%3))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			done := awaiting(cmd.Process.Pid)
			select {
			case <-done:
				errs[i] = fmt.Errorf("awaitExit returned while child %d ran", i)
			case <-release:
			}
			_ = stdin.Close()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				errs[i] = fmt.Errorf("awaitExit did not return 10 s after child %d was told to exit", i)
				return
			}
			err := cmd.Wait() // the child is still there to reap
			if got := cmd.ProcessState.ExitCode(); got != i%3 {
				errs[i] = fmt.Errorf("child %d: Wait = %v, exit code %d; want %d", i, err, got, i%3)
			}
		})
	}
	// Every child started: count the threads once every wait has settled
	// where it waits.
	waitBlockedIn(t, "upstream.awaiting.func1(", n)
	during := threads(t)
	close(release)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if during-before >= n*7/10 { // a wait in waitid(2) per child adds about n
		t.Errorf("%d threads while %d children were awaited, %d before: the waits hold threads", during, n, before)
	}
	// A child reaped already: there is no pidfd to be had.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-awaiting(cmd.Process.Pid):
	case <-time.After(5 * time.Second):
		t.Error("awaitExit on a reaped child did not return in 5 s")
	}
}

// waitBlockedIn waits until n goroutines with fn on their stack are
// blocked in awaitExit (in the poller, a channel, a system call...:
// anything but running or runnable), failing the test if they are not
// within 10 s.
func waitBlockedIn(t *testing.T, fn string, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		blocked, states := 0, map[string]int{}
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if !strings.Contains(g, fn) || !strings.Contains(g, "upstream.awaitExit(") {
				continue
			}
			// "goroutine 7 [IO wait]:" or "goroutine 7 [syscall, 2 minutes]:"
			_, state, _ := strings.Cut(g, "[")
			state, _, _ = strings.Cut(state, "]")
			state, _, _ = strings.Cut(state, ",")
			states[state]++
			if state != "running" && state != "runnable" {
				blocked++
			}
		}
		if blocked == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in %s blocked after 10 s, want %d; their states: %v", blocked, fn, n, states)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaiting runs awaitExit(pid) and closes the channel it returns when
// that returns.
func awaiting(pid int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		awaitExit(pid)
		close(done)
	}()
	return done
}
