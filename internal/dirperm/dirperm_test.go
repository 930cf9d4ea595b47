package dirperm

import (
	"errors"
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
