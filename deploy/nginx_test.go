package deploy

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

const nginxPath = "nginx/mcp-proxy.conf"

// directive is one nginx directive: its name, arguments and, for block
// directives (upstream, map, server, location), the directives inside.
type directive struct {
	name  string
	args  []string
	block []*directive
	line  int
}

// parseNginx reads nginx's config syntax: words and quoted strings,
// directives ended by ';', blocks in braces, '#' comments.
func parseNginx(text string) ([]*directive, error) {
	type frame struct{ list []*directive }
	stack := []*frame{{}}
	var words []string
	wordLine, line := 0, 1
	i := 0
	flushWord := func(w string) {
		if len(words) == 0 {
			wordLine = line
		}
		words = append(words, w)
	}
	for i < len(text) {
		c := text[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			var b strings.Builder
			start := line
			i++
			for i < len(text) && text[i] != c {
				if text[i] == '\\' && i+1 < len(text) {
					i++
					if text[i] != c {
						b.WriteByte('\\')
					}
				}
				if text[i] == '\n' {
					line++
				}
				b.WriteByte(text[i])
				i++
			}
			if i == len(text) {
				return nil, fmt.Errorf("line %d: unterminated quoted string", start)
			}
			i++
			flushWord(b.String())
		case c == ';':
			if len(words) == 0 {
				return nil, fmt.Errorf("line %d: empty directive", line)
			}
			top := stack[len(stack)-1]
			top.list = append(top.list, &directive{name: words[0], args: words[1:], line: wordLine})
			words = nil
			i++
		case c == '{':
			if len(words) == 0 {
				return nil, fmt.Errorf("line %d: block without a directive", line)
			}
			top := stack[len(stack)-1]
			top.list = append(top.list, &directive{name: words[0], args: words[1:], line: wordLine})
			words = nil
			stack = append(stack, &frame{})
			i++
		case c == '}':
			if len(words) > 0 || len(stack) == 1 {
				return nil, fmt.Errorf("line %d: unexpected '}'", line)
			}
			done := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			parent := stack[len(stack)-1]
			parent.list[len(parent.list)-1].block = done.list
			i++
		default:
			j := i
			for j < len(text) && !strings.ContainsRune(" \t\r\n;{}#\"'", rune(text[j])) {
				j++
			}
			flushWord(text[i:j])
			i = j
		}
	}
	if len(words) > 0 || len(stack) != 1 {
		return nil, fmt.Errorf("unexpected end of file (unclosed block or directive)")
	}
	return stack[0].list, nil
}

// find returns the directives named name in list.
func find(list []*directive, name string) []*directive {
	var out []*directive
	for _, d := range list {
		if d.name == name {
			out = append(out, d)
		}
	}
	return out
}

// nginxMap is a map block: exact sources, regexes in order, a default.
type nginxMap struct {
	exact  map[string]string
	re     []*regexp.Regexp
	reVal  []string
	defVal string
}

func newNginxMap(d *directive) (*nginxMap, error) {
	m := &nginxMap{exact: map[string]string{}}
	for _, e := range d.block {
		if len(e.args) != 1 {
			return nil, fmt.Errorf("line %d: map entry %q wants one value", e.line, e.name)
		}
		switch {
		case e.name == "default":
			m.defVal = e.args[0]
		case strings.HasPrefix(e.name, "~*"):
			re, err := regexp.Compile("(?i)" + e.name[2:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", e.line, err)
			}
			m.re, m.reVal = append(m.re, re), append(m.reVal, e.args[0])
		case strings.HasPrefix(e.name, "~"):
			re, err := regexp.Compile(e.name[1:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", e.line, err)
			}
			m.re, m.reVal = append(m.re, re), append(m.reVal, e.args[0])
		default:
			m.exact[e.name] = e.args[0]
		}
	}
	return m, nil
}

// eval maps src as nginx would: exact match, then the first matching
// regex (its named captures become variables), then the default. The
// value's $variables are filled from vars and the captures.
func (m *nginxMap) eval(src string, vars map[string]string) string {
	if v, ok := m.exact[src]; ok {
		return expandVars(v, vars)
	}
	for i, re := range m.re {
		sub := re.FindStringSubmatch(src)
		if sub == nil {
			continue
		}
		all := map[string]string{}
		for k, v := range vars {
			all[k] = v
		}
		for j, name := range re.SubexpNames() {
			if name != "" {
				all[name] = sub[j]
			}
		}
		return expandVars(m.reVal[i], all)
	}
	return expandVars(m.defVal, vars)
}

var varRef = regexp.MustCompile(`\$\{?([A-Za-z0-9_]+)\}?`)

func expandVars(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		return vars[varRef.FindStringSubmatch(ref)[1]]
	})
}

// nginxSeconds reads an nginx time ("3600s", "60m", "1h", "600").
func nginxSeconds(s string) (time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}
	d, ok := units[s[len(s)-1]]
	num := s
	if ok {
		num = s[:len(s)-1]
	} else {
		d = time.Second
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, fmt.Errorf("time %q: %w", s, err)
	}
	return time.Duration(n) * d, nil
}

