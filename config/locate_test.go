package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLocate(t *testing.T) {
	tests := []struct {
		name   string
		flag   string
		env    []string
		exists []string
		want   string
		err    string
	}{
		{
			name: "flag wins", flag: "/etc/p.yaml", env: []string{"MCP_PROXY_CONFIG", "/env.yaml"},
			exists: []string{"/etc/p.yaml", "/env.yaml", "mcp-proxy.yaml"}, want: "/etc/p.yaml",
		},
		{
			name: "flag must exist", flag: "/etc/p.yaml", exists: []string{"mcp-proxy.yaml"},
			err: "no config file found: --config /etc/p.yaml does not exist",
		},
		{
			name: "variable", env: []string{"MCP_PROXY_CONFIG", "/env.yaml"},
			exists: []string{"/env.yaml", "mcp-proxy.yaml"}, want: "/env.yaml",
		},
		{
			name: "variable must exist", env: []string{"MCP_PROXY_CONFIG", "/env.yaml"}, exists: []string{"mcp-proxy.yaml"},
			err: "no config file found: $MCP_PROXY_CONFIG=/env.yaml does not exist",
		},
		{
			name: "empty variable is unset", env: []string{"MCP_PROXY_CONFIG", ""},
			exists: []string{"mcp-proxy.yaml"}, want: "mcp-proxy.yaml",
		},
		{
			name: "working directory", env: []string{"XDG_CONFIG_HOME", "/xdg"},
			exists: []string{"mcp-proxy.yaml", "/xdg/mcp-proxy/config.yaml"}, want: "mcp-proxy.yaml",
		},
		{
			name: "xdg", env: []string{"XDG_CONFIG_HOME", "/xdg"},
			exists: []string{"/xdg/mcp-proxy/config.yaml", "/home/test/.config/mcp-proxy/config.yaml"},
			want:   "/xdg/mcp-proxy/config.yaml",
		},
		{
			name: "home", env: []string{"XDG_CONFIG_HOME", "relative"},
			exists: []string{"/home/test/.config/mcp-proxy/config.yaml"}, want: "/home/test/.config/mcp-proxy/config.yaml",
		},
		{
			name: "nothing", env: []string{"XDG_CONFIG_HOME", "/xdg"},
			err: "no config file found; tried mcp-proxy.yaml, /xdg/mcp-proxy/config.yaml (or pass --config, or set $MCP_PROXY_CONFIG)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exists := map[string]bool{}
			for _, p := range tt.exists {
				exists[p] = true
			}
			got, err := Locate(tt.flag, testEnv(tt.env...), func(p string) bool { return exists[p] })
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || !errors.Is(err, ErrNoConfig) {
					t.Fatalf("Locate error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Locate = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestLocateRealFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Locate(file, testEnv(), nil); err != nil || got != file {
		t.Errorf("Locate(file) = %q, %v", got, err)
	}
	if _, err := Locate(dir, testEnv(), nil); !errors.Is(err, ErrNoConfig) {
		t.Errorf("Locate(directory) = %v, want ErrNoConfig", err)
	}
}
