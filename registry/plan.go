package registry

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Package registry types (Package.RegistryType) and remote transport types.
const (
	TypeNPM   = "npm"
	TypePyPI  = "pypi"
	TypeOCI   = "oci"
	TypeNuGet = "nuget"
	TypeMCPB  = "mcpb"

	TransportStdio      = "stdio"
	TransportStreamable = "streamable-http"
	TransportSSE        = "sse"
)

// runnableTypes are the package types mcp-proxy starts, each through its
// ecosystem's one-shot runner.
var runnableTypes = []string{TypeNPM, TypePyPI, TypeOCI, TypeNuGet}

// The package registries whose base URL needs no flag: each runner uses
// it by default.
var defaultBaseURLs = map[string][]string{
	TypeNPM:   {"https://registry.npmjs.org"},
	TypePyPI:  {"https://pypi.org", "https://pypi.org/simple"},
	TypeNuGet: {"https://api.nuget.org", "https://api.nuget.org/v3/index.json"},
	TypeOCI:   {"https://docker.io", "https://registry-1.docker.io", "https://index.docker.io"},
}

// downloadTimeout is the connect_timeout written for a package entry: the
// first start downloads the package, which takes longer than the default
// 60 s allows on a slow link.
const downloadTimeout = "120s"

// Choice says which of a server's packages and remotes to use, and the
// entry's name. The zero Choice takes the first package of a runnable
// type, in the publisher's order, and the first remote when there is none,
// and names the entry after the server.
type Choice struct {
	// As names the entry; "" means the server's name made valid.
	As string
	// PackageType picks the first package of this registry type.
	PackageType string
	// Remote picks the first remote (streamable-http before sse).
	Remote bool
}

// Pair is one key and value of an env or headers map, in the order written.
type Pair struct{ Key, Value string }

// Variable is an input the user supplies through mcp-proxy's environment.
type Variable struct {
	// Name is the environment variable: ${Name} in the config.
	Name string
	// For says what it fills: "env API_KEY", "header Authorization",
	// "argument --port", "url {tenant_id}".
	For         string
	Description string
	Secret      bool
	Default     string
	Choices     []string
}

// Plan is a servers entry made from one package or remote, and what the
// user must know about it. Every value in it is ready for the config:
// literal text from the document has "${" escaped as "$${", and every
// input the user supplies is a ${VAR} reference.
type Plan struct {
	// Name is the entry's suggested key in servers.
	Name string
	// Command and Args run a stdio server; URL, Transport ("http" or
	// "sse") and Headers reach a remote one.
	Command string
	Args    []string
	Env     []Pair
	URL     string
	// Transport is "sse" for an SSE URL and "" otherwise (http is the
	// config's default for a url).
	Transport string
	Headers   []Pair
	// ConnectTimeout is written when not empty.
	ConnectTimeout string
	// Source says what the entry was made from: "npm
	// @scope/pkg@1.2.3", "remote https://…".
	Source string
	// Required lists every ${VAR} written, in the order of first use;
	// Optional the inputs left out.
	Required []Variable
	Optional []Variable
	// Notes are things to tell the user (a package that serves HTTP
	// must be started by them).
	Notes []string
}

// PlanServer makes the servers entry for s as choice says.
func PlanServer(s *Server, choice Choice) (*Plan, error) {
	pkg, remote, err := choose(s, choice)
	if err != nil {
		return nil, err
	}
	p := &Plan{Name: pick(choice.As, ConfigName(lastSegment(s.Name)))}
	b := newBuilder(p)
	if remote != nil {
		b.remote(remote)
		return p, nil
	}
	if err := b.pkg(pkg); err != nil {
		return nil, fmt.Errorf("server %q: %w", s.Name, err)
	}
	return p, nil
}

// PlanPackage makes the entry for a package named outside the registry
// (mcp-proxy add --npm / --pypi), already pinned to version, named as
// ("" for the package's name made valid).
func PlanPackage(registryType, identifier, version, as string) (*Plan, error) {
	pkg := &Package{RegistryType: registryType, Identifier: identifier, Version: version, Transport: Transport{Type: TransportStdio}}
	p := &Plan{Name: pick(as, ConfigName(lastSegment(identifier)))}
	if err := newBuilder(p).pkg(pkg); err != nil {
		return nil, err
	}
	return p, nil
}

// PlanURL makes the entry for a server URL (mcp-proxy add --url), named as
// ("" for a name from its host): SSE when its path ends in /sse,
// Streamable HTTP otherwise.
func PlanURL(raw, as string) (*Plan, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url must be an http:// or https:// URL with a host")
	}
	if u.User != nil {
		return nil, fmt.Errorf("--url must not carry user info: put credentials in the entry's headers, as ${VAR}")
	}
	t := Transport{Type: TransportStreamable, URL: raw}
	if strings.HasSuffix(strings.TrimSuffix(strings.ToLower(u.Path), "/"), "/sse") {
		t.Type = TransportSSE
	}
	p := &Plan{Name: pick(as, ConfigName(hostName(u.Hostname())))}
	newBuilder(p).remote(&t)
	return p, nil
}

