package dirperm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestCheck(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // not subject to the umask
			t.Fatal(err)
		}
		return p
	}
	private := mk("private", 0o700)
	readable := mk("readable", 0o755)
	world := mk("world", 0o777)
	group := mk("group", 0o770)
	quoted := mk("it's here", 0o703)
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  Dir
		want string // "" accepted
	}{
		{"0700", Dir{"state_dir", private, false}, ""},
		{"0755: others read only", Dir{"state_dir", readable, false}, ""},
		{"missing", Dir{"state_dir", filepath.Join(base, "none"), false}, ""},
		{"unset", Dir{"blobs.dir", "", false}, ""},
		{"0777", Dir{"state_dir pins folder", world, false},
			"state_dir pins folder " + world + " is writable by other users (mode 0777): another local user could replace or delete its files; run: chmod go-w " + world},
		{"0770", Dir{"blobs.dir", group, false},
			"blobs.dir " + group + " is writable by other users (mode 0770): another local user could replace or delete its files; run: chmod go-w " + group},
		{"path quoted for the shell", Dir{"state_dir", quoted, false},
			"state_dir " + quoted + " is writable by other users (mode 0703): another local user could replace or delete its files; run: chmod go-w '" + base + "/it'\\''s here'"},
		{"a file", Dir{"state_dir", file, false}, "state_dir " + file + " is not a directory"},
		{"private 0700", Dir{"the auth folder", private, true}, ""},
		{"private 0755", Dir{"the auth folder", readable, true},
			"the auth folder " + readable + " is accessible to other users (mode 0755): other local users could read or replace the secrets in it; run: chmod 700 " + readable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.dir)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Check:\n got %q\nwant %q", got, tt.want)
			}
			if tt.want != "" && tt.name != "a file" && !errors.Is(err, ErrWritable) && !errors.Is(err, ErrAccessible) {
				t.Errorf("%v is not ErrWritable", err)
			}
		})
	}
	if err := Check(Dir{"a", world, false}, Dir{"b", private, false}, Dir{"c", group, false}); err == nil || len(err.(interface{ Unwrap() []error }).Unwrap()) != 2 {
		t.Errorf("two bad directories: %v", err)
	}
}

// TestCheckOwner: a directory that belongs to another user than the
// proxy's is refused whatever its mode, as its owner may delete pins in
// it; one of the proxy's user or of root is accepted. The owner comes from
// an injected lookup, so that every case runs without privileges.
func TestCheckOwner(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	quoted := filepath.Join(base, "a b")
	if err := os.Mkdir(quoted, 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		euid  int
		owner int
		known bool
		path  string
		want  string // "" accepted
	}{
		{"the proxy's user", 1000, 1000, true, dir, ""},
		{"root", 1000, 0, true, dir, ""},
		{"root for root", 0, 0, true, dir, ""},
		{"owner unknown to the system", 1000, 65534, false, dir, ""},
		{"another user", 1000, 65534, true, dir,
			"state_dir " + dir + " is owned by another user (uid 65534, not uid 1000 or root): that user could replace or delete its files; choose a directory of your own, or have root run: chown 1000 " + dir},
		{"another user, for root", 0, 1000, true, dir,
			"state_dir " + dir + " is owned by another user (uid 1000, not root): that user could replace or delete its files; choose a directory of your own, or have root run: chown 0 " + dir},
		{"path quoted for the shell", 1000, 65534, true, quoted,
			"state_dir " + quoted + " is owned by another user (uid 65534, not uid 1000 or root): that user could replace or delete its files; choose a directory of your own, or have root run: chown 1000 '" + quoted + "'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checker{euid: tt.euid, owner: func(fs.FileInfo) (int, bool) { return tt.owner, tt.known }}
			err := c.check([]Dir{{"state_dir", tt.path, false}})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("check:\n got %q\nwant %q", got, tt.want)
			}
			if tt.want != "" && !errors.Is(err, ErrNotOwned) {
				t.Errorf("%v is not ErrNotOwned", err)
			}
		})
	}
}

// TestCheckRealOwner runs the owner check on the system's own answer: as
// root (the test sessions' user) it gives a temporary directory to uid
// 65534 and expects a refusal; otherwise it expects the lookup to find the
// test's own user and accept the directory.
func TestCheckRealOwner(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if uid, ok := fileOwner(fi); !ok || uid != os.Geteuid() {
			t.Errorf("fileOwner of a directory of ours = %d, %v; want %d, true", uid, ok, os.Geteuid())
		}
		if err := Check(Dir{"state_dir", dir, false}); err != nil {
			t.Errorf("a directory of ours: %v", err)
		}
		return
	}
	if err := Check(Dir{"state_dir", dir, false}); err != nil {
		t.Errorf("a directory of root: %v", err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	want := "state_dir " + dir + " is owned by another user (uid 65534, not root): that user could replace or delete its files; choose a directory of your own, or have root run: chown 0 " + dir
	if err := Check(Dir{"state_dir", dir, false}); err == nil || err.Error() != want || !errors.Is(err, ErrNotOwned) {
		t.Errorf("a directory of uid 65534:\n got %v\nwant %s", err, want)
	}
}
