package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseInterleaved: flags count wherever they stand among the
// positional arguments, and everything after "--" is positional.
func TestParseInterleaved(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantRest []string
		wantCfg  string
		wantJSON bool
	}{
		{"flags first", []string{"--config", "c", "a", "b"}, []string{"a", "b"}, "c", false},
		{"flags last", []string{"a", "b", "--config", "c"}, []string{"a", "b"}, "c", false},
		{"flags between", []string{"a", "--json", "b", "--config=c"}, []string{"a", "b"}, "c", true},
		{"after --", []string{"a", "--", "--json", "-x"}, []string{"a", "--json", "-x"}, "", false},
		{"-- as a flag's value", []string{"--config", "--", "a", "--json"}, []string{"a"}, "--", true},
		{"-x as a flag's value", []string{"-config", "-x", "a"}, []string{"a"}, "-x", false},
		{"- is an argument", []string{"-", "--json"}, []string{"-"}, "", true},
		{"none", nil, nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg := fs.String("config", "", "")
			js := fs.Bool("json", false, "")
			rest, err := parseInterleaved(fs, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rest, tt.wantRest) || *cfg != tt.wantCfg || *js != tt.wantJSON {
				t.Errorf("rest %q config %q json %v, want %q %q %v", rest, *cfg, *js, tt.wantRest, tt.wantCfg, tt.wantJSON)
			}
		})
	}
}

// TestFlagsAfterArguments: each verb takes its flags after its positional
// arguments as well as before them (a config given last is the one used),
// and validate FILE validates FILE.
func TestFlagsAfterArguments(t *testing.T) {
	fx := fixtureConfig(t) // builds the fixture, from the package's directory
	t.Setenv("MCP_PROXY_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Chdir(t.TempDir()) // no ./mcp-proxy.yaml to fall back on
	good := writeFile(t, "good.yaml", "servers:\n  files:\n    command: npx\n")
	hostJSON := writeFile(t, "claude.json", `{"mcpServers": {"files": {"command": "npx"}}}`)

	t.Run("validate FILE", func(t *testing.T) {
		stdout, _, err := runCLI(t, "validate", good)
		if err != nil || !strings.HasSuffix(stdout, good+": config OK: 1 servers (1 enabled)\n") {
			t.Errorf("validate FILE: %v\n%s", err, stdout)
		}
	})
	t.Run("validate FILE --config FILE", func(t *testing.T) {
		stdout, _, err := runCLI(t, "validate", good, "--config", good)
		if err != nil || !strings.HasSuffix(stdout, good+": config OK: 1 servers (1 enabled)\n") {
			t.Errorf("validate FILE --config FILE: %v\n%s", err, stdout)
		}
	})
	t.Run("call", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "call", "fx__echo", `{"text":"hi"}`, "--config", fx)
		if err != nil || !strings.Contains(stdout, `"text": "hi"`) {
			t.Errorf("call NAME JSON --config: %v\n%s%s", err, stdout, stderr)
		}
	})
	t.Run("tools", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "tools", "--config", fx, "--json")
		var r toolsReport
		if err != nil || json.Unmarshal([]byte(stdout), &r) != nil {
			t.Errorf("tools --config --json: %v\n%s%s", err, stdout, stderr)
		}
	})
	t.Run("tools diff", func(t *testing.T) {
		_, stderr, err := runCLI(t, "tools", "diff", "fx", "--config", fx)
		if err != nil {
			t.Errorf("tools diff SERVER --config: %v\n%s", err, stderr)
		}
	})
	t.Run("import", func(t *testing.T) {
		stdout, _, err := runCLI(t, "import", hostJSON, "--log-level", "debug")
		if err != nil || !strings.Contains(stdout, "files:") {
			t.Errorf("import FILE --log-level: %v\n%s", err, stdout)
		}
	})
	t.Run("auth status", func(t *testing.T) {
		_, _, err := runCLI(t, "auth", "status", "--config", good)
		if err != nil {
			t.Errorf("auth status --config: %v", err)
		}
	})
	t.Run("serve", func(t *testing.T) {
		_, _, err := runCLI(t, "serve", "extra", "--config", good)
		if code := exitCode(t, err); code != exitUsage || !strings.Contains(err.Error(), "unexpected arguments: extra") {
			t.Errorf("serve extra --config: exit code %d, %v; want %d and the argument named", code, err, exitUsage)
		}
	})
}

