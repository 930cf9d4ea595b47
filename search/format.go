package search

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Texts of the seed's tool_search tool (docs/deferred-loading.md).
const (
	// QueryRequired is the error text for an empty query.
	QueryRequired = "query parameter is required"
	// NoMatches is the whole result of a keyword search that matched nothing.
	NoMatches = "No matching deferred tools found."
)

// selectPrefix starts a query that names tools exactly.
const selectPrefix = "select:"

// emptyParameters stands in for a missing, invalid or non-object inputSchema
// in Format, so every <function> line holds valid JSON with an object.
const emptyParameters = `{"type":"object"}`

// ParseSelect parses a "select:a,b" query. ok reports whether query (after
// trimming white space) starts with "select:" (in any letter case). names
// are the comma-separated names after it, each trimmed, empty ones dropped,
// duplicates dropped (first kept), in order; they may be none.
func ParseSelect(query string) (names []string, ok bool) {
	q := strings.TrimSpace(query)
	if len(q) < len(selectPrefix) || !strings.EqualFold(q[:len(selectPrefix)], selectPrefix) {
		return nil, false
	}
	seen := make(map[string]bool)
	for _, n := range strings.Split(q[len(selectPrefix):], ",") {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		names = append(names, n)
	}
	return names, true
}

// Format renders tools in the seed's tool_search output format:
//
//	<functions>
//	<function>{"name": "a", "description": "…", "parameters": {…}}</function>
//	</functions>
//
// with a newline after every line, the last included, as the seed wrote it.
// Inside each <function> element is one JSON object on one line, spaced as
// the seed spaced it (a space after each ':' and ',' between the three
// members, none inside the values). name and description are JSON strings
// (the seed escaped only '"'; here they are fully valid JSON). parameters is
// the tool's inputSchema compacted to one line with its key order and values
// kept; a missing, invalid or non-object schema is written as
// {"type":"object"}. '<', '>' and '&' are written as \u003c, \u003e and
// \u0026 everywhere inside the JSON, which keeps its meaning and means that
// no upstream text can close the <function> element early. nil entries are
// skipped.
func Format(hits []*Doc) string {
	return block("functions", hits, func(b *bytes.Buffer, d *Doc) {
		b.WriteString(`<function>{"name": `)
		writeJSONString(b, d.Name)
		b.WriteString(`, "description": `)
		writeJSONString(b, d.Description)
		b.WriteString(`, "parameters": `)
		writeParameters(b, d.Schema)
		b.WriteString("}</function>\n")
	})
}

// block writes the lines of docs, the nil ones skipped, each with line,
// between a <tag> line and a </tag> line.
func block(tag string, docs []*Doc, line func(b *bytes.Buffer, d *Doc)) string {
	var b bytes.Buffer
	b.WriteString("<" + tag + ">\n")
	for _, d := range docs {
		if d != nil {
			line(&b, d)
		}
	}
	b.WriteString("</" + tag + ">\n")
	return b.String()
}

// FormatSelect renders the result of a select: query as the seed did: Format
// of the tools found, then, when some names were not found (unknown or not
// allowed), a blank line and "Not found: a, b".
func FormatSelect(found []*Doc, notFound []string) string {
	out := Format(found)
	if len(notFound) > 0 {
		out += "\nNot found: " + strings.Join(notFound, ", ")
	}
	return out
}

// maxListingLine bounds one tool's description line in DeferredList, in
// characters: the listing sits in the initialize instructions of every
// session, and an upstream's one-line description can be arbitrarily long.
const maxListingLine = 200

// DeferredList renders the <available-deferred-tools> block of the deferred
// mode's instructions (docs/deferred-loading.md): one "<name> - <first line of description>"
// line per tool (just "<name>" when the description is empty), the line cut
// to maxListingLine characters with "..." appended when longer.
func DeferredList(docs []*Doc) string {
	return block("available-deferred-tools", docs, func(b *bytes.Buffer, d *Doc) {
		b.WriteString(d.Name)
		if line := FirstLine(d.Description); line != "" {
			b.WriteString(" - ")
			b.WriteString(line)
		}
		b.WriteByte('\n')
	})
}

// FirstLine returns the first non-empty line of s, trimmed, cut to
// maxListingLine characters (then ending in "...").
func FirstLine(s string) string {
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) > maxListingLine {
			n := 0
			for i := range line {
				if n == maxListingLine {
					line = line[:i] + "..."
					break
				}
				n++
			}
		}
		return strings.ToValidUTF8(line, "\uFFFD")
	}
	return ""
}

func writeJSONString(b *bytes.Buffer, s string) {
	// json.Marshal escapes <, >, & and replaces invalid UTF-8 with U+FFFD.
	// It cannot fail for a string; the fallback keeps the line valid JSON.
	out, err := json.Marshal(s)
	if err != nil {
		b.WriteString(`""`)
		return
	}
	b.Write(out)
}

func writeParameters(b *bytes.Buffer, schema json.RawMessage) {
	var compact bytes.Buffer
	if json.Compact(&compact, schema) != nil || compact.Len() == 0 || compact.Bytes()[0] != '{' {
		b.WriteString(emptyParameters)
		return
	}
	// Bytes that are not UTF-8 can only sit inside strings of a valid
	// document; replacing them keeps it valid for strict parsers.
	json.HTMLEscape(b, bytes.ToValidUTF8(compact.Bytes(), []byte("\uFFFD")))
}
