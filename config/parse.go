package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/atomicfile"
	"github.com/mcp-proxy/mcp-proxy/internal/yamldoc"
	"gopkg.in/yaml.v3"
)

// maxConfigBytes bounds a config file: real ones are a few KiB, and the cap
// keeps a wrong path (a log, a disk image) from costing memory and time.
const maxConfigBytes = 1 << 20

// Load reads the file at path and parses it with Parse. A nil lookupEnv
// means os.LookupEnv. Errors reading the file wrap the *fs.PathError.
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	data, opened, err := atomicfile.ReadAtMost(path, maxConfigBytes)
	if !opened {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	return Parse(data, lookupEnv)
}

// Parse decodes one YAML document into a Config: it expands ${VAR}
// references from lookupEnv (nil means os.LookupEnv), decodes strictly,
// fills Server.Name and Agent.Name from their map keys, applies the
// defaults and runs Validate. An empty document is a valid, empty config.
//
// On failure the error joins every problem found (each a *FieldError that
// matches ErrInvalid), all in one run: the document's own problems (unknown
// keys, wrong kinds, unset variables, in document order), then the rules
// Validate checks on what remains once those values are dropped (sorted by
// path; a rule never judges a dropped value). If the document decoded
// cleanly but broke rules, Parse returns that Config too (with defaults
// applied), so a caller can still print it with MarshalRedacted or list its
// Warnings; otherwise the Config is nil.
func Parse(data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if len(data) > maxConfigBytes {
		return nil, problem("", fmt.Sprintf("file is larger than %d bytes", maxConfigBytes))
	}
	root, err := parseDocument(data)
	if err != nil {
		return nil, err
	}
	cfg := &Config{}
	var problems []error
	var secrets []string
	if root != nil {
		x := expandTree(root, lookupEnv)
		secrets = mergeSecrets(nodeSecrets(root), x.secretVars) // before the walk prunes the tree
		shape := checkShape(root, x)
		problems = append(x.problems, shape.problems...)
		if !shape.complete {
			return nil, joinProblems(problems, secrets)
		}
		if err := decodeStrict(root, cfg); err != nil {
			return nil, joinProblems(append(problems, err), secrets)
		}
		cfg.doc = docInfo{present: shape.present, dropped: shape.dropped, secretVars: sortSecrets(x.secretVars), agentOrder: documentAgentOrder(root), serverOrder: documentServerOrder(root)}
	}
	cfg.fillNames()
	cfg.applyDefaults(lookupEnv)
	rules := cfg.problems()
	if len(problems) > 0 {
		return nil, joinProblems(append(problems, rules...), mergeSecrets(secrets, setOf(cfg.Secrets())))
	}
	if len(rules) > 0 {
		return cfg, joinProblems(rules, cfg.Secrets())
	}
	return cfg, nil
}

func setOf(list []string) map[string]bool {
	set := make(map[string]bool, len(list))
	for _, s := range list {
		set[s] = true
	}
	return set
}

// parseDocument returns the top-level mapping of the only document in
// data, or nil when there is no document or it is empty.
func parseDocument(data []byte) (*yaml.Node, error) {
	doc, dec, err := yamldoc.First(data)
	if err != nil {
		return nil, syntaxError(data, err)
	}
	if doc == nil {
		return nil, nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, problem("", fmt.Sprintf("line %d: a second YAML document starts here; a config is one document", next.Line))
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(data, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if isNull(root) {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, problem("", "the top level must be a mapping of keys, got "+kindName(root))
	}
	return root, nil
}

// syntaxError turns a yaml.v3 parse error into a *FieldError.
func syntaxError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		what := msg[len(m[0]):]
		if line := failingLine(data, what); line > 0 {
			msg = fmt.Sprintf("line %d: %s", line, what)
		}
	}
	return problem("", "invalid YAML: "+msg)
}

// yamlLine matches the "line N: " yaml.v3 puts before a syntax error.
var yamlLine = regexp.MustCompile(`^line (\d+): `)

// syntaxSearchLines bounds the documents failingLine searches: it parses
// every run of first lines, which is quick for a config of a few hundred
// lines and would not be for a megabyte of them.
const syntaxSearchLines = 2000

// failingLine is the line where the text went wrong for a syntax error
// whose message (without its line) is what: the last line of the shortest
// run of first lines that fails with the same message. yaml.v3 reports some
// errors at the line where the enclosing block starts instead: a key
// indented to match no mapping ("did not find expected key") is reported at
// line 1 when its mapping starts there. 0 when no run fails so (or the
// document has more than syntaxSearchLines lines).
func failingLine(data []byte, what string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > syntaxSearchLines {
		return 0
	}
	end := 0
	for i, l := range lines {
		end += len(l)
		err := decodeAll(data[:end])
		if err == nil {
			continue
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(msg); m != nil && msg[len(m[0]):] == what {
			return i + 1
		}
	}
	return 0
}

// decodeAll decodes every document of data, returning the first error.
func decodeAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// decodeStrict decodes the checked, expanded tree with KnownFields, the
// same strictness the schema walk enforced. yaml.v3 can only decode
// strictly from text, so the tree is encoded first; the line numbers of
// any error would refer to that text, so they are dropped.
func decodeStrict(root *yaml.Node, cfg *Config) error {
	text, err := yaml.Marshal(root)
	if err != nil {
		return problem("", "cannot re-encode the expanded document: "+err.Error())
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				if _, rest, ok := strings.Cut(m, ": "); ok && strings.HasPrefix(m, "line ") {
					m = rest
				}
				msgs[i] = m
			}
			return problem("", "decode: "+strings.Join(msgs, "; "))
		}
		return problem("", "decode: "+strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

// fillNames copies map keys into Name fields and replaces null entries
// (a key with no value) by empty ones, so later stages need no nil checks.
func (c *Config) fillNames() {
	for name, s := range c.Servers {
		if s == nil {
			s = &Server{}
			c.Servers[name] = s
		}
		s.Name = name
	}
	for name, b := range c.Bundles {
		if b == nil {
			c.Bundles[name] = &Bundle{}
		}
	}
	for name, a := range c.Agents {
		if a == nil {
			a = &Agent{}
			c.Agents[name] = a
		}
		a.Name = name
	}
}

// isSet reports whether the document gave path a non-null value.
func (c *Config) isSet(path string) bool { return c.doc.present[path] }
