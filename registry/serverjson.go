package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Bounds on what a registry response may hold. The body cap bounds memory;
// the others keep one document from writing a config entry no one could
// review (the official registry's own limits are far below them).
const (
	// MaxResponseBytes caps one response body: a page of 100 servers is
	// a few hundred KiB.
	MaxResponseBytes = 8 << 20
	// maxListed caps the servers of one page.
	maxListed = 1000
	// maxPackages caps a server's packages and remotes, each.
	maxPackages = 64
	// maxInputs caps a package's arguments, environment variables or
	// headers, each, and an input's variables.
	maxInputs = 128
	// maxField caps any one string this package writes into a config or
	// prints (a URL, an identifier, an argument value).
	maxField = 4096
)

// Status values of a server version, from the registry's _meta.
const (
	StatusActive     = "active"
	StatusDeprecated = "deprecated"
	StatusDeleted    = "deleted"
)

// officialMeta is the _meta key the official registry (and registries
// built on its code) put their own facts under.
const officialMeta = "io.modelcontextprotocol.registry/official"

// Server is one server.json document (the registry's ServerDetail): the
// fields mcp-proxy reads, with their JSON names from the schema.
type Server struct {
	Schema      string      `json:"$schema"`
	Name        string      `json:"name"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Version     string      `json:"version"`
	WebsiteURL  string      `json:"websiteUrl"`
	Repository  *Repository `json:"repository"`
	Packages    []Package   `json:"packages"`
	Remotes     []Transport `json:"remotes"`
}

// Repository is where the server's source lives.
type Repository struct {
	URL    string `json:"url"`
	Source string `json:"source"`
}

// Package is one way to run the server locally.
type Package struct {
	RegistryType         string          `json:"registryType"`
	RegistryBaseURL      string          `json:"registryBaseUrl"`
	Identifier           string          `json:"identifier"`
	Version              string          `json:"version"`
	FileSHA256           string          `json:"fileSha256"`
	RuntimeHint          string          `json:"runtimeHint"`
	Transport            Transport       `json:"transport"`
	RuntimeArguments     []Argument      `json:"runtimeArguments"`
	PackageArguments     []Argument      `json:"packageArguments"`
	EnvironmentVariables []KeyValueInput `json:"environmentVariables"`
}

// Transport is a package's transport or a remote: stdio, streamable-http
// or sse, with the URL template and headers of the last two.
type Transport struct {
	Type      string           `json:"type"`
	URL       string           `json:"url"`
	Headers   []KeyValueInput  `json:"headers"`
	Variables map[string]Input `json:"variables"`
}

// Input is a value the user may have to supply (the schema's Input and
// InputWithVariables).
type Input struct {
	Description string           `json:"description"`
	IsRequired  bool             `json:"isRequired"`
	IsSecret    bool             `json:"isSecret"`
	Format      string           `json:"format"`
	Value       string           `json:"value"`
	Default     string           `json:"default"`
	Placeholder string           `json:"placeholder"`
	Choices     []string         `json:"choices"`
	Variables   map[string]Input `json:"variables"`
}

// Argument is a positional or named command-line argument.
type Argument struct {
	Input
	Type       string `json:"type"`
	Name       string `json:"name"`
	ValueHint  string `json:"valueHint"`
	IsRepeated bool   `json:"isRepeated"`
}

// KeyValueInput is an environment variable or a header.
type KeyValueInput struct {
	Input
	Name string `json:"name"`
}

// Official is what the registry says about a server version.
type Official struct {
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	PublishedAt   string `json:"publishedAt"`
	UpdatedAt     string `json:"updatedAt"`
	IsLatest      bool   `json:"isLatest"`
}

// Entry is one server version as the registry answers it: the server.json
// and the registry's own facts.
type Entry struct {
	Server   Server
	Official Official
}

// Deprecated reports whether the registry marks this version deprecated.
func (e *Entry) Deprecated() bool { return e.Official.Status == StatusDeprecated }

// Deleted reports whether the registry marks this version deleted.
func (e *Entry) Deleted() bool { return e.Official.Status == StatusDeleted }

// Page is one page of a server list.
type Page struct {
	Servers    []Entry
	NextCursor string
}

type wireEntry struct {
	Server *Server                    `json:"server"`
	Meta   map[string]json.RawMessage `json:"_meta"`
}

type wirePage struct {
	Servers  []json.RawMessage `json:"servers"`
	Metadata struct {
		NextCursor string `json:"nextCursor"`
	} `json:"metadata"`
}

// ParseEntry parses the answer to GET /v0.1/servers/{name}/versions/{v}:
// a ServerResponse object {"server": {...}, "_meta": {...}}. A bare
// server.json (no "server" key) is accepted too, with no registry facts.
// The error says what is wrong, never quoting the document.
func ParseEntry(data []byte) (*Entry, error) {
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadResponse, MaxResponseBytes)
	}
	if !isObject(data) {
		return nil, fmt.Errorf("%w: not a JSON object", ErrBadResponse)
	}
	e, err := parseEntry(data)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// ParsePage parses the answer to GET /v0.1/servers: {"servers": [...],
// "metadata": {"nextCursor": ...}}.
func ParsePage(data []byte) (*Page, error) {
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadResponse, MaxResponseBytes)
	}
	if !isObject(data) {
		return nil, fmt.Errorf("%w: not a JSON object", ErrBadResponse)
	}
	var w wirePage
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadResponse, jsonProblem(err))
	}
	if w.Servers == nil {
		return nil, fmt.Errorf(`%w: no "servers" list`, ErrBadResponse)
	}
	if len(w.Servers) > maxListed {
		return nil, fmt.Errorf("%w: more than %d servers in one page", ErrBadResponse, maxListed)
	}
	if len(w.Metadata.NextCursor) > maxField || !printable(w.Metadata.NextCursor) {
		return nil, fmt.Errorf("%w: metadata.nextCursor is not a short printable string", ErrBadResponse)
	}
	p := &Page{NextCursor: w.Metadata.NextCursor, Servers: make([]Entry, 0, len(w.Servers))}
	for i, raw := range w.Servers {
		if !isObject(raw) {
			return nil, fmt.Errorf("%w: servers[%d]: not a JSON object", ErrBadResponse, i)
		}
		e, err := parseEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("servers[%d]: %w", i, err)
		}
		p.Servers = append(p.Servers, *e)
	}
	return p, nil
}

func parseEntry(data []byte) (*Entry, error) {
	var w wireEntry
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadResponse, jsonProblem(err))
	}
	e := &Entry{}
	if w.Server != nil {
		e.Server = *w.Server
		if raw, ok := w.Meta[officialMeta]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &e.Official); err != nil {
				return nil, fmt.Errorf("%w: _meta: %s", ErrBadResponse, jsonProblem(err))
			}
		}
	} else if err := json.Unmarshal(data, &e.Server); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadResponse, jsonProblem(err))
	}
	if err := e.Server.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	switch e.Official.Status {
	case "", StatusActive, StatusDeprecated, StatusDeleted:
	default:
		return nil, fmt.Errorf("%w: server %q: unknown status", ErrBadResponse, e.Server.Name)
	}
	if len(e.Official.StatusMessage) > maxField {
		return nil, fmt.Errorf("%w: server %q: status message longer than %d bytes", ErrBadResponse, e.Server.Name, maxField)
	}
	return e, nil
}

// namePattern is the schema's pattern for a server name: a reverse-DNS
// namespace, one "/", and the server's own name.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`)

