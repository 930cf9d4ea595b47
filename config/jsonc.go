package config

// stripJSONC turns JSON with comments (VS Code's mcp.json and settings.json
// are JSONC) into plain JSON: // and /* */ comments outside strings become
// spaces, and a comma followed only by whitespace before } or ] is
// dropped. Anything else, valid or not, is passed on for encoding/json to
// judge.
//
// It is ours rather than github.com/tailscale/hujson's Standardize, which
// reads the same dialect (comments and trailing commas) but parses by
// recursion: a file of a few MiB of "[" (ImportJSON takes up to 4 MiB)
// overflows the goroutine stack, a fatal error that no recover catches,
// where encoding/json after this pass stops at its depth limit with an
// error (TestImportJSONDeepNesting). It also refuses a // comment on the
// last line of a file that does not end in a newline. This pass keeps no
// stack, so it needs no depth limit of its own.
func stripJSONC(data []byte) []byte {
	out := make([]byte, 0, len(data))
	var str stringTracker
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case str.inside(c):
			out = append(out, c)
		case c == '/' && i+1 < len(data) && data[i+1] == '/':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			out = append(out, ' ')
			if i < len(data) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(data) && data[i+1] == '*':
			i += 2
			for i < len(data) && !(data[i] == '*' && i+1 < len(data) && data[i+1] == '/') {
				i++
			}
			i++ // now on the closing '/', or past the end when unterminated
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	return dropTrailingCommas(out)
}

// dropTrailingCommas removes a comma outside strings whose next
// non-whitespace byte is } or ].
func dropTrailingCommas(data []byte) []byte {
	out := make([]byte, 0, len(data))
	var str stringTracker
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !str.inside(c) && c == ',' {
			j := i + 1
			for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
				j++
			}
			if j < len(data) && (data[j] == '}' || data[j] == ']') {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// stringTracker follows JSON strings byte by byte.
type stringTracker struct{ in, escaped bool }

// inside takes the next byte and reports whether it belongs to a string,
// its quotes included.
func (s *stringTracker) inside(c byte) bool {
	if s.in {
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.in = false
		}
		return true
	}
	if c == '"' {
		s.in = true
		return true
	}
	return false
}
