package registry

import (
	"fmt"
	"strings"
)

// Block renders the entry as block YAML: the key line at keyIndent, its
// fields one step deeper. Every string is double-quoted, so no value can
// be read as another YAML type or break the layout.
func (p *Plan) Block(keyIndent, step string) []string {
	in := keyIndent + step
	lines := []string{keyIndent + yamlKey(p.Name) + ":"}
	if p.Command != "" {
		lines = append(lines, in+"command: "+quote(p.Command))
		if len(p.Args) > 0 {
			lines = append(lines, in+"args: "+flowList(p.Args))
		}
		lines = appendMap(lines, in, step, "env", p.Env)
	} else {
		lines = append(lines, in+"url: "+quote(p.URL))
		if p.Transport != "" {
			lines = append(lines, in+"transport: "+p.Transport)
		}
		lines = appendMap(lines, in, step, "headers", p.Headers)
	}
	if p.ConnectTimeout != "" {
		lines = append(lines, in+"connect_timeout: "+p.ConnectTimeout)
	}
	return lines
}

// Flow renders the entry as one flow-style mapping pair, "name: {...}",
// for a servers mapping written in flow style.
func (p *Plan) Flow() string {
	var fields []string
	if p.Command != "" {
		fields = append(fields, "command: "+quote(p.Command))
		if len(p.Args) > 0 {
			fields = append(fields, "args: "+flowList(p.Args))
		}
		if len(p.Env) > 0 {
			fields = append(fields, "env: "+flowMap(p.Env))
		}
	} else {
		fields = append(fields, "url: "+quote(p.URL))
		if p.Transport != "" {
			fields = append(fields, "transport: "+p.Transport)
		}
		if len(p.Headers) > 0 {
			fields = append(fields, "headers: "+flowMap(p.Headers))
		}
	}
	if p.ConnectTimeout != "" {
		fields = append(fields, "connect_timeout: "+p.ConnectTimeout)
	}
	return yamlKey(p.Name) + ": {" + strings.Join(fields, ", ") + "}"
}

func appendMap(lines []string, in, step, key string, pairs []Pair) []string {
	if len(pairs) == 0 {
		return lines
	}
	lines = append(lines, in+key+":")
	for _, kv := range pairs {
		lines = append(lines, in+step+yamlKey(kv.Key)+": "+quote(kv.Value))
	}
	return lines
}

func flowList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func flowMap(pairs []Pair) string {
	q := make([]string, len(pairs))
	for i, kv := range pairs {
		q[i] = yamlKey(kv.Key) + ": " + quote(kv.Value)
	}
	return "{" + strings.Join(q, ", ") + "}"
}

// yamlKey writes a key plain when it is letters, digits, "_" and "-"
// starting with a letter or "_" and is no YAML keyword, else quoted.
func yamlKey(k string) string {
	plain := k != "" && (k[0] == '_' || k[0] >= 'a' && k[0] <= 'z' || k[0] >= 'A' && k[0] <= 'Z')
	for i := 0; plain && i < len(k); i++ {
		c := k[i]
		plain = c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	switch strings.ToLower(k) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
		plain = false
	}
	if plain {
		return k
	}
	return quote(k)
}

// quote writes s as a YAML double-quoted scalar.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '"':
			b.WriteString(`\"`)
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0x2028 || r == 0x2029 || r == 0xfeff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
