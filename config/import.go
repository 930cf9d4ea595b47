package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxImportBytes bounds the JSON file ImportJSON reads; host configs are a
// few KiB.
const maxImportBytes = 4 << 20

// hostVariables are the predefined ${...} variables of VS Code and Cursor.
// mcp-proxy does not have them, so ImportJSON keeps them as literal text
// and says so, instead of reading them as environment variables.
var hostVariables = map[string]bool{
	"workspaceFolder": true, "workspaceFolderBasename": true, "workspaceRoot": true,
	"file": true, "fileWorkspaceFolder": true, "relativeFile": true, "relativeFileDirname": true,
	"fileBasename": true, "fileBasenameNoExtension": true, "fileExtname": true, "fileDirname": true,
	"fileDirnameBasename": true, "cwd": true, "lineNumber": true, "selectedText": true,
	"execPath": true, "defaultBuildTask": true, "pathSeparator": true,
}

// importSource is one server map found in the input file.
type importSource struct {
	key, label string
	entries    map[string]json.RawMessage
}

// importedServer is one entry of the input on its way to YAML.
type importedServer struct {
	original string
	name     string
	notes    []string // comments above the entry
	skip     string   // why the entry is not imported; "" when it is
	lines    []string // the YAML of the entry's fields, indented by 4
}

// ImportJSON converts the MCP server list of a Claude Desktop or Cursor
// config ("mcpServers"), or of VS Code ("servers" in mcp.json, or
// "mcp.servers" in settings.json; comments and trailing commas allowed),
// into mcp-proxy YAML: a "servers:" map in name order. Entries are
// {command, args, env, cwd} or {url, headers, type: http|sse}; "disabled":
// true becomes enabled: false.
//
// Names that mcp-proxy does not accept are sanitized (invalid characters
// become "-", "__" becomes "_", at most 32 characters, made unique), with a
// comment giving the original. Fields that have no equivalent, and entries
// that cannot be imported, become comments: nothing is dropped silently.
// ${VAR} and ${env:VAR} stay environment references and ${userHome}
// becomes ${HOME}; other host variables (${workspaceFolder},
// ${input:...}) are kept as literal text with a comment. Every imported
// entry is checked to load without errors.
//
// This is the one function of the package that copies secret values (env
// and header values) into its output: they are the user's own, moving to
// the new file.
func ImportJSON(data []byte) ([]byte, error) {
	if len(data) > maxImportBytes {
		return nil, fmt.Errorf("%w: file is larger than %d bytes", ErrImport, maxImportBytes)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var top map[string]json.RawMessage
	if err := json.Unmarshal(stripJSONC(data), &top); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %w", ErrImport, err)
	}
	if top == nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrImport)
	}
	sources, ignored, err := findSources(top)
	if err != nil {
		return nil, err
	}

	var servers []*importedServer
	for _, src := range sources {
		for _, name := range sortedKeys(src.entries) {
			servers = append(servers, &importedServer{original: name})
			convertEntry(servers[len(servers)-1], src.entries[name])
		}
	}
	assignNames(servers)
	for _, s := range servers {
		if s.skip == "" {
			checkImported(s)
		}
	}
	return renderImport(sources, ignored, servers), nil
}

