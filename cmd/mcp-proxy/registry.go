package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/registry"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Environment variables naming the package registries `add --npm` and
// `add --pypi` ask for the latest version: npm's own variable (npx, which
// runs the package, reads it too), and one for a PyPI mirror's JSON API.
const (
	envNPMRegistry = "NPM_CONFIG_REGISTRY"
	envPyPIURL     = "MCP_PROXY_PYPI_URL"
)

// suggestions is how many close names an unknown name's error lists.
const suggestions = 3

// registryOptions are the flags of `registry search` and `add`.
type registryOptions struct {
	registryURL string
	as          string
	packageType string
	remote      bool
	dryRun      bool
	npm         string
	pypi        string
	url         string
}

// registryClient is the client for --registry, else the config's
// registry key, else the official registry. The config's headers and CA go
// only to the config's own registry.
func registryClient(cfg *config.Config, flagURL string) (*registry.Client, error) {
	if flagURL != "" {
		return &registry.Client{BaseURL: flagURL}, nil
	}
	if cfg == nil {
		return &registry.Client{}, nil
	}
	r := cfg.Registry
	c := registry.NewClient(r.URL, r.Headers, nil)
	if r.TLSCACertPath != "" {
		pool, err := upstream.LoadCAPool(r.TLSCACertPath)
		if err != nil {
			return nil, configErr(fmt.Errorf("registry: %w", err))
		}
		c = registry.NewClient(r.URL, r.Headers, pool)
	}
	return c, nil
}

// optionalConfig loads the config when there is one: `registry search`
// works without.
func optionalConfig(o options) (*config.Config, error) {
	path, err := config.Locate(o.configPath, os.LookupEnv, nil)
	if errors.Is(err, config.ErrNoConfig) && o.configPath == "" {
		return nil, nil
	}
	if err != nil {
		return nil, configErr(err)
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		return nil, configErr(fmt.Errorf("%s: %w", path, err))
	}
	return cfg, nil
}

// runRegistry is `registry search TERMS`.
func runRegistry(ctx context.Context, o options, ro registryOptions, rest []string, stdout io.Writer) error {
	if len(rest) < 1 || rest[0] != "search" {
		return usageErr("usage: mcp-proxy registry search TERMS... [--json] [--registry URL]")
	}
	cfg, err := optionalConfig(o)
	if err != nil {
		return err
	}
	c, err := registryClient(cfg, ro.registryURL)
	if err != nil {
		return err
	}
	found, err := c.Search(ctx, rest[1:])
	if err != nil {
		return registryErr(err)
	}
	if o.json {
		return writeSearchJSON(stdout, found)
	}
	if len(found) == 0 {
		fmt.Fprintf(stdout, "no server matches %q\n", strings.Join(rest[1:], " "))
		return nil
	}
	var t table
	t.add(0, "", "NAME", "VERSION", "RUNS AS", "DESCRIPTION")
	for _, e := range found {
		desc := e.Server.Description
		if e.Deprecated() {
			desc = "(deprecated) " + desc
			if e.Official.StatusMessage != "" {
				desc += " [" + e.Official.StatusMessage + "]"
			}
		}
		t.add(0, "", e.Server.Name, e.Server.Version, strings.Join(offers(&e.Server), ","), desc)
	}
	return t.write(stdout)
}

// offers lists what a server can be added as: its package types and
// "remote".
func offers(s *registry.Server) []string {
	var out []string
	for _, p := range s.Packages {
		out = append(out, p.RegistryType)
	}
	if len(s.Remotes) > 0 {
		out = append(out, "remote")
	}
	if len(out) == 0 {
		out = []string{"-"}
	}
	return out
}

type searchJSON struct {
	Name          string        `json:"name"`
	Title         string        `json:"title,omitempty"`
	Description   string        `json:"description"`
	Version       string        `json:"version"`
	Status        string        `json:"status"`
	StatusMessage string        `json:"statusMessage,omitempty"`
	Packages      []packageJSON `json:"packages"`
	Remotes       []remoteJSON  `json:"remotes"`
}

type packageJSON struct {
	RegistryType string `json:"registryType"`
	Identifier   string `json:"identifier"`
	Version      string `json:"version,omitempty"`
	Transport    string `json:"transport"`
}

type remoteJSON struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

func writeSearchJSON(w io.Writer, found []registry.Entry) error {
	out := make([]searchJSON, 0, len(found))
	for _, e := range found {
		s := searchJSON{Name: e.Server.Name, Title: e.Server.Title, Description: e.Server.Description, Version: e.Server.Version,
			Status: e.Official.Status, StatusMessage: e.Official.StatusMessage, Packages: []packageJSON{}, Remotes: []remoteJSON{}}
		if s.Status == "" {
			s.Status = registry.StatusActive
		}
		for _, p := range e.Server.Packages {
			s.Packages = append(s.Packages, packageJSON{p.RegistryType, p.Identifier, p.Version, p.Transport.Type})
		}
		for _, r := range e.Server.Remotes {
			s.Remotes = append(s.Remotes, remoteJSON{r.Type, r.URL})
		}
		out = append(out, s)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// registryErr gives a registry failure its exit code: unreachable is a
// runtime error (try again later), the rest are the user's to fix.
func registryErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, registry.ErrUnreachable) || errors.Is(err, registry.ErrBadResponse) {
		return &exitError{code: exitRuntime, err: err}
	}
	return &exitError{code: exitUsage, err: err}
}