// ValidName reports whether name is a registry server name.
func ValidName(name string) bool {
	return len(name) >= 3 && len(name) <= 200 && namePattern.MatchString(name)
}

// check refuses a server.json this package would not use safely: a name
// that is not a registry name, strings that are too long or hold control
// characters, too many packages or inputs. The error names the field, not
// its value (other than the server's name, which the pattern makes safe).
func (s *Server) check() error {
	if !ValidName(s.Name) {
		return fmt.Errorf("a server name is missing or not of the form namespace/name")
	}
	bad := func(field string) error {
		return fmt.Errorf("server %q: %s is too long or holds control characters", s.Name, field)
	}
	for field, v := range map[string]string{"version": s.Version, "title": s.Title, "websiteUrl": s.WebsiteURL} {
		if !fieldOK(v) {
			return bad(field)
		}
	}
	// A description is only printed, escaped: its length is what matters.
	if len(s.Description) > maxField || !utf8.ValidString(s.Description) {
		return bad("description")
	}
	if len(s.Packages) > maxPackages || len(s.Remotes) > maxPackages {
		return fmt.Errorf("server %q: more than %d packages or remotes", s.Name, maxPackages)
	}
	for i := range s.Packages {
		if err := s.Packages[i].check(); err != nil {
			return fmt.Errorf("server %q: packages[%d]: %w", s.Name, i, err)
		}
	}
	for i := range s.Remotes {
		if err := s.Remotes[i].check(); err != nil {
			return fmt.Errorf("server %q: remotes[%d]: %w", s.Name, i, err)
		}
	}
	return nil
}

