package configedit

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/yamldoc"
	"gopkg.in/yaml.v3"
)

// ErrLayout is returned for a file whose servers cannot be added to by
// inserting lines: the caller should print the entry for the user to
// paste instead.
var ErrLayout = errors.New("cannot add to this config file's layout")

// Entry is a servers entry to insert.
type Entry interface {
	// Block renders the entry as block YAML lines: the key at keyIndent,
	// each level one step deeper.
	Block(keyIndent, step string) []string
	// Flow renders the entry as "name: {...}" for a flow mapping.
	Flow() string
}

// defaultStep is the indentation of a file that shows none of its own.
const defaultStep = "  "

// AddServer returns data with e added to its servers mapping: after the
// last server, at their indentation (block style), or as the flow
// mapping's first pair (flow style); a file without servers gets the key at
// its end. Every line of data is kept as it is, and no line is changed, with
// these exceptions, which changed reports: a one-line flow mapping
// (`servers: {}`, `servers: {a: {...}}`) gets the entry inside it, and a
// last line without a newline gets one. Line ends follow the file's (CRLF
// or LF).
func AddServer(data []byte, e Entry) (out []byte, changed bool, err error) {
	out, changed, err = addServer(data, e)
	if err != nil {
		return nil, false, err
	}
	// The text is placed by lines and columns; a layout this editor
	// misjudged shows here, before the file is touched.
	if err := checkAdded(data, out); err != nil {
		return nil, false, err
	}
	return out, changed, nil
}

// checkAdded verifies that after holds the top-level keys of before and
// one more server.
func checkAdded(before, after []byte) error {
	var b, a map[string]any
	if yaml.Unmarshal(before, &b) != nil {
		return fmt.Errorf("%w: the file does not decode as a mapping", ErrLayout)
	}
	if err := yaml.Unmarshal(after, &a); err != nil {
		return fmt.Errorf("%w: the entry could not be placed without breaking the file (%v)", ErrLayout, err)
	}
	bs, _ := b["servers"].(map[string]any)
	as, ok := a["servers"].(map[string]any)
	if !ok || len(as) != len(bs)+1 {
		return fmt.Errorf("%w: the entry could not be placed in servers", ErrLayout)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			return fmt.Errorf("%w: the entry could not be placed without changing %s", ErrLayout, k)
		}
	}
	if len(a) > len(b)+1 || len(a) == len(b)+1 && b["servers"] != nil {
		return fmt.Errorf("%w: the entry could not be placed in servers", ErrLayout)
	}
	return nil
}

func addServer(data []byte, e Entry) (out []byte, changed bool, err error) {
	root, err := parse(data)
	if err != nil {
		return nil, false, err
	}
	eol := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		eol = "\r\n"
	}
	f := &file{lines: splitLines(data), eol: eol, endsInNewline: len(data) == 0 || bytes.HasSuffix(data, []byte("\n"))}
	if root == nil {
		// An empty file, or one of comments only.
		f.appendLines(append([]string{"servers:"}, e.Block(defaultStep, defaultStep)...))
		return f.bytes(), !f.endsInNewline && len(data) > 0, nil
	}
	if root.Kind != yaml.MappingNode || root.Style&yaml.FlowStyle != 0 {
		return nil, false, fmt.Errorf("%w: the top level is not a block mapping (a JSON or flow-style file)", ErrLayout)
	}
	rootIndent := root.Column - 1
	step := detectStep(root)
	idx := -1
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "servers" {
			idx = i
		}
	}
	if idx < 0 {
		pad := strings.Repeat(" ", rootIndent)
		f.appendLines(append([]string{pad + "servers:"}, e.Block(pad+step, step)...))
		return f.bytes(), !f.endsInNewline, nil
	}
	key, val := root.Content[idx], root.Content[idx+1]
	next := len(f.lines) + 1 // the line of the next top-level key
	if idx+2 < len(root.Content) {
		next = root.Content[idx+2].Line
	}
	switch {
	case val.Kind == yaml.ScalarNode && val.Tag == "!!null" && val.Value == "":
		// "servers:" with nothing after it (but perhaps a comment).
		pad := strings.Repeat(" ", rootIndent) + step
		at := f.lastContent(key.Line, next, rootIndent)
		f.insert(at, e.Block(pad, step))
		return f.bytes(), at == len(f.lines) && !f.endsInNewline, nil
	case val.Kind == yaml.MappingNode && val.Style&yaml.FlowStyle == 0:
		return f.addBlock(val, next, rootIndent, step, e)
	case val.Kind == yaml.MappingNode:
		return f.addFlow(val, e)
	}
	return nil, false, fmt.Errorf("%w: servers (line %d) is not a mapping", ErrLayout, key.Line)
}

func parse(data []byte) (*yaml.Node, error) {
	doc, _, err := yamldoc.First(data)
	if err != nil {
		return nil, fmt.Errorf("config is not valid YAML: %w", err)
	}
	if doc == nil || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		if root.Value != "" {
			return nil, fmt.Errorf("%w: the document is %q, not a mapping", ErrLayout, root.Value)
		}
		return nil, nil
	}
	return root, nil
}