// findSources picks the server maps out of the top-level object.
func findSources(top map[string]json.RawMessage) (sources []importSource, ignored []string, err error) {
	add := func(key, label string, raw json.RawMessage) error {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return fmt.Errorf("%w: %q is not an object", ErrImport, key)
		}
		sources = append(sources, importSource{key: key, label: label, entries: m})
		return nil
	}
	for _, key := range sortedKeys(top) {
		raw := top[key]
		switch key {
		case "mcpServers":
			err = add(key, "a Claude Desktop / Cursor config", raw)
		case "servers":
			err = add(key, "a VS Code mcp.json", raw)
		case "mcp":
			var mcp map[string]json.RawMessage
			if json.Unmarshal(raw, &mcp) == nil && mcp["servers"] != nil {
				err = add("mcp.servers", "VS Code settings", mcp["servers"])
			} else {
				ignored = append(ignored, key)
			}
		default:
			ignored = append(ignored, key)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if len(sources) == 0 {
		return nil, nil, fmt.Errorf("%w: no \"mcpServers\" or \"servers\" object found", ErrImport)
	}
	return sources, ignored, nil
}

// convertEntry fills s.lines (or s.skip) from one JSON entry.
func convertEntry(s *importedServer, raw json.RawMessage) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		s.skip = "the entry is not a JSON object"
		return
	}
	used := map[string]bool{}
	str := func(key string) (string, bool) {
		raw, ok := fields[key]
		if !ok {
			return "", true
		}
		used[key] = true
		return jsonScalar(raw)
	}
	typ, ok1 := str("type")
	command, ok2 := str("command")
	urlKey := "url"
	if _, ok := fields["url"]; !ok {
		urlKey = "serverUrl" // Windsurf's spelling
	}
	url, ok3 := str(urlKey)
	switch {
	case !ok1:
		s.skip = `"type" is not a string`
	case !ok2:
		s.skip = `"command" is not a string`
	case !ok3:
		s.skip = strconv.Quote(urlKey) + " is not a string"
	case command != "" && url != "":
		s.skip = "it has both command and url"
	case command == "" && url == "":
		s.skip = "it has neither command nor url"
	}
	if s.skip != "" {
		return
	}
	transport := TransportStdio
	inferredSSE := false
	switch t := strings.ToLower(typ); {
	case t == "":
		switch {
		case url != "" && ssePath(url):
			// Hosts that guess the transport take a URL ending in /sse
			// for the legacy SSE transport, and such a server does not
			// speak Streamable HTTP.
			transport, inferredSSE = TransportSSE, true
		case url != "":
			transport = TransportHTTP
		}
	case t == "stdio":
	case t == "http" || t == "streamable-http" || t == "streamablehttp" || t == "streamable_http":
		transport = TransportHTTP
	case t == "sse":
		transport = TransportSSE
	default:
		s.skip = "unknown type " + strconv.Quote(typ)
		return
	}
	if transport == TransportStdio && command == "" {
		s.skip = "type " + strconv.Quote(typ) + " needs a command, not a url"
		return
	}
	if transport != TransportStdio && command != "" {
		s.skip = "type " + strconv.Quote(typ) + " needs a url, not a command"
		return
	}

	var lines []string
	field := func(key, value, label string) {
		lines = append(lines, "    "+key+": "+s.refs(label, value))
	}
	switch {
	case inferredSSE:
		lines = append(lines, "    transport: sse  # inferred: the entry has no type and its url ends in /sse (set http for Streamable HTTP)")
	case transport == TransportSSE:
		lines = append(lines, "    transport: sse")
	}
	// Fields of the other kind of server have no place in this entry.
	irrelevant, onlyFor := []string{"headers"}, "http and sse"
	if transport == TransportStdio {
		field("command", command, "command")
		if raw, ok := fields["args"]; ok {
			used["args"] = true
			args, ok := jsonScalarList(raw)
			if !ok {
				s.skip = `"args" is not a list of strings`
				return
			}
			if len(args) > 0 {
				lines = append(lines, "    args:")
				for i, a := range args {
					lines = append(lines, "      - "+s.refs(indexPath("args", i), a))
				}
			}
		}
		if cwd, ok := str("cwd"); !ok {
			s.skip = `"cwd" is not a string`
			return
		} else if cwd != "" {
			field("cwd", cwd, "cwd")
		}
		if !s.mapField(&lines, fields, used, "env") {
			return
		}
	} else {
		irrelevant, onlyFor = []string{"args", "cwd", "env"}, "stdio"
		field("url", url, "url")
		if !s.mapField(&lines, fields, used, "headers") {
			return
		}
	}
	if raw, ok := fields["disabled"]; ok {
		var disabled bool
		if json.Unmarshal(raw, &disabled) == nil {
			used["disabled"] = true
			if disabled {
				lines = append(lines, "    enabled: false")
			}
		}
	}
	for _, key := range irrelevant {
		if raw, ok := fields[key]; ok && !used[key] {
			used[key] = true
			s.notes = append(s.notes, fmt.Sprintf("not imported: %q (only used by %s servers): %s", key, onlyFor, commentJSON(raw)))
		}
	}
	for _, key := range sortedKeys(fields) {
		if !used[key] {
			s.notes = append(s.notes, fmt.Sprintf("not imported: %q: %s", key, commentJSON(fields[key])))
		}
	}
	s.lines = lines
}

// mapField renders an object of strings (env, headers); false when it has
// the wrong shape (s.skip is then set).
func (s *importedServer) mapField(lines *[]string, fields map[string]json.RawMessage, used map[string]bool, key string) bool {
	raw, ok := fields[key]
	if !ok {
		return true
	}
	used[key] = true
	m, ok := jsonScalarMap(raw)
	if !ok {
		s.skip = strconv.Quote(key) + " is not an object of strings"
		return false
	}
	if len(m) == 0 {
		return true
	}
	*lines = append(*lines, "    "+key+":")
	for _, k := range sortedKeys(m) {
		*lines = append(*lines, "      "+yamlKey(k)+": "+s.refs(key+"."+k, m[k]))
	}
	return true
}