func choose(s *Server, c Choice) (*Package, *Transport, error) {
	if c.Remote {
		for _, want := range []string{TransportStreamable, TransportSSE} {
			for i := range s.Remotes {
				if s.Remotes[i].Type == want {
					return nil, &s.Remotes[i], nil
				}
			}
		}
		return nil, nil, fmt.Errorf("%w: server %q has no streamable-http or sse remote%s", ErrNotRunnable, s.Name, s.offers())
	}
	if c.PackageType != "" {
		for i := range s.Packages {
			if strings.EqualFold(s.Packages[i].RegistryType, c.PackageType) {
				return &s.Packages[i], nil, nil
			}
		}
		return nil, nil, fmt.Errorf("%w: server %q has no %s package%s", ErrNotRunnable, s.Name, c.PackageType, s.offers())
	}
	for i := range s.Packages {
		if slices.Contains(runnableTypes, strings.ToLower(s.Packages[i].RegistryType)) {
			return &s.Packages[i], nil, nil
		}
	}
	if len(s.Remotes) > 0 {
		return choose(s, Choice{Remote: true, As: c.As})
	}
	for i := range s.Packages {
		if strings.EqualFold(s.Packages[i].RegistryType, TypeMCPB) {
			return nil, nil, mcpbError(s.Name)
		}
	}
	return nil, nil, fmt.Errorf("%w: server %q%s; mcp-proxy runs npm, pypi, oci and nuget packages and reaches streamable-http and sse remotes",
		ErrNotRunnable, s.Name, s.offers())
}

func mcpbError(name string) error {
	return fmt.Errorf("%w: server %q is an MCPB bundle: mcp-proxy does not download and unpack bundles; install it with a host that does, or ask its publisher for an npm, pypi, oci or nuget package",
		ErrNotRunnable, name)
}

// offers describes what s has, for an error: " (it offers: npm, remote sse)".
func (s *Server) offers() string {
	var have []string
	for _, p := range s.Packages {
		have = append(have, p.RegistryType)
	}
	for _, r := range s.Remotes {
		have = append(have, "remote "+r.Type)
	}
	if len(have) == 0 {
		return " (it offers no package and no remote)"
	}
	return " (it offers: " + strings.Join(have, ", ") + ")"
}

