package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/configedit"
	"github.com/mcp-proxy/mcp-proxy/internal/atomicfile"
	"github.com/mcp-proxy/mcp-proxy/registry"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// placeholder stands in for a variable the new entry declares and this
// environment does not set, while the edited config is validated; a
// variable that starts the URL (a template's "{baseUrl}/mcp") stands for
// its scheme and host, and gets placeholderURL.
const (
	placeholder    = "placeholder"
	placeholderURL = "https://placeholder.invalid"
)

// newConfigMode is the mode of a config file add creates: it may come to
// hold secrets written by hand.
const newConfigMode = 0o600

const addUsage = "usage: mcp-proxy add NAME[@VERSION] [--as SERVER] [--package TYPE] [--remote] [--dry-run] | add --npm PKG[@VERSION] | --pypi PKG[==VERSION] | --url URL"

// runAdd is `add`: it makes the entry, checks that the config with it
// loads, and inserts it into the config file (or prints it, --dry-run).
func runAdd(ctx context.Context, o options, ro registryOptions, rest []string, stdout, stderr io.Writer) error {
	sources := 0
	for _, set := range []bool{len(rest) > 0, ro.npm != "", ro.pypi != "", ro.url != ""} {
		if set {
			sources++
		}
	}
	if sources != 1 || len(rest) > 1 {
		return usageErr("%s", addUsage)
	}
	if ro.as != "" && registry.ConfigName(ro.as) != ro.as {
		return usageErr("--as %q is not a server name: 1-32 letters, digits, \"_\" or \"-\", without \"__\" (for example %q)", ro.as, registry.ConfigName(ro.as))
	}
	path, data, cfg, err := readForAdd(o)
	if err != nil {
		return err
	}
	plan, from, err := makePlan(ctx, cfg, ro, rest, stderr)
	if err != nil {
		return err
	}
	if name := clash(cfg, plan.Name); name != "" {
		return usageErr("the config already has a server named %q: give the new one another name with --as NAME", name)
	}
	if ro.dryRun {
		for _, l := range plan.Block("  ", "  ") {
			fmt.Fprintln(stdout, l)
		}
		printPlan(stderr, plan, from, data, "")
		return nil
	}
	out, changed, err := configedit.AddServer(data, plan)
	if errors.Is(err, configedit.ErrLayout) {
		return configErr(fmt.Errorf("%s: %w; print the entry with --dry-run and add it by hand", path, err))
	}
	if err != nil {
		return configErr(fmt.Errorf("%s: %w", path, err))
	}
	if err := checkEdited(out, plan); err != nil {
		return configErr(fmt.Errorf("%s with the new entry would not load (nothing was written): %w", path, err))
	}
	if err := writeConfig(path, out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "added server %q to %s\n", plan.Name, path)
	if changed {
		fmt.Fprintln(stdout, "note: one line of the file changed: servers is written on one line, so the entry went into it")
	}
	printPlan(stdout, plan, from, data, path)
	return nil
}

// readForAdd finds the config and reads it. A --config file that does not
// exist yet is created with the entry alone.
func readForAdd(o options) (path string, data []byte, cfg *config.Config, err error) {
	if o.configPath != "" {
		if _, statErr := os.Stat(o.configPath); errors.Is(statErr, fs.ErrNotExist) {
			return o.configPath, nil, &config.Config{}, nil
		}
	}
	path, err = config.Locate(o.configPath, os.LookupEnv, nil)
	if err != nil {
		return "", nil, nil, configErr(err)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		return "", nil, nil, configErr(err)
	}
	cfg, err = config.Parse(data, os.LookupEnv)
	if err != nil {
		return "", nil, nil, configErr(fmt.Errorf("%s does not load as it is, so nothing is added to it: %w", path, err))
	}
	return path, data, cfg, nil
}

// planPackage is makePlan's result for package name of registryType at
// version v, which its index resolved (or failed to: versionErr); from
// says where it came from.
func planPackage(registryType, name, v string, versionErr error, as, from string) (*registry.Plan, string, error) {
	if versionErr != nil {
		return nil, "", registryErr(versionErr)
	}
	p, err := registry.PlanPackage(registryType, name, v, as)
	return p, from, registryErr(err)
}

// makePlan makes the entry from the registry or the package named. from
// says where it came from, for the summary.
func makePlan(ctx context.Context, cfg *config.Config, ro registryOptions, rest []string, stderr io.Writer) (*registry.Plan, string, error) {
	index := &registry.PackageIndex{NPMURL: os.Getenv(envNPMRegistry), PyPIURL: os.Getenv(envPyPIURL)}
	switch {
	case ro.npm != "":
		name, version := registry.SplitNPM(ro.npm)
		v, err := index.NPMVersion(ctx, name, version)
		return planPackage(registry.TypeNPM, name, v, err, ro.as, "npm")
	case ro.pypi != "":
		name, version := registry.SplitPyPI(ro.pypi)
		v, err := index.PyPIVersion(ctx, name, version)
		return planPackage(registry.TypePyPI, name, v, err, ro.as, "PyPI")
	case ro.url != "":
		p, err := registry.PlanURL(ro.url, ro.as)
		if err != nil {
			return nil, "", usageErr("%w", err)
		}
		return p, "", nil
	}
	name, version, _ := strings.Cut(rest[0], "@")
	if !registry.ValidName(name) {
		return nil, "", usageErr("%q is not a registry name: those are namespace/name, like io.github.owner/server (search with `mcp-proxy registry search WORDS`)", name)
	}
	c, err := registryClient(cfg, ro.registryURL)
	if err != nil {
		return nil, "", err
	}
	e, err := c.Get(ctx, name, version)
	if errors.Is(err, registry.ErrNotFound) {
		msg := fmt.Sprintf("server %q is not in the registry %s", name, registryBase(c))
		if close := c.Suggest(ctx, name, suggestions); len(close) > 0 {
			msg += "; the closest names are " + strings.Join(close, ", ")
		}
		return nil, "", usageErr("%s", msg)
	}
	if err != nil {
		return nil, "", registryErr(err)
	}
	if e.Deleted() {
		return nil, "", usageErr("server %q %s is deleted from the registry", name, e.Server.Version)
	}
	if e.Deprecated() {
		msg := fmt.Sprintf("warning: server %q %s is deprecated", name, e.Server.Version)
		if e.Official.StatusMessage != "" {
			msg += ": " + e.Official.StatusMessage
		}
		fmt.Fprintln(stderr, sanitize.Terminal(msg))
	}
	p, err := registry.PlanServer(&e.Server, registry.Choice{As: ro.as, PackageType: ro.packageType, Remote: ro.remote})
	if err != nil {
		return nil, "", registryErr(err)
	}
	return p, name + " " + e.Server.Version, nil
}

