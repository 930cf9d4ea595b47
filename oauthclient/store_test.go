package oauthclient

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// helperEnv makes the test binary a store writer (TestStoreTwoProcesses).
const helperEnv = "OAUTHCLIENT_STORE_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		n, _ := strconv.Atoi(os.Getenv(helperEnv + "_N"))
		st, err := OpenStore(dir)
		if err == nil {
			err = increment(st, n)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// increment adds 1 to the counter kept in the entry's access token, n
// times, each a read-modify-write of the file.
func increment(st *Store, n int) error {
	for range n {
		err := st.Update("web", func(entries []Entry) ([]Entry, error) {
			e := find(entries, "https://mcp.example.com/mcp", "https://as.example.com")
			count := 0
			if e != nil {
				count, _ = strconv.Atoi(e.AccessToken)
			}
			return replace(entries, Entry{
				ServerURL: "https://mcp.example.com/mcp", Issuer: "https://as.example.com",
				AccessToken: strconv.Itoa(count + 1), Updated: time.Now(),
			}), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func counter(t *testing.T, st *Store) int {
	t.Helper()
	entries, err := st.Load("web")
	if err != nil || len(entries) != 1 {
		t.Fatalf("entries %+v, %v", entries, err)
	}
	n, _ := strconv.Atoi(entries[0].AccessToken)
	return n
}

// TestStoreConcurrentHandles: writers with separate Store handles (as two
// proxies have) lose no update and leave a valid file.
func TestStoreConcurrentHandles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := OpenStore(dir)
			if err == nil {
				err = increment(st, each)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st, _ := OpenStore(dir)
	if got := counter(t, st); got != writers*each {
		t.Errorf("counter = %d, want %d: updates were lost", got, writers*each)
	}
}

// TestStoreTwoProcesses: two processes and this one write the same file at
// once; the lock file keeps every update.
func TestStoreTwoProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	const each = 40
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir, helperEnv+"_N="+strconv.Itoa(each))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("helper output: %s", out.String())
			}
		})
	}
	st, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := increment(st, each); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	if got := counter(t, st); got != 3*each {
		t.Errorf("counter = %d, want %d", got, 3*each)
	}
	fi, err := os.Stat(filepath.Join(dir, "web.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v", fi.Mode(), err)
	}
}

func TestStoreRefusesBadState(t *testing.T) {
	t.Run("corrupt file", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "auth")
		st, _ := OpenStore(dir)
		if err := increment(st, 1); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "web.json"), []byte("{half"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := st.Load("web")
		if err == nil || !strings.Contains(err.Error(), "is corrupt") || !strings.Contains(err.Error(), "auth logout") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("folder open to others", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "auth")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		st, _ := OpenStore(dir)
		err := increment(st, 1)
		if err == nil || !strings.Contains(err.Error(), "chmod 700") {
			t.Errorf("err = %v, want a refusal naming chmod 700", err)
		}
	})
	t.Run("names that are not server names", func(t *testing.T) {
		st, _ := OpenStore(t.TempDir())
		for _, name := range []string{"../x", "a/b", "", ".hidden", strings.Repeat("a", 33)} {
			if err := st.Remove(name); err == nil {
				t.Errorf("Remove(%q) succeeded", name)
			}
		}
	})
	t.Run("relative folder", func(t *testing.T) {
		if _, err := OpenStore("state/auth"); err == nil {
			t.Error("OpenStore accepted a relative path")
		}
	})
	t.Run("remove", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "auth")
		st, _ := OpenStore(dir)
		if err := increment(st, 1); err != nil {
			t.Fatal(err)
		}
		if err := st.Remove("web"); err != nil {
			t.Fatal(err)
		}
		if entries, err := st.Load("web"); err != nil || entries != nil {
			t.Errorf("after Remove: %v, %v", entries, err)
		}
	})
}
