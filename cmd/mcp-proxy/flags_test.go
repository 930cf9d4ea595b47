package main

import (
	"encoding/json"
	"flag"
	"io"
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
