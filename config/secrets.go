package config

import (
	"bytes"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Secrets returns every secret value of c, for scrubbing logs: server env
// values, header values, the password of a URL's user info, agent tokens,
// and the value of every environment variable referenced inside one of
// those (for "Bearer ${TOKEN}", TOKEN's value alone is a secret too). Empty values are left out, duplicates removed, and the longest
// come first, so a scrubber replacing them in order replaces a secret that
// contains another one whole.
func (c *Config) Secrets() []string {
	set := map[string]bool{}
	for _, s := range c.Servers {
		if s == nil {
			continue
		}
		for _, v := range s.Env {
			set[v] = true
		}
		for _, v := range s.Headers {
			set[v] = true
		}
		set[urlPassword(s.URL)] = true
		if s.Auth != nil {
			set[s.Auth.Token] = true
			set[s.Auth.ClientSecret] = true
		}
	}
	for _, a := range c.Agents {
		if a == nil {
			continue
		}
		for _, t := range a.Tokens {
			set[t] = true
		}
	}
	for _, t := range c.Metrics.Tokens {
		set[t] = true
	}
	for _, v := range c.Tracing.Headers {
		set[v] = true
	}
	for _, v := range c.Registry.Headers {
		set[v] = true
	}
	if c.Listen.Auth != nil && c.Listen.Auth.Introspection != nil {
		set[c.Listen.Auth.Introspection.ClientSecret] = true
	}
	set[c.Store.EncryptionKey] = true
	set[urlPassword(c.Store.URL)] = true
	for _, v := range c.doc.secretVars {
		set[v] = true
	}
	return sortSecrets(set)
}

// mergeSecrets combines a sorted secret list with a set of more values.
func mergeSecrets(list []string, more map[string]bool) []string {
	set := make(map[string]bool, len(list)+len(more))
	for _, s := range list {
		set[s] = true
	}
	for s := range more {
		set[s] = true
	}
	return sortSecrets(set)
}

func sortSecrets(set map[string]bool) []string {
	delete(set, "")
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// splitURL cuts a URL into scheme (with "://"), authority, path plus
// query, and fragment, the way net/url does, but without failing on text
// net/url refuses: a URL that does not parse can still hold a password.
func splitURL(raw string) (scheme, authority, rest, fragment string) {
	if i := strings.Index(raw, "://"); i >= 0 {
		scheme, raw = raw[:i+3], raw[i+3:]
	} else {
		return "", "", raw, ""
	}
	if h := strings.IndexByte(raw, '#'); h >= 0 {
		raw, fragment = raw[:h], raw[h:]
	}
	end := strings.IndexAny(raw, "/?")
	if end < 0 {
		end = len(raw)
	}
	return scheme, raw[:end], raw[end:], fragment
}

// urlPassword is the password of a URL's user info, or "".
func urlPassword(raw string) string {
	_, authority, _, _ := splitURL(raw)
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(authority[:at], ":")
	return pw
}

// nodeSecrets finds the same values as Secrets in a node tree that could
// not be decoded, so that its error texts can be scrubbed too.
func nodeSecrets(root *yaml.Node) []string {
	set := map[string]bool{}
	walker := &shapeChecker{present: map[string]bool{}, dropped: map[string]bool{}}
	field := func(m *yaml.Node, key string) *yaml.Node {
		if m == nil {
			return nil
		}
		if m = resolveAlias(m); m.Kind != yaml.MappingNode {
			return nil
		}
		for _, p := range walker.pairs(m, "") {
			if mapKey(p.k) == key {
				return resolveAlias(p.v)
			}
		}
		return nil
	}
	values := func(n *yaml.Node) []*yaml.Node {
		if n == nil {
			return nil
		}
		var out []*yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for _, p := range walker.pairs(n, "") {
				out = append(out, resolveAlias(p.v))
			}
		case yaml.SequenceNode:
			for _, item := range n.Content {
				out = append(out, resolveAlias(item))
			}
		}
		return out
	}
	scalar := func(n *yaml.Node) {
		if n != nil && n.Kind == yaml.ScalarNode {
			set[n.Value] = true
		}
	}
	for _, s := range values(field(root, "servers")) {
		for _, v := range values(field(s, "env")) {
			scalar(v)
		}
		for _, v := range values(field(s, "headers")) {
			scalar(v)
		}
		if u := field(s, "url"); u != nil && u.Kind == yaml.ScalarNode {
			set[urlPassword(u.Value)] = true
		}
		if auth := field(s, "auth"); auth != nil {
			scalar(field(auth, "token"))
			scalar(field(auth, "client_secret"))
		}
	}
	for _, a := range values(field(root, "agents")) {
		for _, t := range values(field(a, "tokens")) {
			scalar(t)
		}
	}
	for _, t := range values(field(field(root, "metrics"), "tokens")) {
		scalar(t)
	}
	for _, v := range values(field(field(root, "tracing"), "headers")) {
		scalar(v)
	}
	for _, v := range values(field(field(root, "registry"), "headers")) {
		scalar(v)
	}
	scalar(field(field(field(field(root, "listen"), "auth"), "introspection"), "client_secret"))
	store := field(root, "store")
	scalar(field(store, "encryption_key"))
	if u := field(store, "url"); u != nil && u.Kind == yaml.ScalarNode {
		set[urlPassword(u.Value)] = true
	}
	return sortSecrets(set)
}

// Redacted returns a deep copy of c in which every env value, header
// value and token is "[REDACTED]", a URL's password and query values are
// "[REDACTED]", and any other text containing a secret value has it
// replaced. c is not modified.
func (c *Config) Redacted() *Config {
	secrets := c.Secrets()
	out := copyScrubbed(reflect.ValueOf(c), secrets).Interface().(*Config)
	out.doc.secretVars = append([]string(nil), c.doc.secretVars...)
	out.doc.agentOrder = append([]string(nil), c.doc.agentOrder...)
	out.doc.serverOrder = append([]string(nil), c.doc.serverOrder...)
	if c.doc.present != nil {
		out.doc.present = make(map[string]bool, len(c.doc.present))
		for k, v := range c.doc.present {
			out.doc.present[k] = v
		}
	}
	for name, s := range out.Servers {
		if s == nil {
			continue
		}
		redactValues(s.Env)
		redactValues(s.Headers)
		s.URL = scrubText(redactURL(c.Servers[name].URL), secrets)
	}
	for _, a := range out.Agents {
		if a == nil {
			continue
		}
		redactList(a.Tokens)
	}
	redactList(out.Metrics.Tokens)
	redactValues(out.Tracing.Headers)
	redactValues(out.Registry.Headers)
	for _, s := range out.Servers {
		if s != nil && s.Auth != nil {
			s.Auth.Token = redactOne(s.Auth.Token)
			s.Auth.ClientSecret = redactOne(s.Auth.ClientSecret)
		}
	}
	if a := out.Listen.Auth; a != nil && a.Introspection != nil {
		a.Introspection.ClientSecret = redactOne(a.Introspection.ClientSecret)
	}
	out.Store.EncryptionKey = redactOne(out.Store.EncryptionKey)
	out.Store.URL = scrubText(redactURL(c.Store.URL), secrets)
	return out
}

// MarshalRedacted renders Redacted() as YAML (the effective configuration,
// defaults included), for printing.
func (c *Config) MarshalRedacted() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c.Redacted()); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// redactList replaces every non-empty entry of l.
func redactList(l []string) {
	for i := range l {
		l[i] = redactOne(l[i])
	}
}