func (p *Package) check() error {
	for field, v := range map[string]string{"registryType": p.RegistryType, "registryBaseUrl": p.RegistryBaseURL,
		"identifier": p.Identifier, "version": p.Version, "fileSha256": p.FileSHA256, "runtimeHint": p.RuntimeHint} {
		if !fieldOK(v) {
			return fmt.Errorf("%s is too long or holds control characters", field)
		}
	}
	if p.RegistryType == "" || p.Identifier == "" {
		return fmt.Errorf("registryType and identifier are required")
	}
	if err := p.Transport.check(); err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	if len(p.RuntimeArguments) > maxInputs || len(p.PackageArguments) > maxInputs || len(p.EnvironmentVariables) > maxInputs {
		return fmt.Errorf("more than %d arguments or environment variables", maxInputs)
	}
	for i := range p.RuntimeArguments {
		if err := p.RuntimeArguments[i].check(); err != nil {
			return fmt.Errorf("runtimeArguments[%d]: %w", i, err)
		}
	}
	for i := range p.PackageArguments {
		if err := p.PackageArguments[i].check(); err != nil {
			return fmt.Errorf("packageArguments[%d]: %w", i, err)
		}
	}
	for i := range p.EnvironmentVariables {
		if err := p.EnvironmentVariables[i].check(); err != nil {
			return fmt.Errorf("environmentVariables[%d]: %w", i, err)
		}
	}
	return nil
}

func (t *Transport) check() error {
	if !fieldOK(t.Type) || !fieldOK(t.URL) {
		return fmt.Errorf("type or url is too long or holds control characters")
	}
	if len(t.Headers) > maxInputs {
		return fmt.Errorf("more than %d headers", maxInputs)
	}
	for i := range t.Headers {
		if err := t.Headers[i].check(); err != nil {
			return fmt.Errorf("headers[%d]: %w", i, err)
		}
	}
	return checkVariables(t.Variables)
}

func (a *Argument) check() error {
	switch a.Type {
	case "positional":
	case "named":
		if a.Name == "" {
			return fmt.Errorf("a named argument needs a name")
		}
	default:
		return fmt.Errorf("type must be positional or named")
	}
	if !fieldOK(a.Name) || !fieldOK(a.ValueHint) {
		return fmt.Errorf("name or valueHint is too long or holds control characters")
	}
	return a.Input.check()
}

func (kv *KeyValueInput) check() error {
	if kv.Name == "" || !fieldOK(kv.Name) {
		return fmt.Errorf("name is missing, too long or holds control characters")
	}
	return kv.Input.check()
}

func (in *Input) check() error {
	if !fieldOK(in.Value) || !fieldOK(in.Default) || len(in.Description) > maxField || len(in.Placeholder) > maxField {
		return fmt.Errorf("value, default or description is too long or holds control characters")
	}
	if len(in.Choices) > maxInputs {
		return fmt.Errorf("more than %d choices", maxInputs)
	}
	for _, c := range in.Choices {
		if len(c) > maxField {
			return fmt.Errorf("a choice is too long")
		}
	}
	return checkVariables(in.Variables)
}

func checkVariables(vars map[string]Input) error {
	if len(vars) > maxInputs {
		return fmt.Errorf("more than %d variables", maxInputs)
	}
	for name, v := range vars {
		if name == "" || !fieldOK(name) {
			return fmt.Errorf("a variable name is empty, too long or holds control characters")
		}
		if len(v.Variables) > 0 {
			return fmt.Errorf("variable %q has variables of its own", name)
		}
		if err := v.check(); err != nil {
			return fmt.Errorf("variables[%q]: %w", name, err)
		}
	}
	return nil
}

// fieldOK: at most maxField bytes of valid UTF-8 without control
// characters; such a string can go into a command line, a URL or a YAML
// scalar, and be printed, without surprises.
func fieldOK(s string) bool {
	return len(s) <= maxField && printable(s)
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0x2028 || r == 0x2029
	})
}

func isObject(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(data), []byte("{"))
}

// jsonProblem describes a decoding error without quoting the document.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("%s: want a JSON %s", te.Field, te.Type.Kind())
		}
		return "wrong JSON type"
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	return "invalid JSON"
}