func registryBase(c *registry.Client) string {
	if c.BaseURL == "" {
		return registry.DefaultURL
	}
	return c.BaseURL
}

// clash returns the existing server the name collides with: the same
// name ignoring case, or the same resource URI prefix.
func clash(cfg *config.Config, name string) string {
	for existing := range cfg.Servers {
		if strings.EqualFold(existing, name) || config.ResourcePrefix(existing) == config.ResourcePrefix(name) {
			return existing
		}
	}
	return ""
}

// checkEdited loads the edited config as `validate` would, with the
// variables the entry declares taken as set, and checks the entry is
// there.
func checkEdited(data []byte, plan *registry.Plan) error {
	declared := map[string]bool{}
	for _, v := range plan.Required {
		declared[v.Name] = true
	}
	lookup := func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true
		}
		if declared[k] && strings.HasPrefix(plan.URL, "${"+k+"}") {
			return placeholderURL, true
		}
		if declared[k] {
			return placeholder, true
		}
		return "", false
	}
	cfg, err := config.Parse(data, lookup)
	if err != nil {
		return err
	}
	if cfg.Servers[plan.Name] == nil {
		return fmt.Errorf("the entry %q is not in the result", plan.Name)
	}
	return nil
}

// writeConfig replaces the file whole (a reader never sees half of it),
// keeping its mode; a symlink's target is what gets replaced.
func writeConfig(path string, data []byte) error {
	mode := os.FileMode(newConfigMode)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	if err := atomicfile.WriteFile(path, data, mode); err != nil {
		return &exitError{code: exitRuntime, err: fmt.Errorf("write %s: %w", path, err)}
	}
	return nil
}

// printPlan tells the user what to set, what was left out, what other
// servers share a variable, and how a running proxy picks the entry up.
func printPlan(w io.Writer, p *registry.Plan, from string, data []byte, path string) {
	line := func(format string, a ...any) { fmt.Fprintln(w, sanitize.Terminal(fmt.Sprintf(format, a...))) }
	if from != "" {
		line("from %s: %s", from, p.Source)
	} else {
		line("from %s", p.Source)
	}
	if len(p.Required) > 0 {
		line("set these in mcp-proxy's environment (the file holds only ${NAME} references):")
		for _, v := range p.Required {
			line("  %s", describeVar(v, true))
		}
	}
	if len(p.Optional) > 0 {
		line("left out (optional; add them to the entry to use them):")
		for _, v := range p.Optional {
			line("  %s", describeVar(v, false))
		}
	}
	for _, n := range p.Notes {
		line("note: %s", n)
	}
	users := variableUsers(data)
	for _, v := range p.Required {
		if others := users[v.Name]; len(others) > 0 {
			line("note: ${%s} is also used by server %s: they will get the same value", v.Name, strings.Join(others, ", "))
		}
	}
	if path == "" {
		return
	}
	for _, v := range p.Required {
		if _, ok := os.LookupEnv(v.Name); !ok {
			line("warning: %s is not set in this environment: a proxy started (or reloaded) without it fails to load the config", v.Name)
		}
	}
	line("a running proxy picks the entry up on SIGHUP: kill -HUP <its pid> (for example: pkill -HUP -x mcp-proxy)")
}

func describeVar(v registry.Variable, required bool) string {
	var parts []string
	if v.Secret {
		parts = append(parts, "secret")
	}
	parts = append(parts, v.For)
	if v.Default != "" {
		parts = append(parts, "default "+v.Default)
	}
	if len(v.Choices) > 0 {
		parts = append(parts, "one of "+strings.Join(v.Choices, "|"))
	}
	s := v.Name + " (" + strings.Join(parts, ", ") + ")"
	if v.Description != "" {
		s += ": " + v.Description
	}
	return s
}

// refPattern matches a ${NAME} or ${env:NAME} reference.
var refPattern = regexp.MustCompile(`\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}`)

// variableUsers maps each variable referenced under servers to the
// servers referencing it, read from the file's text ("$${" is literal).
func variableUsers(data []byte) map[string][]string {
	var doc struct {
		Servers map[string]yaml.Node `yaml:"servers"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		return nil
	}
	users := map[string][]string{}
	for name, node := range doc.Servers {
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			if n.Kind == yaml.ScalarNode {
				for _, m := range refPattern.FindAllStringSubmatch(strings.ReplaceAll(n.Value, "$${", ""), -1) {
					if !slices.Contains(users[m[1]], name) {
						users[m[1]] = append(users[m[1]], name)
					}
				}
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(&node)
	}
	for k := range users {
		slices.Sort(users[k])
	}
	return users
}
