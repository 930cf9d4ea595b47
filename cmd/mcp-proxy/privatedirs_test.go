package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestPrivateDirsRefused: a pins folder, auth folder, state_dir or
// blobs.dir that group or others may write makes every verb that uses
// them refuse to start, with the chmod to run; 0700 (and a folder not yet
// created) is accepted. validate does not look at them.
func TestPrivateDirsRefused(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	blobs := filepath.Join(t.TempDir(), "blobs")
	config := writeFile(t, "mcp-proxy.yaml", fmt.Sprintf(`
state_dir: %q
blobs:
  dir: %q
servers:
  off:
    url: https://example.com/mcp
    enabled: false
`, state, blobs))
	mkdir := func(p string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}

	// Nothing created yet: accepted.
	if stdout, _, err := runCLI(t, "tools", "diff", "--config", config); err != nil || stdout != "no tool definitions are pending approval\n" {
		t.Fatalf("no state_dir yet: %v, %q", err, stdout)
	}

	pins := filepath.Join(state, "pins")
	mkdir(state, 0o700)
	mkdir(pins, 0o777)
	wantPins := "the pins folder " + pins + " is writable by other users (mode 0777): another local user could replace or delete its files; run: chmod go-w " + pins
	for _, args := range [][]string{
		{"tools", "diff", "--config", config}, {"tools", "approve", "--all", "--config", config}, {"tools", "--config", config},
		{"call", "--config", config, "x"}, {"auth", "status", "--config", config}, {"serve", "--transport", "stdio", "--config", config},
	} {
		_, _, err := runCLI(t, args...)
		if code := exitCode(t, err); code != exitRuntime || err.Error() != wantPins {
			t.Errorf("%v with pins 0777: exit %d, %v\nwant exit 1, %s", args, code, err, wantPins)
		}
	}
	if _, _, err := runCLI(t, "validate", "--config", config); err != nil {
		t.Errorf("validate: %v", err)
	}

	mkdir(pins, 0o700)
	if stdout, _, err := runCLI(t, "tools", "diff", "--config", config); err != nil || stdout != "no tool definitions are pending approval\n" {
		t.Fatalf("pins 0700: %v, %q", err, stdout)
	}

	for _, tc := range []struct{ path, what string }{
		{state, "state_dir"},
		{blobs, "blobs.dir"},
	} {
		mkdir(tc.path, 0o770)
		_, _, err := runCLI(t, "tools", "diff", "--config", config)
		want := tc.what + " " + tc.path + " is writable by other users (mode 0770): another local user could replace or delete its files; run: chmod go-w " + tc.path
		if exitCode(t, err) != exitRuntime || err.Error() != want {
			t.Errorf("%s 0770: %v\nwant %s", tc.what, err, want)
		}
		mkdir(tc.path, 0o700)
	}

	// The auth folder holds secrets: read access is refused too, as the
	// token store does, with the chmod that satisfies both.
	auth := filepath.Join(state, "auth")
	mkdir(auth, 0o750)
	_, _, err := runCLI(t, "auth", "status", "--config", config)
	want := "the auth folder " + auth + " is accessible to other users (mode 0750): other local users could read or replace the secrets in it; run: chmod 700 " + auth
	if exitCode(t, err) != exitRuntime || err.Error() != want {
		t.Errorf("auth 0750: %v\nwant %s", err, want)
	}
}