// redactOne is redactedText for a set value, "" for an unset one.
func redactOne(v string) string {
	if v == "" {
		return ""
	}
	return redactedText
}

func redactValues(m map[string]string) {
	for k, v := range m {
		if v != "" {
			m[k] = redactedText
		}
	}
}

// redactURL hides a URL's password and query values.
func redactURL(raw string) string {
	scheme, authority, rest, fragment := splitURL(raw)
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if user, _, ok := strings.Cut(authority[:at], ":"); ok {
			authority = user + ":" + redactedText + authority[at:]
		}
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		parts := strings.Split(rest[q+1:], "&")
		for i, p := range parts {
			if k, v, ok := strings.Cut(p, "="); ok && v != "" {
				parts[i] = k + "=" + redactedText
			}
		}
		rest = rest[:q+1] + strings.Join(parts, "&")
	}
	return scheme + authority + rest + fragment
}

// copyScrubbed deep-copies the exported parts of v, replacing secrets in
// every string. Nil maps, slices and pointers stay nil.
func copyScrubbed(v reflect.Value, secrets []string) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(copyScrubbed(v.Elem(), secrets))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		for i := 0; i < v.NumField(); i++ {
			if out.Field(i).CanSet() {
				out.Field(i).Set(copyScrubbed(v.Field(i), secrets))
			}
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		iter := v.MapRange()
		for iter.Next() {
			out.SetMapIndex(iter.Key(), copyScrubbed(iter.Value(), secrets))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(copyScrubbed(v.Index(i), secrets))
		}
		return out
	case reflect.String:
		out := reflect.New(v.Type()).Elem()
		out.SetString(scrubText(v.String(), secrets))
		return out
	case reflect.Interface:
		// Free-form values (tool override annotations and arguments).
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(copyScrubbed(v.Elem(), secrets))
		return out
	default:
		return v
	}
}
