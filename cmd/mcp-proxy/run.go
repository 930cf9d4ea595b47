package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usageText = `Usage: mcp-proxy [verb] [arguments and flags, in any order; flags may also come before the verb]

Verbs:
  serve            run the proxy (the default)
  validate [FILE]  check the config (FILE, else --config or the usual places) and print its warnings
  tools            connect and print each server's state and the agent's tools [--json]
  tools diff [SERVER]
                   show tool definitions that changed since they were pinned (or are new)
  tools approve NAME... | --server SERVER | --all
                   pin the pending definitions (NAME: server/tool or the exposed name)
  call NAME [JSON] call one tool and print its result
  import FILE      print the YAML for a Claude Desktop / Cursor / VS Code JSON config
  auth login SERVER   authorize an OAuth server: print the URL, run auth.open, wait, store the token
  auth status      every OAuth server's state and token expiry [--json]
  auth logout SERVER  forget a server's tokens and registration
  registry search TERMS...
                   list the MCP Registry's servers matching every term [--json] [--registry URL]
  add NAME[@VERSION] [--as SERVER] [--package TYPE] [--remote] [--dry-run]
                   add a server from the MCP Registry to the config, pinned, with ${VAR} for its inputs
  add --npm PKG[@VERSION] | --pypi PKG[==VERSION] | --url URL
                   add an npm or PyPI package (latest version when none is given) or a server URL
  status url       print the status page's address with its token (signs the browser in to act)
  status token     print the status page's token alone
  version          print the version

Flags:
`

// options are the flags shared by the verbs.
type options struct {
	verb          string
	configPath    string
	agent         string
	transport     string
	listen        string
	allowedTools  string
	allowedSet    bool
	logLevel      string
	logFormat     string
	metricsListen string
	json          bool
	// server and all select what tools approve approves.
	server string
	all    bool
	// registry holds the flags of registry search and add.
	registry registryOptions
}

// run is the whole program; main only wires it to the process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("mcp-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.configPath, "config", "", "config file (else $MCP_PROXY_CONFIG, ./mcp-proxy.yaml, $XDG_CONFIG_HOME/mcp-proxy/config.yaml)")
	fs.StringVar(&o.agent, "agent", "", "agent to serve (default: default_agent, or the implicit agent 'default')")
	fs.StringVar(&o.transport, "transport", "", "downstream transport: stdio or http (overrides listen.transport)")
	fs.StringVar(&o.listen, "listen", "", "HTTP listen address host:port (implies --transport http)")
	fs.Func("allowed-tools", "comma-separated per-session tool allow-list: a strict intersection with the agent's grants (stdio, call, tools)", func(s string) error {
		o.allowedTools, o.allowedSet = s, true
		return nil
	})
	fs.StringVar(&o.logLevel, "log-level", "", "log level: trace, debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "", "log format: json or console")
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "serve /metrics, /healthz, /readyz on host:port")
	fs.BoolVar(&o.json, "json", false, "tools, auth status, registry search: print JSON")
	fs.StringVar(&o.server, "server", "", "tools approve: approve every pending tool of this server")
	fs.BoolVar(&o.all, "all", false, "tools approve: approve every pending tool of every server")
	ro := &o.registry
	fs.StringVar(&ro.registryURL, "registry", "", "registry search, add: the MCP Registry's URL (default: the config's registry.url, else the official registry)")
	fs.StringVar(&ro.as, "as", "", "add: the server's name in the config")
	fs.StringVar(&ro.packageType, "package", "", "add: the package type to use (npm, pypi, oci, nuget)")
	fs.BoolVar(&ro.remote, "remote", false, "add: use the server's remote (streamable-http or sse URL) rather than a package")
	fs.BoolVar(&ro.dryRun, "dry-run", false, "add: print the entry instead of writing it")
	fs.StringVar(&ro.npm, "npm", "", "add: an npm package, PKG[@VERSION]")
	fs.StringVar(&ro.pypi, "pypi", "", "add: a PyPI package, PKG[==VERSION]")
	fs.StringVar(&ro.url, "url", "", "add: a server URL (http(s)://.../mcp, or .../sse for SSE)")
	rest, verbs, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &exitError{code: exitUsage, err: err}
	}
	// The verb is the first argument that is not a flag, wherever the
	// flags stand (`--config f validate` is `validate --config f`); with
	// none, or only arguments after "--", it is serve.
	verb := "serve"
	if verbs > 0 {
		verb, rest, verbs = rest[0], rest[1:], verbs-1
	}
	// tools diff and tools approve are sub-verbs of tools.
	sub := ""
	if verb == "tools" && verbs > 0 && (rest[0] == "diff" || rest[0] == "approve") {
		sub, rest = rest[0], rest[1:]
	}
	o.verb = verb

	switch verb {
	case "version":
		fmt.Fprintln(stdout, "mcp-proxy", version)
		return nil
	case "import":
		if len(rest) != 1 {
			return usageErr("usage: mcp-proxy import FILE")
		}
		return runImport(rest[0], stdout)
	case "registry":
		return runRegistry(ctx, o, o.registry, rest, stdout)
	case "add":
		return runAdd(ctx, o, o.registry, rest, stdout, stderr)
	case "serve", "validate", "tools", "call", "auth", "status":
	case "help":
		fs.Usage()
		return nil
	default:
		return usageErr("unknown verb %q (serve, validate, tools, call, import, auth, status, registry, add, version)", verb)
	}
	if verb == "validate" {
		// validate FILE checks FILE, as validate --config FILE does.
		switch {
		case len(rest) > 1:
			return usageErr("usage: mcp-proxy validate [FILE | --config FILE]")
		case len(rest) == 1 && o.configPath != "" && o.configPath != rest[0]:
			return usageErr("validate was given two configs, %s and --config %s: give one", rest[0], o.configPath)
		case len(rest) == 1:
			o.configPath, rest = rest[0], nil
		}
	}
	cfg, path, err := loadConfig(o)
	if err != nil {
		return err
	}
	if verb != "validate" {
		if err := checkPrivateDirs(cfg); err != nil {
			return err
		}
	}
	switch verb {
	case "auth":
		return runAuth(ctx, cfg, o, rest, stdout, stderr)
	case "status":
		return runStatus(cfg, rest, stdout)
	case "validate":
		return runValidate(cfg, path, stdout)
	case "tools":
		switch {
		case sub == "diff" && len(rest) <= 1:
			return runToolsDiff(cfg, strings.Join(rest, ""), stdout)
		case sub == "diff":
			return usageErr("usage: mcp-proxy tools diff [SERVER]")
		case sub == "approve":
			return runToolsApprove(cfg, rest, o.server, o.all, stdout)
		case len(rest) != 0:
			return usageErr("usage: mcp-proxy tools [--agent A] [--json] | tools diff [SERVER] | tools approve NAME...|--server S|--all")
		}
		return runTools(ctx, cfg, o, stdout, stderr)
	case "call":
		if len(rest) < 1 || len(rest) > 2 {
			return usageErr("usage: mcp-proxy call NAME [JSON-ARGUMENTS]")
		}
		arguments := "{}"
		if len(rest) == 2 {
			arguments = rest[1]
		}
		return runCall(ctx, cfg, o, rest[0], arguments, stdout, stderr)
	}
	if len(rest) != 0 {
		return usageErr("unexpected arguments: %s", strings.Join(rest, " "))
	}
	return runServe(ctx, cfg, o, stdin, stdout, stderr)
}