// refs converts the ${...} references of a host value and returns it as a
// YAML double-quoted scalar. ${VAR} and ${env:VAR} are kept, ${userHome}
// becomes ${HOME}, and anything else is escaped to stay literal text.
func (s *importedServer) refs(label, v string) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		j := strings.Index(v[i:], "${")
		if j < 0 {
			b.WriteString(v[i:])
			break
		}
		b.WriteString(v[i : i+j])
		i += j
		end := strings.IndexByte(v[i+2:], '}')
		if end < 0 {
			b.WriteString("$${")
			i += 2
			continue
		}
		ref := v[i : i+2+end+1]
		inner := ref[2 : len(ref)-1]
		keep := ""
		switch {
		case inner == "userHome":
			keep = "${HOME}"
		case strings.HasPrefix(inner, "env:") && validEnvName(inner[4:]):
			keep = ref
		case validEnvName(inner) && !hostVariables[inner]:
			keep = ref
		}
		if keep != "" && !strings.HasSuffix(b.String(), "$") {
			b.WriteString(keep)
		} else {
			b.WriteString(escapeLiteral(ref))
			s.notes = append(s.notes, fmt.Sprintf("%s: %s is kept as literal text: mcp-proxy only expands ${VAR} and ${env:VAR} from its environment",
				label, ref))
		}
		i += len(ref)
	}
	return yamlQuote(b.String())
}

// assignNames gives every entry a valid, unique name. Uniqueness is by
// resource URI prefix, which also covers names equal ignoring case.
func assignNames(servers []*importedServer) {
	taken := map[string]bool{}
	for _, s := range servers {
		base := ServerName(s.original)
		name := base
		for n := 2; taken[ResourcePrefix(name)]; n++ {
			suffix := "-" + strconv.Itoa(n)
			name = strings.TrimRight(cutName(base, maxNameLen-len(suffix)), "_") + suffix
		}
		taken[ResourcePrefix(name)] = true
		s.name = name
		if name != s.original {
			reason := `mcp-proxy names are 1-32 letters, digits, "_" or "-", without "__"`
			if name != base {
				reason = "another server already has that name or its resource prefix"
			}
			s.notes = append([]string{fmt.Sprintf("imported from %s: %s", strconv.Quote(s.original), reason)}, s.notes...)
		}
	}
}

// ServerName maps any text to a valid server (or agent) name: letters,
// digits, "_" and "-" kept, every other character "-", no "__", at most 32
// characters; "server" when s is empty.
func ServerName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf && validNameChars(string(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := b.String()
	for strings.Contains(name, "__") {
		name = strings.ReplaceAll(name, "__", "_")
	}
	name = cutName(name, maxNameLen)
	if name == "" {
		name = "server"
	}
	return name
}

func cutName(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// importCheckEnv stands in for the environment when an imported entry is
// checked: every variable is set, home directories to an absolute path.
func importCheckEnv(name string) (string, bool) {
	if name == "HOME" || strings.HasPrefix(name, "XDG_") {
		return "/home/mcp-proxy-import", true
	}
	return "x", true
}

// checkImported parses the entry alone and skips it when it would not load.
func checkImported(s *importedServer) {
	doc := "servers:\n  " + yamlKey(s.name) + ":\n" + strings.Join(s.lines, "\n") + "\n"
	if _, err := Parse([]byte(doc), importCheckEnv); err != nil {
		s.skip = strings.ReplaceAll(err.Error(), "\n", "; ")
	}
}

// jsonScalar reads a JSON string, number or boolean as text.
func jsonScalar(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	case nil:
		return "", true
	}
	return "", false
}

func jsonScalarList(raw json.RawMessage) ([]string, bool) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false
	}
	out := make([]string, len(items))
	if !jsonScalars(slices.All(items), func(i int, v string) { out[i] = v }) {
		return nil, false
	}
	return out, true
}

func jsonScalarMap(raw json.RawMessage) (map[string]string, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, false
	}
	out := make(map[string]string, len(m))
	if !jsonScalars(maps.All(m), func(k string, v string) { out[k] = v }) {
		return nil, false
	}
	return out, true
}

// jsonScalars passes each item of items, read as a scalar (jsonScalar), to
// put with its key; it stops and reports false at the first that is not one.
func jsonScalars[K any](items iter.Seq2[K, json.RawMessage], put func(K, string)) bool {
	for k, item := range items {
		v, ok := jsonScalar(item)
		if !ok {
			return false
		}
		put(k, v)
	}
	return true
}

// ssePath reports whether the path of url (query and fragment aside, a
// trailing "/" ignored) ends in "/sse", the endpoint name of the legacy SSE
// transport.
func ssePath(url string) bool {
	if i := strings.IndexAny(url, "?#"); i >= 0 {
		url = url[:i]
	}
	return strings.HasSuffix(strings.ToLower(strings.TrimSuffix(url, "/")), "/sse")
}
