package namespace

import (
	"cmp"
	"slices"
	"strings"
)

// Input is one server's items of one kind (tools, or prompts: they use the
// same scheme, in separate tables).
type Input struct {
	// Server is the configured server name (1-32 of [A-Za-z0-9_-], no "__";
	// other strings are still handled safely).
	Server string
	// Prefix replaces the server name in exposed names; "" exposes bare
	// names. The caller sets it to the server name when the config has none.
	Prefix string
	// Names are the upstream's own item names, any bytes.
	Names []string
	// Renames gives some of Names the exposed name an operator chose
	// (servers.<s>.tools.overrides.<name>.name, docs/agents.md#overrides-and-rate-limits), by original
	// name. Such a name is reserved: it is not prefixed, never falls back,
	// and an item whose own name equals it gets the hash suffix instead.
	// A rename that is not a valid exposed name is sanitized like any name.
	Renames map[string]string
	// Hidden are the names of Names that are never exposed (dropped by the
	// server's tools.include/exclude, docs/agents.md#the-policy-rules, rule 2). They still get a
	// name, but a bare one yields: where it collides with one exposed
	// item, it falls back and the exposed one keeps the bare name.
	Hidden map[string]bool
}

// Route is what an exposed name stands for.
type Route struct {
	// Server is the configured server name.
	Server string
	// Name is the upstream's original item name.
	Name string
}

// Entry is one row of a Table.
type Entry struct {
	Exposed string
	// Base is Exposed before any hash suffix that a collision added
	// (docs/agents.md#names); policy rules that name Base match the entry (filter.Tool.Base).
	// It equals Exposed for an entry that never collided.
	Base string
	// Default is, for a renamed entry (Input.Renames), the name it would
	// have been exposed under without the rename, before any fallback or
	// suffix; "" for the others. Policy rules that name it still match the
	// entry (filter.Tool.Default).
	Default string
	Route
}

// Table maps exposed names to routes and back. It is immutable once Build
// returns it and safe for concurrent use; a nil *Table is an empty table.
// Both directions are binary searches over one sorted slice of entries:
// the maps they replaced held about 230 KB for a catalog of 2,000 tools,
// every catalog build made them again, and lookups by exposed name serve
// catalog builds and the CLI, not calls (a catalog has its own index).
type Table struct {
	entries []Entry // sorted by Exposed (unique)
	byRoute []int32 // indexes into entries, in (Server, Name) order
}

// find returns the index of the entry of an exposed name.
func (t *Table) find(exposed string) (int, bool) {
	if t == nil {
		return 0, false
	}
	return slices.BinarySearchFunc(t.entries, exposed, func(e Entry, x string) int { return strings.Compare(e.Exposed, x) })
}

// Lookup returns the route of an exposed name.
func (t *Table) Lookup(exposed string) (Route, bool) {
	i, ok := t.find(exposed)
	if !ok {
		return Route{}, false
	}
	return t.entries[i].Route, true
}

// Entry returns the entry of a server's item, given its original name.
func (t *Table) Entry(server, name string) (Entry, bool) {
	if t == nil {
		return Entry{}, false
	}
	j, ok := slices.BinarySearchFunc(t.byRoute, Route{Server: server, Name: name}, func(i int32, r Route) int {
		e := &t.entries[i]
		return cmp.Or(strings.Compare(e.Server, r.Server), strings.Compare(e.Name, r.Name))
	})
	if !ok {
		return Entry{}, false
	}
	return t.entries[t.byRoute[j]], true
}

// Exposed returns the exposed name of a server's item, given its original
// name.
func (t *Table) Exposed(server, name string) (string, bool) {
	e, ok := t.Entry(server, name)
	return e.Exposed, ok
}

// Len is the number of entries.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Routes returns every entry sorted by exposed name. The slice is a copy the
// caller may keep or modify.
func (t *Table) Routes() []Entry {
	if t == nil {
		return nil
	}
	out := make([]Entry, len(t.entries))
	copy(out, t.entries)
	return out
}