// TestFlagsBeforeVerb: flags may come before the verb too; the first
// argument that is not a flag (nor a flag's value) is the verb, and with
// none the verb is serve.
func TestFlagsBeforeVerb(t *testing.T) {
	t.Setenv("MCP_PROXY_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	t.Chdir(dir) // no ./mcp-proxy.yaml to fall back on
	cfg := writeFile(t, "mcp-proxy.yaml", fmt.Sprintf(`
state_dir: %q
blobs:
  mode: passthrough
servers:
  off:
    url: https://example.com/mcp
    enabled: false
`, filepath.Join(t.TempDir(), "state")))
	okLine := cfg + ": config OK: 1 servers (0 enabled)\n"
	serving := `"message":"serving MCP on stdio"`

	tests := []struct {
		name       string
		args       []string
		wantStdout string // the end of stdout (after the config's warnings)
		wantStderr string // a part of stderr; "none": stderr is empty
	}{
		{"--config X validate", []string{"--config", cfg, "validate"}, okLine, ""},
		{"--config=X tools", []string{"--config=" + cfg, "tools"}, "off  disabled  0 tools\n", ""},
		{"--json before tools", []string{"--json", "tools", "--config", cfg}, "", ""},
		{"--config X tools diff", []string{"--config", cfg, "tools", "diff"}, "no tool definitions are pending approval\n", ""},
		{"--log-level debug serve", []string{"--log-level", "debug", "serve", "--transport", "stdio", "--config", cfg}, "", serving},
		{"--log-level error serve", []string{"--log-level", "error", "serve", "--transport", "stdio", "--config", cfg}, "", "none"},
		{"flags alone: serve", []string{"--log-level", "debug", "--transport", "stdio", "--config", cfg}, "", serving},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runCLI(t, tt.args...)
			if err != nil {
				t.Fatalf("%q: %v\n%s", tt.args, err, stderr)
			}
			if tt.name == "--json before tools" {
				var r toolsReport
				if err := json.Unmarshal([]byte(stdout), &r); err != nil {
					t.Errorf("--json tools: not JSON (%v):\n%s", err, stdout)
				}
			} else if !strings.HasSuffix(stdout, tt.wantStdout) || tt.wantStdout == "" && stdout != "" {
				t.Errorf("%q: stdout\n%q\nwant it to end in\n%q", tt.args, stdout, tt.wantStdout)
			}
			if tt.wantStderr == "none" {
				if stderr != "" {
					t.Errorf("%q: stderr not empty:\n%s", tt.args, stderr)
				}
			} else if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("%q: stderr lacks %q:\n%s", tt.args, tt.wantStderr, stderr)
			}
		})
	}

	t.Run("unknown verb after flags", func(t *testing.T) {
		_, _, err := runCLI(t, "--config", cfg, "frobnicate")
		if code := exitCode(t, err); code != exitUsage || !strings.Contains(err.Error(), `unknown verb "frobnicate"`) {
			t.Errorf("exit %d, %v; want %d, unknown verb", code, err, exitUsage)
		}
	})
	t.Run("a verb after -- is an argument", func(t *testing.T) {
		_, _, err := runCLI(t, "--config", cfg, "--", "validate")
		if code := exitCode(t, err); code != exitUsage || err.Error() != "unexpected arguments: validate" {
			t.Errorf("exit %d, %v; want %d, unexpected arguments", code, err, exitUsage)
		}
	})
	t.Run("-- as the value of --config", func(t *testing.T) {
		// A config file named "--" in the working directory.
		state := filepath.Join(t.TempDir(), "state")
		if err := os.WriteFile(filepath.Join(dir, "--"), fmt.Appendf(nil, "state_dir: %q\nservers: {}\n", state), 0o600); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := runCLI(t, "tools", "--config", "--", "diff", "--log-level", "debug")
		if err != nil || stdout != "no tool definitions are pending approval\n" {
			t.Errorf("tools --config -- diff --log-level debug: %v, %q\n%s", err, stdout, stderr)
		}
		stdout, _, err = runCLI(t, "validate", "--config", "--", "--", "--log-level")
		if code := exitCode(t, err); code != exitUsage || err.Error() != "validate was given two configs, --log-level and --config --: give one" {
			t.Errorf("validate --config -- -- --log-level: exit %d, %v, %q; want two configs", code, err, stdout)
		}
	})
}
