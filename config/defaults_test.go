package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultStateDirComesFromLookupOnly: the default state and blob
// directories come from the environment the caller passes, never from the
// process's own: a test that passes none must not get the user's home
// (where its pins and blobs would land).
func TestDefaultStateDirComesFromLookupOnly(t *testing.T) {
	home := t.TempDir()
	cases := []struct {
		name      string
		env       map[string]string
		wantState string
	}{
		{"xdg", map[string]string{"XDG_STATE_HOME": "/xdg", "HOME": home}, "/xdg/mcp-proxy"},
		{"home", map[string]string{"HOME": home}, filepath.Join(home, ".local", "state", "mcp-proxy")},
		{"relative xdg", map[string]string{"XDG_STATE_HOME": "rel", "HOME": home}, filepath.Join(home, ".local", "state", "mcp-proxy")},
		{"none", map[string]string{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			cfg, err := Parse([]byte("pinning: warn\n"), lookup)
			if c.wantState == "" {
				if err == nil || !strings.Contains(err.Error(), "no default directory could be found for the tool pins") {
					t.Errorf("Parse() = %v, want the missing state directory named", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.StateDir != c.wantState {
				t.Errorf("state_dir = %q, want %q", cfg.StateDir, c.wantState)
			}
			if want := filepath.Join(c.wantState, "blobs"); cfg.Blobs.Dir != want {
				t.Errorf("blobs.dir = %q, want %q", cfg.Blobs.Dir, want)
			}
		})
	}
}
