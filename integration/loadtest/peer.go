package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// The peer is another MCP proxy, an optional side of the HTTP call
// scenarios (-peer PATH): TBXark/mcp-proxy, built on mcp-go, which serves
// each configured server on its own Streamable HTTP route (stateless) and
// runs its stdio upstream like ours.

// peerServer is the peer's name of the upstream, and so its route.
const peerServer = "up"

// Dialling an HTTP server after its ready line: the peer logs its route once
// the upstream is connected but listens from another goroutine, so the first
// connections may be refused for a moment.
const (
	dialTries = 100
	dialPause = 20 * time.Millisecond
)

// peerConfig is the part of TBXark/mcp-proxy's config (v2) the load test
// writes.
type peerConfig struct {
	MCPProxy struct {
		BaseURL string `json:"baseURL"`
		Addr    string `json:"addr"`
		Name    string `json:"name"`
		Version string `json:"version"`
		Type    string `json:"type"`
		Options struct {
			PanicIfInvalid bool `json:"panicIfInvalid"`
		} `json:"options"`
	} `json:"mcpProxy"`
	MCPServers map[string]peerUpstream `json:"mcpServers"`
}

type peerUpstream struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

// peerSpec runs the peer in front of upstream u over stdio; its ready value
// is its endpoint URL, once it serves the upstream.
func (e *env) peerSpec(u string, payload int) (procSpec, error) {
	port, err := testproc.FreePort()
	if err != nil {
		return procSpec{}, fmt.Errorf("peer: %w", err)
	}
	sc, err := e.upstreamServer(u, payload)
	if err != nil {
		return procSpec{}, err
	}
	var cfg peerConfig
	addr := net.JoinHostPort(loopback, strconv.Itoa(port))
	cfg.MCPProxy.BaseURL = "http://" + addr
	cfg.MCPProxy.Addr = addr
	cfg.MCPProxy.Name = "peer"
	cfg.MCPProxy.Version = "1.0.0"
	cfg.MCPProxy.Type = "streamable-http"
	cfg.MCPProxy.Options.PanicIfInvalid = true
	cfg.MCPServers = map[string]peerUpstream{peerServer: {Command: sc.Command, Args: sc.Args, Env: sc.Env}}
	data, err := json.Marshal(cfg)
	if err != nil {
		return procSpec{}, fmt.Errorf("peer config: %w", err)
	}
	e.configs++
	path := filepath.Join(e.dir, fmt.Sprintf("peer-%d.json", e.configs))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return procSpec{}, fmt.Errorf("peer config: %w", err)
	}
	url := "http://" + addr + "/" + peerServer + "/mcp"
	// The peer logs its route before it mounts it, and this line after every
	// route is mounted; an upstream it cannot add makes it exit
	// (panicIfInvalid) instead.
	ready := func(line string) (string, bool) {
		return url, strings.Contains(line, "All clients initialized")
	}
	return procSpec{name: "peer", path: e.o.peer, args: []string{"--config", path}, ready: ready}, nil
}

// dialHTTPRetry is dialHTTP, retried while the connection is refused.
func dialHTTPRetry(ctx context.Context, url, token string) (*httpClient, error) {
	var err error
	for range dialTries {
		var c *httpClient
		if c, err = dialHTTP(ctx, url, token); err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(dialPause):
		}
	}
	return nil, err
}
