package config

import (
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Limits of the schema walk. The walk follows aliases, so without a bound a
// small document of nested aliases ("billion laughs") would take
// exponential time; and yaml.v3 checks map keys for duplicates in quadratic
// time, so one mapping may not hold more keys than any real config needs.
const (
	maxShapeVisits = 1 << 17
	maxMappingKeys = 10000
)

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// shapeChecker compares a node tree with the Go types it will be decoded
// into, so that unknown keys, wrong kinds and unparsable scalars are
// reported with their key path (yaml.v3 itself only gives line numbers).
//
// So that one run reports every problem (docs/configuration.md), what it refuses is then
// cut out of the tree (prune): an unknown, duplicate or unusable key goes
// with its value, and a value that cannot be decoded (or whose ${VAR} could
// not be expanded) becomes null. The rest decodes, gets its defaults and is
// validated; dropped records the paths cut, so that no rule judges a value
// that is not the one the author wrote.
type shapeChecker struct {
	expanded map[*yaml.Node]bool
	failed   map[*yaml.Node]bool
	// present holds the path of every key that has a non-null value, so
	// defaults can tell "absent" from an explicit zero.
	present  map[string]bool
	problems []error
	visits   int
	stopped  bool

	dropped map[string]bool // paths of the keys and values cut out
	edits   []func()        // the cuts, applied by prune after the walk
}

// shapeResult is what the schema walk learned.
type shapeResult struct {
	present  map[string]bool
	dropped  map[string]bool
	problems []error
	// complete is false when the walk stopped early (a document too large
	// once its aliases are expanded): the tree was not fully checked and
	// must not be decoded.
	complete bool
}

// checkShape walks root (a mapping) against Config, then prunes what it
// refused from the tree (see shapeChecker).
func checkShape(root *yaml.Node, x *expander) shapeResult {
	c := &shapeChecker{expanded: x.expanded, failed: x.failed, present: map[string]bool{}, dropped: map[string]bool{}}
	c.walk(root, reflect.TypeOf(Config{}), "")
	if c.stopped {
		return shapeResult{problems: c.problems}
	}
	for _, edit := range c.edits {
		edit()
	}
	for p := range c.dropped {
		delete(c.present, p)
	}
	return shapeResult{present: c.present, dropped: c.dropped, problems: c.problems, complete: true}
}

// nullify records that the value n at path is dropped: it becomes null,
// which decodes as the zero value and takes the default.
func (c *shapeChecker) nullify(n *yaml.Node, path string) {
	c.dropped[path] = true
	c.edits = append(c.edits, func() {
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: n.Line, Column: n.Column}
	})
}

// cut records that the key k (with its value) at path is dropped from the
// mapping m that holds it.
func (c *shapeChecker) cut(m, k *yaml.Node, path string) {
	c.dropped[path] = true
	c.edits = append(c.edits, func() {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i] == k {
				m.Content = append(m.Content[:i:i], m.Content[i+2:]...)
				return
			}
		}
	})
}

func (c *shapeChecker) add(path, msg string) {
	c.problems = append(c.problems, problem(path, msg))
}

// count charges one visit and reports whether the walk may go on.
func (c *shapeChecker) count() bool {
	if c.stopped {
		return false
	}
	c.visits++
	if c.visits > maxShapeVisits {
		c.stopped = true
		c.add("", "document too large once its aliases are expanded")
		return false
	}
	return true
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolveAlias(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func (c *shapeChecker) walk(n *yaml.Node, t reflect.Type, path string) {
	if !c.count() {
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			c.add(path, "alias to an unknown anchor")
			c.nullify(n, path)
			return
		}
		n = n.Alias
	}
	if c.failed[n] {
		c.nullify(n, path) // its ${...} problem is reported already
		return
	}
	if isNull(n) {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		c.custom(n, t, path)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		c.structure(n, t, path)
	case reflect.Map:
		c.mapping(n, t, path)
	case reflect.Slice:
		c.list(n, t, path)
	case reflect.Interface:
		// Free-form JSON values (tool override annotations and pinned
		// arguments): any YAML the decoder reads is accepted here, and
		// the feature's validation judges the value.
	default:
		c.scalar(n, t, path)
	}
}

// pair is one key and value of a mapping; merged is true when it came in
// through a "<<" merge key; in is the mapping that holds it.
type pair struct {
	k, v   *yaml.Node
	merged bool
	in     *yaml.Node
}

// pairs lists the entries of mapping n, merged ones after the explicit
// ones (an explicit key overrides a merged one, as in yaml.v3).
func (c *shapeChecker) pairs(n *yaml.Node, path string) []pair {
	var explicit, merged []pair
	c.collect(n, path, false, &explicit, &merged)
	if len(explicit)+len(merged) > maxMappingKeys {
		c.add(path, "more than "+strconv.Itoa(maxMappingKeys)+" keys in one mapping")
		c.nullify(n, path)
		return nil
	}
	seen := map[string]bool{}
	for _, p := range explicit {
		seen[mapKey(p.k)] = true
	}
	out := explicit
	for _, p := range merged {
		if !seen[mapKey(p.k)] {
			out = append(out, p)
		}
	}
	return out
}

func (c *shapeChecker) collect(n *yaml.Node, path string, merging bool, explicit, merged *[]pair) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !c.count() {
			return
		}
		k, v := n.Content[i], n.Content[i+1]
		if !isMergeKey(k) {
			if merging {
				*merged = append(*merged, pair{k, v, true, n})
			} else {
				*explicit = append(*explicit, pair{k, v, false, n})
			}
			continue
		}
		v = resolveAlias(v)
		var sources []*yaml.Node
		switch v.Kind {
		case yaml.MappingNode:
			sources = []*yaml.Node{v}
		case yaml.SequenceNode:
			for _, item := range v.Content {
				sources = append(sources, resolveAlias(item))
			}
		}
		bad := len(sources) == 0
		for _, src := range sources {
			bad = bad || src.Kind != yaml.MappingNode
		}
		if bad {
			// The whole merge goes: yaml.v3 would refuse to decode it.
			c.add(joinPath(path, "<<"), "a merge needs a mapping or a list of mappings")
			c.cut(n, k, joinPath(path, "<<"))
			continue
		}
		for _, src := range sources {
			c.collect(src, path, true, explicit, merged)
		}
	}
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

