package config

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// maxCommentValue bounds how much of an unimported value a comment quotes.
const maxCommentValue = 200

// renderImport writes the YAML of ImportJSON: header comments, skipped
// entries as comments, then the servers map. It writes the text itself
// rather than through yaml.v3 so that comments land where they belong;
// every key and value goes through yamlKey or yamlQuote.
func renderImport(sources []importSource, ignored []string, servers []*importedServer) []byte {
	var b strings.Builder
	labels := make([]string, len(sources))
	for i, src := range sources {
		labels[i] = src.label + " (" + src.key + ")"
	}
	comment := func(indent, text string) {
		b.WriteString(indent + "# " + commentText(text) + "\n")
	}
	comment("", "mcp-proxy servers imported from "+strings.Join(labels, " and ")+".")
	comment("", "Env and header values were copied verbatim: keep this file private.")
	comment("", "${VAR} references are read from mcp-proxy's environment when it starts.")
	for _, key := range ignored {
		note := "not imported: top-level key " + strconv.Quote(key)
		if key == "inputs" {
			note += " (VS Code prompts for values: put them in the environment and use ${VAR})"
		}
		comment("", note)
	}
	imported := 0
	for _, s := range servers {
		if s.skip != "" {
			comment("", "skipped server "+strconv.Quote(s.original)+": "+s.skip)
		} else {
			imported++
		}
	}
	if imported == 0 {
		b.WriteString("servers: {}\n")
		return []byte(b.String())
	}
	b.WriteString("servers:\n")
	for _, s := range servers {
		if s.skip != "" {
			continue
		}
		for _, n := range s.notes {
			comment("  ", n)
		}
		b.WriteString("  " + yamlKey(s.name) + ":\n")
		for _, l := range s.lines {
			b.WriteString(l + "\n")
		}
	}
	return []byte(b.String())
}

// commentJSON renders a JSON value compactly for a comment.
func commentJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "(not valid JSON)"
	}
	s := buf.String()
	if utf8.RuneCountInString(s) > maxCommentValue {
		s = string([]rune(s)[:maxCommentValue]) + "..."
	}
	return s
}

// yamlKey writes a mapping key: plain when that is unambiguous, else
// double-quoted.
func yamlKey(k string) string {
	if plainKey(k) {
		return k
	}
	return yamlQuote(k)
}

func plainKey(k string) bool {
	if k == "" || !(k[0] == '_' || k[0] >= 'a' && k[0] <= 'z' || k[0] >= 'A' && k[0] <= 'Z') {
		return false
	}
	if !validNameChars(k) {
		return false
	}
	switch strings.ToLower(k) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
		return false
	}
	return true
}

// yamlQuote writes s as a YAML double-quoted scalar, escaping everything
// YAML does not allow raw or that could read as a line break.
func yamlQuote(s string) string {
	return `"` + yamlEscape(s, true) + `"`
}

// commentText makes text safe for a one-line YAML comment.
func commentText(s string) string { return yamlEscape(s, false) }

func yamlEscape(s string, quoted bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case quoted && r == '\\':
			b.WriteString(`\\`)
		case quoted && r == '"':
			b.WriteString(`\"`)
		case r < 0x20 || r >= 0x7f && r <= 0x9f || r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff:
			sanitize.WriteEscape(&b, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