// nginxBytes reads an nginx size ("32m", "1g", "512k", "1024").
func nginxBytes(s string) (int64, error) {
	mult := map[byte]int64{'k': 1 << 10, 'K': 1 << 10, 'm': 1 << 20, 'M': 1 << 20, 'g': 1 << 30, 'G': 1 << 30}
	m, ok := mult[s[len(s)-1]]
	num := s
	if ok {
		num = s[:len(s)-1]
	} else {
		m = 1
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	return n * m, nil
}

// Names of the example's upstreams and variables.
const (
	anyUpstream   = "mcp_proxy_any"
	pinnedPrefix  = "mcp_proxy_r"
	backendVar    = "$mcp_proxy_backend"
	sessionInVar  = "$mcp_proxy_session_in"
	tagVar        = "$mcp_proxy_tag"
	sessionOutVar = "$mcp_proxy_session_out"
)

func TestNginxConfig(t *testing.T) {
	data, err := os.ReadFile(nginxPath)
	if err != nil {
		t.Fatal(err)
	}
	top, err := parseNginx(string(data))
	if err != nil {
		t.Fatalf("%s: %v", nginxPath, err)
	}

	// Upstreams: one pool, and per replica a pinned group whose primary is
	// the replica and whose backups answer 404 for it when it is down.
	var pool []string
	pinned := map[string]string{} // tag (r1) -> replica address
	for _, u := range find(top, "upstream") {
		if len(u.args) != 1 {
			t.Fatalf("line %d: upstream wants one name", u.line)
		}
		var primary, backups []string
		for _, s := range find(u.block, "server") {
			if len(s.args) == 0 {
				t.Fatalf("line %d: server without an address", s.line)
			}
			if strings.Contains(" "+strings.Join(s.args[1:], " ")+" ", " backup ") {
				backups = append(backups, s.args[0])
			} else {
				primary = append(primary, s.args[0])
			}
		}
		switch name := u.args[0]; {
		case name == anyUpstream:
			pool = primary
			if len(backups) > 0 {
				t.Errorf("%s has backup servers; every replica may take a new session", anyUpstream)
			}
		case strings.HasPrefix(name, pinnedPrefix):
			if len(primary) != 1 || len(backups) == 0 {
				t.Errorf("%s: want one primary server (its replica) and backups, got %q and %q", name, primary, backups)
				continue
			}
			pinned[strings.TrimPrefix(name, "mcp_proxy_")] = primary[0]
		default:
			t.Errorf("unexpected upstream %s", name)
		}
	}
	var pinnedAddrs []string
	for _, a := range pinned {
		pinnedAddrs = append(pinnedAddrs, a)
	}
	sort.Strings(pool)
	sort.Strings(pinnedAddrs)
	if len(pool) < 2 || strings.Join(pool, " ") != strings.Join(pinnedAddrs, " ") {
		t.Fatalf("%s lists %q but the pinned upstreams are for %q: want the same replicas, at least two", anyUpstream, pool, pinnedAddrs)
	}

	maps := map[string]*nginxMap{}
	for _, d := range find(top, "map") {
		if len(d.args) != 2 {
			t.Fatalf("line %d: map wants a source and a variable", d.line)
		}
		m, err := newNginxMap(d)
		if err != nil {
			t.Fatal(err)
		}
		maps[d.args[1]] = m
	}
	for _, v := range []string{backendVar, sessionInVar, tagVar, sessionOutVar} {
		if maps[v] == nil {
			t.Fatalf("no map defines %s", v)
		}
	}

	// Walk one session per replica through the maps: the replica's answer
	// gets tagged, the tagged id routes back to the replica's pinned group,
	// and the replica gets its own id back.
	const replicaID = "mcp-proxy-0123456789abcdef0123456789abcdef"
	for tag, addr := range pinned {
		upstreamAddr := addr
		if other := otherThan(pool, addr); other != "" {
			upstreamAddr = other + ", " + addr // nginx tried another server first
		}
		gotTag := maps[tagVar].eval(upstreamAddr, nil)
		if gotTag != tag {
			t.Errorf("%s for $upstream_addr %q = %q, want %q", tagVar, upstreamAddr, gotTag, tag)
			continue
		}
		out := maps[sessionOutVar].eval(gotTag+"/"+replicaID, map[string]string{})
		if !strings.HasPrefix(out, replicaID) || out == replicaID {
			t.Errorf("%s = %q: want the replica's id %q plus a tag", sessionOutVar, out, replicaID)
			continue
		}
		vars := map[string]string{"http_mcp_session_id": out}
		if b := maps[backendVar].eval(out, vars); b != "mcp_proxy_"+tag {
			t.Errorf("%s for session %q = %q, want mcp_proxy_%s", backendVar, out, b, tag)
		}
		if in := maps[sessionInVar].eval(out, vars); in != replicaID {
			t.Errorf("%s for session %q = %q, want the replica's own id %q", sessionInVar, out, in, replicaID)
		}
	}
	if got := maps[sessionOutVar].eval("/", map[string]string{}); got != "" {
		t.Errorf("%s with no replica id = %q, want empty (no header)", sessionOutVar, got)
	}
	if got := maps[backendVar].eval("", nil); got != anyUpstream {
		t.Errorf("%s without a session id = %q, want %s (initialize goes to any replica)", backendVar, got, anyUpstream)
	}
	if got := maps[sessionInVar].eval("foreign-id", map[string]string{"http_mcp_session_id": "foreign-id"}); got != "foreign-id" {
		t.Errorf("%s for an untagged id = %q, want it unchanged", sessionInVar, got)
	}

	servers := find(top, "server")
	if len(servers) != 1 {
		t.Fatalf("want one server block, got %d", len(servers))
	}
	locs := find(servers[0].block, "location")
	if len(locs) != 1 {
		t.Fatalf("want one location, got %d", len(locs))
	}
	loc := locs[0].block
	one := func(name string) []string {
		t.Helper()
		ds := find(loc, name)
		if len(ds) != 1 {
			t.Fatalf("location has %d %s directives, want 1", len(ds), name)
		}
		return ds[0].args
	}
	if a := one("proxy_pass"); len(a) != 1 || a[0] != "http://"+backendVar {
		t.Errorf("proxy_pass %q, want http://%s", a, backendVar)
	}
	if a := one("proxy_buffering"); a[0] != "off" {
		t.Errorf("proxy_buffering %s: SSE events must not wait in nginx's buffers", a[0])
	}
	if a := one("proxy_http_version"); a[0] != "1.1" {
		t.Errorf("proxy_http_version %s, want 1.1 (streamed responses, keepalive)", a[0])
	}
	rt, err := nginxSeconds(one("proxy_read_timeout")[0])
	if err != nil {
		t.Fatal(err)
	}
	if rt < 600*time.Second {
		t.Errorf("proxy_read_timeout %s is below the proxy's longest tool timeout (600s)", rt)
	}
	size, err := nginxBytes(one("client_max_body_size")[0])
	if err != nil {
		t.Fatal(err)
	}
	if size < 32<<20 {
		t.Errorf("client_max_body_size %d is below the proxy's 32 MiB request limit", size)
	}
	setHeaders := map[string]string{}
	for _, d := range find(loc, "proxy_set_header") {
		if len(d.args) != 2 {
			t.Fatalf("line %d: proxy_set_header wants a name and a value", d.line)
		}
		setHeaders[strings.ToLower(d.args[0])] = d.args[1]
	}
	if v := setHeaders["mcp-session-id"]; v != sessionInVar {
		t.Errorf("proxy_set_header Mcp-Session-Id %q, want %s (the tag removed)", v, sessionInVar)
	}
	if v, ok := setHeaders["mcp-protocol-version"]; ok && v != "$http_mcp_protocol_version" {
		t.Errorf("proxy_set_header MCP-Protocol-Version %q drops the client's header", v)
	}
	if setHeaders["connection"] != "" {
		t.Errorf("proxy_set_header Connection %q, want \"\" (keepalive to the replicas)", setHeaders["connection"])
	}
	if loopbackOnly(pool) {
		host, _, err := net.SplitHostPort(setHeaders["host"] + ":0")
		if err != nil || (host != "localhost" && !isLoopbackIP(host)) {
			t.Errorf("proxy_set_header Host %q: replicas on loopback refuse a non-loopback Host", setHeaders["host"])
		}
	}
	if a := one("proxy_hide_header"); a[0] != "Mcp-Session-Id" {
		t.Errorf("proxy_hide_header %s, want Mcp-Session-Id (nginx sends the tagged id instead)", a[0])
	}
	if a := one("add_header"); len(a) != 3 || a[0] != "Mcp-Session-Id" || a[1] != sessionOutVar || a[2] != "always" {
		t.Errorf("add_header %q, want Mcp-Session-Id %s always", a, sessionOutVar)
	}
}

func otherThan(list []string, s string) string {
	for _, x := range list {
		if x != s {
			return x
		}
	}
	return ""
}

func loopbackOnly(addrs []string) bool {
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil || !isLoopbackIP(host) {
			return false
		}
	}
	return true
}

func isLoopbackIP(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && ip.IsLoopback()
}

func TestParseNginx(t *testing.T) {
	ds, err := parseNginx("a 1 \"two words\"; # c\nb { c 'x;y'; d { e; } }\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].name != "a" || len(ds[0].args) != 2 || ds[0].args[1] != "two words" {
		t.Fatalf("parsed %+v", ds)
	}
	if b := ds[1]; len(b.block) != 2 || b.block[0].args[0] != "x;y" || len(b.block[1].block) != 1 || b.block[1].block[0].name != "e" {
		t.Fatalf("parsed block %+v", ds[1].block)
	}
	for _, bad := range []string{"a", "a {", "}", "a \"b;", ";", "a { b }"} {
		if _, err := parseNginx(bad); err == nil {
			t.Errorf("parseNginx(%q) succeeded, want an error", bad)
		}
	}
}