// mapKey is the string a key decodes to (a null key decodes to "").
func mapKey(k *yaml.Node) string {
	if isNull(k) {
		return ""
	}
	return resolveAlias(k).Value
}

// entries checks the keys of a mapping and returns them with their paths.
func (c *shapeChecker) entries(n *yaml.Node, path string) (keys []string, ps []pair) {
	if n.Kind != yaml.MappingNode {
		c.add(path, "expected a mapping, got "+kindName(n))
		c.nullify(n, path)
		return nil, nil
	}
	firstLine := map[string]int{}
	for _, p := range c.pairs(n, path) {
		if resolveAlias(p.k).Kind != yaml.ScalarNode {
			c.add(path, "keys must be plain strings, got "+kindName(resolveAlias(p.k)))
			c.cut(p.in, p.k, path)
			continue
		}
		key := mapKey(p.k)
		if !p.merged {
			if line, dup := firstLine[key]; dup {
				// The first one stays, unjudged: which did the author mean?
				c.add(joinPath(path, pathKey(key)), "duplicate key (first at line "+strconv.Itoa(line)+")")
				c.cut(p.in, p.k, joinPath(path, pathKey(key)))
				continue
			}
			firstLine[key] = p.k.Line
		}
		keys = append(keys, key)
		ps = append(ps, p)
	}
	return keys, ps
}

func (c *shapeChecker) structure(n *yaml.Node, t reflect.Type, path string) {
	fields := yamlFields(t)
	keys, ps := c.entries(n, path)
	for i, key := range keys {
		p := joinPath(path, pathKey(key))
		ft, ok := fields[key]
		if !ok {
			c.problems = append(c.problems, &FieldError{Path: p, Err: ErrUnknownKey})
			c.cut(ps[i].in, ps[i].k, p)
			continue
		}
		if !isNull(ps[i].v) {
			c.present[p] = true
		}
		c.walk(ps[i].v, ft, p)
	}
}

func (c *shapeChecker) mapping(n *yaml.Node, t reflect.Type, path string) {
	keys, ps := c.entries(n, path)
	for i, key := range keys {
		p := joinPath(path, pathKey(key))
		if !isNull(ps[i].v) {
			c.present[p] = true
		}
		c.walk(ps[i].v, t.Elem(), p)
	}
}

func (c *shapeChecker) list(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.SequenceNode {
		c.add(path, "expected a list, got "+kindName(n))
		c.nullify(n, path)
		return
	}
	for i, item := range n.Content {
		c.walk(item, t.Elem(), indexPath(path, i))
	}
}

func (c *shapeChecker) scalar(n *yaml.Node, t reflect.Type, path string) {
	want := "a string"
	switch t.Kind() {
	case reflect.Bool:
		want = "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "a whole number"
	}
	if n.Kind != yaml.ScalarNode {
		c.add(path, "expected "+want+", got "+kindName(n))
		c.nullify(n, path)
		return
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		c.add(path, "expected "+want+", got "+c.shown(n))
		c.nullify(n, path)
	}
}

func (c *shapeChecker) custom(n *yaml.Node, t reflect.Type, path string) {
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return
	}
	c.nullify(n, path)
	if c.expanded[n] {
		c.add(path, "invalid value (it comes from the environment and is not shown)")
		return
	}
	c.add(path, err.Error())
}

// maxShownValue bounds how much of a bad value a message quotes.
const maxShownValue = 40

// shown quotes a bad scalar for a message, unless it came from the
// environment (it may be a secret).
func (c *shapeChecker) shown(n *yaml.Node) string {
	if c.expanded[n] {
		return "a value from the environment (not shown)"
	}
	return quoteValue(n.Value)
}

func quoteValue(s string) string {
	if utf8.RuneCountInString(s) > maxShownValue {
		r := []rune(s)
		s = string(r[:maxShownValue]) + "..."
	}
	return strconv.Quote(s)
}

// yamlFields maps the yaml key of every decoded field of struct t to its type.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		if name, ok := fieldKey(t.Field(i)); ok {
			out[name] = t.Field(i).Type
		}
	}
	return out
}

// fieldKey is the yaml key of struct field f as yaml.v3 reads it (the tag's
// name, else the lower-cased field name); ok is false for a field that is
// not decoded (unexported, or tagged "-").
func fieldKey(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return "", false
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, true
}