func pick(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// builder accumulates a Plan.
type builder struct {
	plan *Plan
	// prefix goes before the variable made of an argument, a header or a
	// {variable}: their names are generic (HOST, PORT, Authorization),
	// and without it one would take a value meant for something else
	// (${HOME}, ${PATH}) or another server's.
	prefix string
	seen   map[string]int // variable name -> index in plan.Required
}

func newBuilder(p *Plan) *builder {
	return &builder{plan: p, prefix: EnvName(p.Name) + "_"}
}

func (b *builder) pkg(p *Package) error {
	typ := strings.ToLower(p.RegistryType)
	if typ == TypeMCPB {
		return mcpbError(p.Identifier)
	}
	if !slices.Contains(runnableTypes, typ) {
		return fmt.Errorf("%w: %q packages cannot be run (mcp-proxy runs npm, pypi, oci and nuget)", ErrNotRunnable, p.RegistryType)
	}
	if p.Version == "" && typ != TypeOCI {
		return fmt.Errorf("%w: the %s package %q names no version, so it cannot be pinned", ErrNotRunnable, typ, p.Identifier)
	}
	if strings.HasPrefix(p.Identifier, "-") {
		return fmt.Errorf("%w: package identifier starts with '-'", ErrBadResponse)
	}
	base := ""
	if p.RegistryBaseURL != "" && !slices.Contains(defaultBaseURLs[typ], strings.TrimSuffix(p.RegistryBaseURL, "/")) {
		base = escape(p.RegistryBaseURL)
	}
	var env []string // the env vars written, for docker's -e
	for i := range p.EnvironmentVariables {
		if b.keyValue(&b.plan.Env, "env", &p.EnvironmentVariables[i]) {
			env = append(env, p.EnvironmentVariables[i].Name)
		}
	}
	runtime := b.arguments(p.RuntimeArguments)
	pkgArgs := b.arguments(p.PackageArguments)
	var cmd string
	var args []string
	switch typ {
	case TypeNPM, TypePyPI:
		// npx -y [--registry URL] RUNTIME… pkg@version PACKAGE…, and
		// uvx [--index-url URL] RUNTIME… pkg==version PACKAGE….
		runner := map[string]struct{ cmd, lead, indexFlag string }{
			TypeNPM:  {"npx", "-y", "--registry"},
			TypePyPI: {"uvx", "", "--index-url"},
		}[typ]
		cmd = runner.cmd
		if runner.lead != "" {
			args = append(args, runner.lead)
		}
		if base != "" {
			args = append(args, runner.indexFlag, base)
		}
		args = append(args, runtime...)
		args = append(args, escape(p.Identifier)+sep(typ)+escape(p.Version))
		args = append(args, pkgArgs...)
	case TypeNuGet:
		cmd = "dnx"
		args = append(args, runtime...)
		args = append(args, escape(p.Identifier)+"@"+escape(p.Version), "--yes")
		if base != "" {
			args = append(args, "--add-source", base)
		}
		if len(pkgArgs) > 0 {
			args = append(append(args, "--"), pkgArgs...)
		}
	case TypeOCI:
		cmd, args = "docker", []string{"run", "-i", "--rm"}
		args = append(args, runtime...)
		for _, name := range env {
			args = append(args, "-e", escape(name))
		}
		args = append(args, escape(ociImage(p)))
		args = append(args, pkgArgs...)
	}
	b.plan.Source = typ + " " + p.Identifier
	if typ == TypeOCI {
		b.plan.Source = "oci " + ociImage(p)
	} else {
		b.plan.Source += sep(typ) + p.Version
	}
	switch p.Transport.Type {
	case TransportStdio, "":
		b.plan.Command, b.plan.Args = cmd, args
		b.plan.ConnectTimeout = downloadTimeout
	case TransportStreamable, TransportSSE:
		// The package serves HTTP: the entry is its URL and headers, and
		// the user starts the package, with the inputs gathered so far.
		note := "this package serves " + p.Transport.Type + ": start it yourself, for example: " +
			strings.Join(append([]string{cmd}, args...), " ")
		var inputs []string
		for _, v := range append(b.plan.Required, b.plan.Optional...) {
			inputs = append(inputs, v.Name)
		}
		if len(inputs) > 0 {
			note += " (its inputs: " + strings.Join(inputs, ", ") + ")"
		}
		b.plan.Env, b.plan.Required, b.plan.Optional, b.seen = nil, nil, nil, nil
		b.transport(&p.Transport, packageValues(p))
		b.plan.Notes = append(b.plan.Notes, note)
	default:
		return fmt.Errorf("%w: unknown transport %q", ErrNotRunnable, p.Transport.Type)
	}
	return nil
}

func sep(typ string) string {
	if typ == TypePyPI {
		return "=="
	}
	return "@"
}

// ociImage is the image reference to run: the identifier, with the
// package's version as its tag when the identifier has no tag or digest,
// and the registry's host in front when the identifier names none.
func ociImage(p *Package) string {
	image := p.Identifier
	last := image[strings.LastIndex(image, "/")+1:]
	if p.Version != "" && !strings.ContainsAny(last, ":@") {
		image += ":" + p.Version
	}
	if p.RegistryBaseURL != "" && !slices.Contains(defaultBaseURLs[TypeOCI], strings.TrimSuffix(p.RegistryBaseURL, "/")) {
		first, _, found := strings.Cut(image, "/")
		if u, err := url.Parse(p.RegistryBaseURL); err == nil && u.Host != "" &&
			(!found || !strings.ContainsAny(first, ".:") && first != "localhost") {
			image = u.Host + "/" + image
		}
	}
	return image
}

// packageValues are the values a package's HTTP URL template may refer to:
// its arguments (by valueHint or name without dashes) and environment
// variables, when they have a fixed value or a default.
func packageValues(p *Package) map[string]string {
	vals := map[string]string{}
	put := func(key string, in *Input) {
		if key == "" || in.IsSecret {
			return
		}
		if in.Value != "" && len(in.Variables) == 0 {
			vals[key] = in.Value
		} else if in.Default != "" {
			vals[key] = in.Default
		}
	}
	for _, list := range [][]Argument{p.RuntimeArguments, p.PackageArguments} {
		for i := range list {
			a := &list[i]
			put(a.ValueHint, &a.Input)
			put(a.Name, &a.Input) // "{--port}" names the flag itself
			put(strings.TrimLeft(a.Name, "-"), &a.Input)
		}
	}
	for i := range p.EnvironmentVariables {
		put(p.EnvironmentVariables[i].Name, &p.EnvironmentVariables[i].Input)
	}
	return vals
}

func (b *builder) remote(t *Transport) {
	b.transport(t, nil)
	b.plan.Source = "remote " + t.URL
}

// transport writes the URL and headers of an HTTP transport. URL template
// variables come from known (a package's own values) or t.Variables; any
// other becomes ${VAR}.
func (b *builder) transport(t *Transport, known map[string]string) {
	if t.Type == TransportSSE {
		b.plan.Transport = "sse"
	}
	b.plan.URL = b.fill(t.URL, t.Variables, known, "url")
	for i := range t.Headers {
		b.keyValue(&b.plan.Headers, "header", &t.Headers[i])
	}
}

// keyValue writes one env var or header, or lists it as optional. It
// reports whether it was written.
func (b *builder) keyValue(dst *[]Pair, kind string, kv *KeyValueInput) bool {
	what := kind + " " + kv.Name
	switch {
	case kv.Value != "" && !kv.IsSecret:
		*dst = append(*dst, Pair{kv.Name, b.fill(kv.Value, kv.Variables, nil, what)})
	case kv.IsRequired || kv.Value != "":
		*dst = append(*dst, Pair{kv.Name, b.ref(b.varName(kind, kv.Name), what, &kv.Input)})
	default:
		b.optional(b.varName(kind, kv.Name), what, &kv.Input)
		return false
	}
	return true
}

// arguments turns arguments into command-line words, in order: a fixed
// value as written (its {variables} filled), a required one without a
// value as ${VAR}; an optional one without a value is left out.
func (b *builder) arguments(list []Argument) []string {
	var out []string
	for i := range list {
		a := &list[i]
		label := a.ValueHint
		if a.Type == "named" {
			label = a.Name
		}
		what := "argument " + label
		name := b.prefix + EnvName(strings.TrimLeft(label, "-"))
		if strings.Trim(label, "-") == "" {
			name = fmt.Sprintf("%sARG_%d", b.prefix, i+1)
		}
		var value string
		switch {
		case a.Value != "" && !a.IsSecret:
			value = b.fill(a.Value, a.Variables, nil, what)
		case a.IsRequired || a.Value != "":
			if a.Type == "named" && a.Format == "boolean" && a.Value == "" {
				out = append(out, escape(a.Name))
				continue
			}
			value = b.ref(name, what, &a.Input)
		default:
			b.optional(name, what, &a.Input)
			continue
		}
		if a.Type == "named" {
			out = append(out, escape(a.Name))
		}
		out = append(out, value)
	}
	return out
}

// fill replaces each {name} of s that names a variable: with known[name]
// or the variable's default when it is optional and not secret, else with
// ${NAME}. Other text is kept, with "${" escaped.
func (b *builder) fill(s string, vars map[string]Input, known map[string]string, what string) string {
	var out strings.Builder
	for {
		open := strings.IndexByte(s, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(s[open:], '}')
		if end < 0 {
			break
		}
		key := s[open+1 : open+end]
		in, declared := vars[key]
		val, isKnown := known[key]
		if !declared && !isKnown {
			out.WriteString(escape(s[:open+end+1]))
			s = s[open+end+1:]
			continue
		}
		out.WriteString(escape(s[:open]))
		switch {
		case isKnown && !declared:
			out.WriteString(escape(val))
		case !in.IsRequired && !in.IsSecret && in.Default != "":
			out.WriteString(escape(in.Default))
		default:
			out.WriteString(b.ref(b.prefix+EnvName(strings.TrimLeft(key, "-")), what+" {"+key+"}", &in))
		}
		s = s[open+end+1:]
	}
	out.WriteString(escape(s))
	return out.String()
}

// varName is the variable for an env var (its own name: the server reads
// that name, and users keep it in their environment under it) or a header
// (prefixed).
func (b *builder) varName(kind, name string) string {
	if kind == "env" {
		return EnvName(name)
	}
	return b.prefix + EnvName(name)
}

// ref records a variable the user must set and returns its reference.
func (b *builder) ref(name, what string, in *Input) string {
	if b.seen == nil {
		b.seen = map[string]int{}
	}
	if i, ok := b.seen[name]; ok {
		b.plan.Required[i].Secret = b.plan.Required[i].Secret || in.IsSecret
		return "${" + name + "}"
	}
	b.seen[name] = len(b.plan.Required)
	b.plan.Required = append(b.plan.Required, variable(name, what, in))
	return "${" + name + "}"
}

func (b *builder) optional(name, what string, in *Input) {
	b.plan.Optional = append(b.plan.Optional, variable(name, what, in))
}

func variable(name, what string, in *Input) Variable {
	return Variable{Name: name, For: what, Description: in.Description, Secret: in.IsSecret, Default: in.Default, Choices: in.Choices}
}

// escape makes literal text safe from the config's ${VAR} expansion: a
// value from the registry must never pull a variable of the user's
// environment into a command line or a header sent elsewhere.
func escape(s string) string { return strings.ReplaceAll(s, "${", "$${") }

// EnvName makes an environment variable name of an input's name: upper
// case, every character other than a letter, digit or "_" as "_", and a
// leading digit behind "_".
func EnvName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" || out[0] >= '0' && out[0] <= '9' {
		out = "_" + out
	}
	return out
}
