package status

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestLoadTokenCreates: the first call makes <state_dir>/status/token, a
// file 0600 in a folder 0700 holding 32 random bytes in base64url; later
// calls and other processes (here: goroutines racing to create it) read
// the same token.
func TestLoadTokenCreates(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	var wg sync.WaitGroup
	got := make([]string, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = LoadToken(state) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("LoadToken %d: %q, %v; first %q", i, got[i], errs[i], got[0])
		}
	}
	if !validToken(got[0]) || len(got[0]) != 43 {
		t.Errorf("token %q is not 32 bytes of base64url", got[0])
	}
	fi, err := os.Stat(TokenPath(state))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v", err, fi.Mode())
	}
	di, err := os.Stat(filepath.Join(state, "status"))
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("token folder: %v, mode %v", err, di.Mode())
	}
	data, _ := os.ReadFile(TokenPath(state))
	if string(data) != got[0]+"\n" {
		t.Errorf("file holds %q", data)
	}
	entries, _ := os.ReadDir(filepath.Join(state, "status"))
	if len(entries) != 1 {
		t.Errorf("the folder holds %d files (temporary ones left behind?)", len(entries))
	}
	again, err := LoadToken(state)
	if err != nil || again != got[0] {
		t.Errorf("second LoadToken: %q, %v", again, err)
	}
	other, err := LoadToken(filepath.Join(t.TempDir(), "other"))
	if err != nil || other == got[0] {
		t.Errorf("another state_dir's token: %q, %v", other, err)
	}
}

// TestLoadTokenRefuses: a token file or folder others may use, a symbolic
// link, a file that holds no token and no state_dir are refused with what
// to do, and the error never holds the token.
func TestLoadTokenRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, state string)
		want  string
	}{
		{"file readable by others", func(t *testing.T, state string) { chmod(t, TokenPath(state), 0o644) }, "is accessible to other users (mode 0644): delete it"},
		{"folder open to others", func(t *testing.T, state string) { chmod(t, filepath.Join(state, "status"), 0o755) }, "run `chmod 700 "},
		{"symbolic link", func(t *testing.T, state string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.Rename(TokenPath(state), target); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, TokenPath(state)); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link; delete it"},
		{"not a token", func(t *testing.T, state string) {
			if err := os.WriteFile(TokenPath(state), []byte("hunter2\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "does not hold a token; delete it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			tok, err := LoadToken(state)
			if err != nil {
				t.Fatal(err)
			}
			tt.setup(t, state)
			got, err := LoadToken(state)
			if err == nil || got != "" || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), tok) {
				t.Errorf("LoadToken = %q, %v; want an error with %q", got, err, tt.want)
			}
		})
	}
	if _, err := LoadToken(""); !errors.Is(err, ErrNoStateDir) {
		t.Errorf("no state_dir: %v", err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
