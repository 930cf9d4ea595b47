package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// loopback is the only address anything here listens on or dials.
const loopback = "127.0.0.1"

// env is what every scenario shares: the options, the processes, the temp
// directory for configs and the progress writer.
type env struct {
	o        options
	fleet    *fleet
	dir      string
	progress io.Writer
	configs  int
}

// largeN is the request count of the heavy scenarios (1 MiB calls, 2000-tool
// lists): a tenth of -n, at least one per round.
func (e *env) largeN() int { return max(e.o.n/10, e.o.rounds) }

func (e *env) progressf(format string, args ...any) {
	fmt.Fprintf(e.progress, format+"\n", args...)
}

// fixtureSpec runs the fixture over stdio.
func (e *env) fixtureSpec(name string, args []string) procSpec {
	return procSpec{name: name, path: e.o.fixture, args: args, stdio: true}
}

// proxySpec runs the proxy over stdio on config file cfg.
func (e *env) proxySpec(cfg string) procSpec {
	return procSpec{name: "mcp-proxy", path: e.o.proxy, args: []string{"serve", "--config", cfg}, stdio: true}
}

// proxyConfig is the part of mcp-proxy's config the load test writes. The
// fields after Servers are those of the feature scenarios (features.go);
// left empty, they are left out and the proxy's defaults hold.
type proxyConfig struct {
	Log      map[string]string       `yaml:"log"`
	Blobs    map[string]string       `yaml:"blobs"`
	StateDir string                  `yaml:"state_dir"`
	Store    map[string]string       `yaml:"store,omitempty"`
	Servers  map[string]serverConfig `yaml:"servers"`

	Pinning      string                  `yaml:"pinning,omitempty"`
	Scan         string                  `yaml:"scan,omitempty"`
	Listen       *listenConfig           `yaml:"listen,omitempty"`
	Metrics      map[string]string       `yaml:"metrics,omitempty"`
	Tracing      map[string]string       `yaml:"tracing,omitempty"`
	Audit        map[string]string       `yaml:"audit,omitempty"`
	Bundles      map[string]bundleConfig `yaml:"bundles,omitempty"`
	Agents       map[string]*agentConfig `yaml:"agents,omitempty"`
	DefaultAgent string                  `yaml:"default_agent,omitempty"`
}

// listenConfig is the listener's OAuth; the address comes from --listen.
type listenConfig struct {
	Auth *listenAuthConfig `yaml:"auth,omitempty"`
}

type listenAuthConfig struct {
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
}

type bundleConfig struct {
	Servers []string `yaml:"servers"`
}

type agentConfig struct {
	MCPBundles []string            `yaml:"mcp_bundles"`
	Match      map[string][]string `yaml:"match,omitempty"`
	Limits     []limitConfig       `yaml:"limits,omitempty"`
}

type limitConfig struct {
	Tools     []string `yaml:"tools"`
	PerMinute int      `yaml:"per_minute"`
}

// overrideConfig is an override of one upstream tool.
type overrideConfig struct {
	Title       string          `yaml:"title,omitempty"`
	Description string          `yaml:"description,omitempty"`
	Annotations map[string]bool `yaml:"annotations,omitempty"`
}

// serverConfig is one upstream: a stdio command or an HTTP url.
type serverConfig struct {
	Command  string            `yaml:"command,omitempty"`
	Args     []string          `yaml:"args,omitempty"`
	Env      map[string]string `yaml:"env,omitempty"`
	URL      string            `yaml:"url,omitempty"`
	Protocol string            `yaml:"protocol,omitempty"`
	Tools    toolsConfig       `yaml:"tools"`
	Limits   *limitsConfig     `yaml:"limits,omitempty"`
}

// limitsConfig is a server's rate limits (the store scenarios').
type limitsConfig struct {
	PerMinute     int `yaml:"per_minute,omitempty"`
	MaxConcurrent int `yaml:"max_concurrent,omitempty"`
}

// toolsConfig turns off the fixtures' resources and prompts, so that the
// proxy lists exactly the upstream tools (not its mcp_resources and
// mcp_prompts) and the lists compare like for like.
type toolsConfig struct {
	Resources bool                      `yaml:"resources"`
	Prompts   bool                      `yaml:"prompts"`
	Overrides map[string]overrideConfig `yaml:"overrides,omitempty"`
}

// writeConfig writes a proxy config with these upstreams into the temp
// directory and returns its path. Logs stay at warn (no per-request lines)
// and blobs pass through, so the proxy does no work the direct side skips.
// Tool pins go to the run's temporary directory, not the user's state
// directory (the first proxy of a run pins, later ones find the pins).
func (e *env) writeConfig(servers map[string]serverConfig) (string, error) {
	return e.writeConfigWith(servers, nil)
}

// writeConfigWith is writeConfig with mutate (when not nil) applied to the
// config before it is written.
func (e *env) writeConfigWith(servers map[string]serverConfig, mutate func(*proxyConfig)) (string, error) {
	for name, sc := range servers {
		sc.Protocol = e.o.upstreamProtocol
		servers[name] = sc
	}
	cfg := proxyConfig{
		Log:      map[string]string{"level": "warn"},
		Blobs:    map[string]string{"mode": "passthrough"},
		StateDir: filepath.Join(e.dir, "state"),
		Servers:  servers,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("proxy config: %w", err)
	}
	e.configs++
	path := filepath.Join(e.dir, fmt.Sprintf("config-%d.yaml", e.configs))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("proxy config: %w", err)
	}
	return path, nil
}

// fixtureURL reads the fixture's "listening on http://ADDR/mcp" line.
func fixtureURL(line string) (string, bool) {
	_, rest, ok := strings.Cut(line, "listening on ")
	if !ok {
		return "", false
	}
	return loopbackURL(strings.TrimSpace(rest))
}

// proxyURL reads the "url" of the proxy's JSON log line that announces its
// Streamable HTTP endpoint.
func proxyURL(line string) (string, bool) {
	var l struct {
		URL string `json:"url"`
	}
	if json.Unmarshal([]byte(line), &l) != nil || l.URL == "" {
		return "", false
	}
	return loopbackURL(l.URL)
}

// loopbackURL accepts only http://127.0.0.1:PORT/mcp.
func loopbackURL(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Hostname() != loopback || u.Port() == "" || u.Path != "/mcp" {
		return "", false
	}
	return s, true
}
