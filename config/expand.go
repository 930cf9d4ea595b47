package config

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// badRefError is a malformed ${...} reference. Its text never quotes the
// value it was found in: that value may be a secret.
type badRefError struct{ msg string }

func (e *badRefError) Error() string        { return e.msg }
func (e *badRefError) Is(target error) bool { return target == ErrBadReference }

// expand replaces ${NAME} and ${env:NAME} in s with lookup(NAME); "$${"
// stands for a literal "${" and every other "$" is literal. It reports every
// variable that is not set (as *missingEnvError), and stops at the first
// malformed reference (unterminated, empty name, or a name that is not
// letters, digits and "_" starting with a non-digit).
func expand(s string, lookup func(string) (string, bool)) (string, []error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	var errs []error
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", append(errs, &badRefError{"unterminated ${ (write $${ for a literal ${)"})
		}
		name := strings.TrimPrefix(s[i+2:i+2+end], "env:")
		switch {
		case name == "":
			return "", append(errs, &badRefError{"empty variable name in ${}"})
		case !validEnvName(name):
			return "", append(errs, &badRefError{"invalid variable name in ${...}: use letters, digits and _, not starting with a digit"})
		}
		if v, ok := lookup(name); ok {
			b.WriteString(v)
		} else {
			errs = append(errs, &missingEnvError{name: name})
		}
		i += 2 + end + 1
	}
	if len(errs) > 0 {
		return "", errs
	}
	return b.String(), nil
}

// escapeLiteral returns the text that expand turns back into s: every "${"
// gets a "$" in front of it.
func escapeLiteral(s string) string {
	return strings.ReplaceAll(s, "${", "$${")
}

// validEnvName reports whether name is a portable environment variable name.
func validEnvName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// expander replaces references in every scalar value of a node tree.
type expander struct {
	lookup   func(string) (string, bool)
	problems []error
	// expanded holds the nodes whose value came (partly) from the
	// environment; messages never quote those values.
	expanded map[*yaml.Node]bool
	// failed holds the nodes whose references could not be expanded; the
	// schema walk does not judge their (unexpanded) text.
	failed map[*yaml.Node]bool
	// secretVars collects the values of variables referenced inside secret
	// values (server env and headers, agent tokens): "Bearer ${TOKEN}"
	// makes TOKEN's value a secret of its own.
	secretVars map[string]bool
}

// expandTree rewrites the values of root in place. Keys are never expanded,
// and alias nodes are skipped: their anchor is expanded where it is defined.
func expandTree(root *yaml.Node, lookup func(string) (string, bool)) *expander {
	x := &expander{
		lookup:     lookup,
		expanded:   map[*yaml.Node]bool{},
		failed:     map[*yaml.Node]bool{},
		secretVars: map[string]bool{},
	}
	x.node(root, "", nil)
	return x
}

// node walks n; segs are the keys leading to it ("[]" for list items).
func (x *expander) node(n *yaml.Node, path string, segs []string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			x.node(c, path, segs)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			x.node(n.Content[i+1], joinPath(path, keyText(k)), append(segs[:len(segs):len(segs)], k.Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			x.node(c, indexPath(path, i), append(segs[:len(segs):len(segs)], "[]"))
		}
	case yaml.ScalarNode:
		x.scalar(n, path, isSecretPath(segs))
	}
}

// isSecretPath matches servers.<s>.env.<k>, servers.<s>.headers.<k>,
// agents.<a>.tokens[i], store.encryption_key, store.url (its password), and anything under a pinned argument
// (servers.<s>.tools.overrides.<t>.arguments.<k>): a value an operator
// pins from the environment is kept from the model, as a key would be.
func isSecretPath(segs []string) bool {
	if len(segs) >= 7 && segs[0] == "servers" && segs[2] == "tools" && segs[3] == "overrides" && segs[5] == "arguments" {
		return true
	}
	if len(segs) == 2 && segs[0] == "store" {
		return segs[1] == "encryption_key" || segs[1] == "url"
	}
	if len(segs) != 4 {
		return false
	}
	switch segs[0] {
	case "servers":
		return segs[2] == "env" || segs[2] == "headers"
	case "agents":
		return segs[2] == "tokens" && segs[3] == "[]"
	}
	return false
}

func (x *expander) scalar(n *yaml.Node, path string, secret bool) {
	if !strings.Contains(n.Value, "$") || n.ShortTag() == "!!binary" {
		return
	}
	lookup := x.lookup
	if secret {
		lookup = func(name string) (string, bool) {
			v, ok := x.lookup(name)
			if ok {
				x.secretVars[v] = true
			}
			return v, ok
		}
	}
	v, errs := expand(n.Value, lookup)
	for _, err := range errs {
		x.problems = append(x.problems, &FieldError{Path: path, Err: err})
	}
	if len(errs) > 0 {
		x.failed[n] = true
		return
	}
	if v == n.Value {
		return
	}
	n.Value = v
	x.expanded[n] = true
	const quoted = yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle | yaml.TaggedStyle
	if n.Style&quoted != 0 {
		return // the author said "string" (or gave a tag): keep it
	}
	// A plain value is typed by its text, as if the text had been written
	// in the file: "120" can fill a number and "true" a boolean. Text that
	// would read as null stays a string, so a variable set to "" or "null"
	// is not silently the same as an absent key.
	if isNullText(v) {
		n.Style = yaml.DoubleQuotedStyle
		n.Tag = "!!str"
		return
	}
	n.Tag = ""
}

func isNullText(s string) bool {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return true
	}
	return false
}

// maxPathKey bounds how much of one key a path quotes.
const maxPathKey = 64

// keyText renders a mapping key node for a path.
func keyText(k *yaml.Node) string { return pathKey(k.Value) }

// pathKey renders a mapping key for a path: as is when it is a plain word,
// else quoted, and cut when very long.
func pathKey(s string) string {
	if len(s) > maxPathKey {
		cut := maxPathKey
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	if s == "" || strings.ContainsAny(s, ".[]\" \t") || !printable(s) {
		return strconv.Quote(s)
	}
	return s
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