// detectStep is the file's indentation step: the first block mapping
// nested in the top level says how far its keys are indented.
func detectStep(root *yaml.Node) string {
	for i := 1; i < len(root.Content); i += 2 {
		v := root.Content[i]
		if v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 {
			if d := v.Content[0].Column - root.Content[i-1].Column; d > 0 {
				return strings.Repeat(" ", d)
			}
		}
	}
	return defaultStep
}

// file is the config text as lines, without their line ends.
type file struct {
	lines         []string
	eol           string
	endsInNewline bool
}

func splitLines(data []byte) []string {
	s := string(data)
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	return lines
}

func (f *file) bytes() []byte {
	return []byte(strings.Join(f.lines, f.eol) + f.eol)
}

// insert puts new lines after line number at (1-based; 0 is the top).
func (f *file) insert(at int, add []string) {
	lines := make([]string, 0, len(f.lines)+len(add))
	lines = append(lines, f.lines[:at]...)
	lines = append(lines, add...)
	f.lines = append(lines, f.lines[at:]...)
}

func (f *file) appendLines(add []string) { f.insert(len(f.lines), add) }

// lastContent is the last line before line next, and after line from,
// that belongs to the block started at from: the lines skipped are blank
// or comments indented no deeper than the top level (those introduce what
// follows).
func (f *file) lastContent(from, next, rootIndent int) int {
	at := next - 1
	for at > from {
		l := f.lines[at-1]
		trimmed := strings.TrimLeft(l, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") && len(l)-len(trimmed) <= rootIndent {
			at--
			continue
		}
		break
	}
	return at
}

func (f *file) addBlock(val *yaml.Node, next, rootIndent int, step string, e Entry) ([]byte, bool, error) {
	first := val.Content[0]
	keyIndent := strings.Repeat(" ", first.Column-1)
	// The entries' own step, when the first one shows it.
	if v := val.Content[1]; v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 {
		if d := v.Content[0].Column - first.Column; d > 0 {
			step = strings.Repeat(" ", d)
		}
	}
	lastKey := val.Content[len(val.Content)-2]
	at := f.lastContent(lastKey.Line, next, rootIndent)
	add := e.Block(keyIndent, step)
	// Entries separated by blank lines get one before the new entry too.
	// (The comments that introduce an entry stand between.)
	if len(val.Content) >= 4 {
		before := val.Content[2].Line - 1
		for before > 0 && strings.HasPrefix(strings.TrimSpace(f.lines[before-1]), "#") {
			before--
		}
		if before > 0 && strings.TrimSpace(f.lines[before-1]) == "" {
			add = append([]string{""}, add...)
		}
	}
	changed := at == len(f.lines) && !f.endsInNewline
	f.insert(at, add)
	return f.bytes(), changed, nil
}

// addFlow adds the entry to a flow mapping: on a line of its own after the
// "{" when the mapping's pairs start on later lines, else inside the line.
func (f *file) addFlow(val *yaml.Node, e Entry) ([]byte, bool, error) {
	line := f.lines[val.Line-1]
	open := val.Column - 1
	if open >= len(line) || line[open] != '{' {
		return nil, false, fmt.Errorf("%w: servers (line %d) is a flow mapping this editor cannot place", ErrLayout, val.Line)
	}
	rest := strings.TrimSpace(line[open+1:])
	if len(val.Content) > 0 && val.Content[0].Line > val.Line && (rest == "" || strings.HasPrefix(rest, "#")) {
		pad := strings.Repeat(" ", val.Content[0].Column-1)
		f.insert(val.Line, []string{pad + e.Flow() + ","})
		return f.bytes(), false, nil
	}
	end := closingBrace(line, open)
	if end < 0 {
		return nil, false, fmt.Errorf("%w: servers (line %d) is a flow mapping over several lines with pairs on its first line: put the first pair on a line of its own, or add the entry by hand", ErrLayout, val.Line)
	}
	inner := strings.TrimSpace(line[open+1 : end])
	sep := ", "
	if inner == "" {
		sep = ""
	}
	f.lines[val.Line-1] = line[:open+1] + strings.TrimRight(line[open+1:end], " ") + sep + e.Flow() + line[end:]
	return f.bytes(), true, nil
}

// closingBrace finds the "}" that closes the "{" at open on the same
// line, skipping quoted text; -1 when the mapping goes on past the line.
func closingBrace(line string, open int) int {
	depth := 0
	for i := open; i < len(line); i++ {
		switch c := line[i]; c {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i
			}
		case '"':
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' {
					i++
				}
			}
		case '\'':
			for i++; i < len(line); i++ {
				if line[i] == '\'' {
					if i+1 < len(line) && line[i+1] == '\'' {
						i++
						continue
					}
					break
				}
			}
		case '#':
			if i > 0 && (line[i-1] == ' ' || line[i-1] == '\t') {
				return -1
			}
		}
	}
	return -1
}
