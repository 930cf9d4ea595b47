package config

import "testing"

func TestIntegrityDefaults(t *testing.T) {
	doc := `
servers:
  files:
    command: npx
  web:
    url: https://example.com/mcp
    pinning: quarantine
    new_tools: quarantine
    scan: strip
`
	cfg, err := Parse([]byte(doc), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"state_dir", cfg.StateDir, "/home/test/.local/state/mcp-proxy"},
		{"pinning", cfg.Pinning, "warn"},
		{"new_tools", cfg.NewTools, "allow"},
		{"scan", cfg.Scan, "warn"},
		{"files.pinning", cfg.Servers["files"].Pinning, "warn"},
		{"files.new_tools", cfg.Servers["files"].NewTools, "allow"},
		{"files.scan", cfg.Servers["files"].Scan, "warn"},
		{"web.pinning", cfg.Servers["web"].Pinning, "quarantine"},
		{"web.new_tools", cfg.Servers["web"].NewTools, "quarantine"},
		{"web.scan", cfg.Servers["web"].Scan, "strip"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestIntegrityTopLevelIsServerDefault(t *testing.T) {
	doc := "pinning: quarantine\nnew_tools: quarantine\nscan: quarantine\nstate_dir: /srv/state\nservers:\n  a:\n    command: x\n  b:\n    command: y\n    pinning: off\n"
	cfg, err := Parse([]byte(doc), testEnv("XDG_STATE_HOME", "/xdg"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Servers["a"], cfg.Servers["b"]
	if cfg.StateDir != "/srv/state" || a.Pinning != "quarantine" || a.NewTools != "quarantine" || a.Scan != "quarantine" ||
		b.Pinning != "off" || b.Scan != "quarantine" {
		t.Errorf("state_dir %q, a %q/%q/%q, b %q/%q", cfg.StateDir, a.Pinning, a.NewTools, a.Scan, b.Pinning, b.Scan)
	}
}

func TestDefaultStateDir(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"xdg", []string{"XDG_STATE_HOME", "/state"}, "/state/mcp-proxy"},
		{"relative xdg ignored", []string{"XDG_STATE_HOME", "state"}, "/home/test/.local/state/mcp-proxy"},
		{"home", nil, "/home/test/.local/state/mcp-proxy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(nil, testEnv(tt.env...))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.StateDir != tt.want {
				t.Errorf("state_dir = %q, want %q", cfg.StateDir, tt.want)
			}
		})
	}
}

// TestStateDirNeededOnlyForPins: without a home there is no default state
// directory, which is an error only when some enabled server pins.
func TestStateDirNeededOnlyForPins(t *testing.T) {
	t.Setenv("HOME", "") // os.UserHomeDir, the last resort, finds nothing either
	noHome := func(string) (string, bool) { return "", false }
	for _, tt := range []struct {
		name, doc, want string
	}{
		{"pinning", "blobs: {mode: passthrough}\nservers:\n  a:\n    command: x\n",
			"state_dir: no default directory could be found for the tool pins: set state_dir, $XDG_STATE_HOME or $HOME (or pinning: off)"},
		{"all off", "blobs: {mode: passthrough}\npinning: off\nservers:\n  a:\n    command: x\n", ""},
		{"disabled server", "blobs: {mode: passthrough}\npinning: off\nservers:\n  a:\n    command: x\n    pinning: warn\n    enabled: false\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), noHome)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