// loadConfig finds and loads the config, applies the flags that override
// it and validates the result.
func loadConfig(o options) (*config.Config, string, error) {
	cfg, path, err := readConfig(o)
	if err != nil {
		return nil, "", err
	}
	if err := cfg.Validate(); err != nil {
		return nil, "", configErr(fmt.Errorf("%s: %w", path, err))
	}
	return cfg, path, nil
}

// readConfig finds and loads the config and applies the flags that
// override it. A document that decodes is returned even when it breaks a
// rule: the caller validates what it will run (a reload first puts the
// running listeners back in).
func readConfig(o options) (*config.Config, string, error) {
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	path, err := config.Locate(o.configPath, os.LookupEnv, exists)
	if err != nil {
		return nil, "", configErr(err)
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if cfg == nil {
		return nil, "", configErr(fmt.Errorf("%s: %w", path, err))
	}
	if o.listen != "" {
		cfg.Listen.Addr = o.listen
		if o.transport == "" {
			o.transport = "http"
		}
	}
	if o.transport != "" {
		if o.transport != "stdio" && o.transport != "http" {
			return nil, "", usageErr("--transport must be stdio or http, not %q", o.transport)
		}
		cfg.Listen.Transport = o.transport
	}
	if o.logLevel != "" {
		cfg.Log.Level = o.logLevel
	}
	if o.logFormat != "" {
		cfg.Log.Format = o.logFormat
	}
	if o.metricsListen != "" {
		cfg.Metrics.Listen = o.metricsListen
	}
	return cfg, path, nil
}

func runImport(file string, stdout io.Writer) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	out, err := config.ImportJSON(data)
	if err != nil {
		return configErr(fmt.Errorf("%s: %w", file, err))
	}
	_, err = stdout.Write(out)
	return err
}

func runValidate(cfg *config.Config, path string, stdout io.Writer) error {
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stdout, "warning:", w)
	}
	enabled := 0
	for _, s := range cfg.Servers {
		if s.IsEnabled() {
			enabled++
		}
	}
	fmt.Fprintf(stdout, "%s: config OK: %d servers (%d enabled)\n", path, len(cfg.Servers), enabled)
	return nil
}

// parseInterleaved parses fs's flags wherever they stand among the
// positional arguments (`call T '{}' --config f`, `auth login github
// --config f`) and returns the positional arguments in order. Everything
// after "--" is positional, so an argument that starts with "-" can be
// given there.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	rest, _, err := parseArgs(fs, args)
	return rest, err
}

// parseArgs is parseInterleaved that also says how many of the positional
// arguments stood before the "--" that ends the flags (all of them when
// there is none): only those can be a verb. A "--" that is the value of a
// flag (`--config --`) is that value, not the end of the flags.
func parseArgs(fs *flag.FlagSet, args []string) (rest []string, beforeDashes int, err error) {
	var flags []string
	beforeDashes = -1
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			beforeDashes = len(rest)
			rest = append(rest, args[i+1:]...)
			i = len(args)
		case len(a) < 2 || a[0] != '-':
			rest = append(rest, a) // "-" too: the flag package reads it as an argument
		default:
			flags = append(flags, a)
			if takesNextArg(fs, a) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	if beforeDashes < 0 {
		beforeDashes = len(rest)
	}
	if err := fs.Parse(flags); err != nil {
		return nil, 0, err
	}
	return rest, beforeDashes, nil
}

// takesNextArg reports whether the flag argument a (-name or --name) is a
// defined flag whose value is the next argument: not a boolean flag and
// no "=value" of its own. The flag package then takes the next argument as
// the value whatever it is ("--" and "-x" included).
func takesNextArg(fs *flag.FlagSet, a string) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	if strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false // fs.Parse refuses it
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	return true
}
