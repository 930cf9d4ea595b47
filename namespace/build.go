package namespace

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// item is one (server, name) during Build.
type item struct {
	route    Route
	prefix   string
	bare     bool   // exposed without a prefix (Input.Prefix == "")
	held     bool   // keeps the name it had in the previous table
	fellBack bool   // bare, but moved to the server-prefixed form
	name     string // current exposed name
	base     string // the exposed name before any hash suffix
	shared   int    // >0: collided with this many others and got a hash suffix
	rename   string // the operator's name for it (Input.Renames); "" for none
	deflt    string // for a renamed item, its name without the rename
	yielded  bool   // gave its name up to a renamed item and got the suffix
	hidden   bool   // never exposed (Input.Hidden)
}

// Build computes the exposed names of every item of inputs in style (""
// means StyleZeroclaw) and returns the table with its warnings, sorted. An
// unknown style is treated as StyleZeroclaw, with a warning. A server that
// appears in several inputs with different prefixes uses the smallest one,
// with a warning. Build never fails: every item gets a unique valid name.
func Build(style Style, inputs []Input) (*Table, []string) {
	return Rebuild(style, inputs, nil)
}

// Rebuild is Build for a catalog that already has names: every item of
// inputs that prev (nil: none) holds keeps its exposed name, hash suffix
// included, so that a tool that appears later never renames one a host has
// seen (docs/agents.md#names). An item holds its name when its base in prev is the name
// it gets now before any suffix (same style, prefix and fallback); the bare
// fallback itself is decided over the whole input as in Build (every bare
// collider falls back). A newcomer whose name is held, or collides with
// another, gets the hash suffix; a holder never does.
func Rebuild(style Style, inputs []Input, prev *Table) (*Table, []string) {
	var warns []string
	if style == "" {
		style = StyleZeroclaw
	} else if !style.Valid() {
		warns = append(warns, "unknown naming style; using zeroclaw")
		style = StyleZeroclaw
	}
	items, more := collect(inputs)
	warns = append(warns, more...)
	for i := range items {
		it := &items[i]
		if it.bare {
			it.name = style.bareName(it.route.Name)
		} else {
			it.name = style.prefixedName(it.prefix, it.route.Name)
		}
		if it.rename != "" {
			// Reserved: never bare, so it never falls back (docs/agents.md#overrides-and-rate-limits).
			it.deflt, it.name, it.bare = it.name, fit(sanitize(it.rename, false)), false
		}
	}
	fallBack(style, items)
	for i := range items {
		items[i].base = items[i].name
		items[i].hold(prev)
	}
	reserve(items)
	addSuffixes(items)
	warns = append(warns, describe(items)...)
	slices.Sort(warns)
	return newTable(items), slices.Compact(warns)
}

// collect merges inputs into items sorted by (server, name), one per pair.
func collect(inputs []Input) ([]item, []string) {
	prefixes := make(map[string]string, len(inputs))
	conflict := make(map[string]bool)
	size := 0
	for _, in := range inputs {
		size += len(in.Names)
		p, seen := prefixes[in.Server]
		switch {
		case !seen:
			prefixes[in.Server] = in.Prefix
		case p != in.Prefix:
			conflict[in.Server] = true
			prefixes[in.Server] = min(p, in.Prefix)
		}
	}
	// A route given twice with two renames takes the smallest, so the
	// result does not depend on the order of inputs.
	renames := map[Route]string{}
	for _, in := range inputs {
		for n, r := range in.Renames {
			rt := Route{Server: in.Server, Name: n}
			if old, ok := renames[rt]; r != "" && (!ok || r < old) {
				renames[rt] = r
			}
		}
	}
	// A route some input hides is hidden, whatever the order of inputs.
	hidden := map[Route]bool{}
	for _, in := range inputs {
		for n, h := range in.Hidden {
			if h {
				hidden[Route{Server: in.Server, Name: n}] = true
			}
		}
	}
	items := make([]item, 0, size)
	for _, in := range inputs {
		p := prefixes[in.Server]
		for _, n := range in.Names {
			rt := Route{Server: in.Server, Name: n}
			items = append(items, item{route: rt, prefix: p, bare: p == "", rename: renames[rt], hidden: hidden[rt]})
		}
	}
	slices.SortFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.route.Server, b.route.Server), cmp.Compare(a.route.Name, b.route.Name))
	})
	items = slices.CompactFunc(items, func(a, b item) bool { return a.route == b.route })
	var warns []string
	for s := range conflict {
		warns = append(warns, fmt.Sprintf("server %s is given with different prefixes; using the first in sort order", quote(s)))
	}
	return items, warns
}

// hold makes it a holder of its name in prev, if prev built that name from
// the base it has now.
func (it *item) hold(prev *Table) {
	e, ok := prev.Entry(it.route.Server, it.route.Name)
	if ok && e.Base == it.base {
		it.held, it.name = true, e.Exposed
	}
}

// reserve gives every renamed item its name, ahead of any holder: a name
// an operator chose is reserved (docs/agents.md#overrides-and-rate-limits), so an item that held it, or
// has it as its own, gets the hash suffix (a reload that adds a rename may
// thus rename a tool a host has seen: the operator asked for the name). Renamed items that share one
// name (config validation refuses that) are left to addSuffixes like any
// colliders.
func reserve(items []item) {
	count := map[string]int{}
	for i := range items {
		if items[i].rename != "" {
			count[items[i].base]++
		}
	}
	if len(count) == 0 {
		return
	}
	for i := range items {
		it := &items[i]
		switch {
		case it.rename != "":
			if count[it.base] == 1 {
				it.held, it.name = true, it.base
			}
		case count[it.name] == 1:
			// It holds or has a reserved name: back to its base, which
			// gets the suffix if it is the reserved name itself.
			it.held, it.name, it.yielded = false, it.base, count[it.base] == 1
		}
	}
}

// fallBack moves every bare item whose name is empty or shared with any other
// item to its server-prefixed form, until no bare item collides. The set of
// moved items is the least fixed point of that rule, so it does not depend on
// the order of work.
func fallBack(style Style, items []item) {
	n := len(items)
	// Each item sits in the list of its first name (slot i) and, once moved,
	// in the list of its fallback name (slot n+i). Lists keep stale slots;
	// an item is a live member of a list when its current name is the key.
	head := make(map[string]int, n) // name -> first slot + 1
	next := make([]int, 2*n)        // slot -> next slot + 1
	link := func(slot int, name string) {
		next[slot] = head[name]
		head[name] = slot + 1
	}
	live := func(name string, visit func(i int)) int {
		count := 0
		for s := head[name]; s != 0; s = next[s-1] {
			if i := (s - 1) % n; items[i].name == name {
				count++
				if visit != nil {
					visit(i)
				}
			}
		}
		return count
	}
	for i := range items {
		link(i, items[i].name)
	}
	var queue []string
	move := func(i int) {
		it := &items[i]
		it.fellBack = true
		it.name = style.prefixedName(it.route.Server, it.route.Name)
		link(n+i, it.name)
		queue = append(queue, it.name)
	}
	for i := range items {
		switch {
		case !items[i].bare:
		case items[i].name == "":
			move(i)
		case next[i] != 0 || head[items[i].name] != i+1:
			queue = append(queue, items[i].name) // not alone in its list
		}
	}
	// A bare item only ever lives under its first name, so once a name has
	// been seen shared and its bare members moved, it needs no more visits:
	// every name is walked in full at most once while shared, which keeps
	// adversarial catalogs linear.
	done := make(map[string]bool)
	var movers []int
	for len(queue) > 0 {
		name := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if done[name] {
			continue
		}
		movers = movers[:0]
		shown := 0 // live members that are exposed
		if live(name, func(i int) {
			if !items[i].hidden {
				shown++
			}
			if items[i].bare && !items[i].fellBack {
				movers = append(movers, i)
			}
		}) < 2 {
			continue
		}
		done[name] = true
		for _, i := range movers {
			// One exposed member keeps the name; hidden ones yield to it.
			if shown != 1 || items[i].hidden {
				move(i)
			}
		}
	}
}

// addSuffixes gives every item whose name is still shared a hash suffix,
// walking items in their sorted order and skipping any name already in use.
// A holder keeps its name (holders never share one), so in a group with a
// holder the others get the suffix.
func addSuffixes(items []item) {
	count := make(map[string]int, len(items))
	for i := range items {
		count[items[i].name]++
	}
	if len(count) == len(items) {
		return
	}
	taken := make(map[string]bool, len(items))
	for i := range items {
		if count[items[i].name] == 1 || items[i].held {
			taken[items[i].name] = true
		}
	}
	for i := range items {
		it := &items[i]
		c := count[it.name]
		if c == 1 || it.held {
			continue
		}
		key := it.route.Server + "\x00" + it.route.Name
		for k := 0; ; k++ {
			text := key
			if k > 0 {
				text += "\x00" + strconv.Itoa(k)
			}
			cand := withSuffix(it.name, shortHash(text))
			if !taken[cand] {
				taken[cand] = true
				it.name = cand
				it.shared = c - 1
				break
			}
		}
	}
}

// newTable builds the table of items, which are in (Server, Name) order.
// The entries are sorted through a slice of indexes, which moves 4 bytes
// per swap instead of an Entry's 96.
func newTable(items []item) *Table {
	order := make([]int32, len(items)) // entry k is items[order[k]]
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(items[a].name, items[b].name) })
	t := &Table{entries: make([]Entry, len(items)), byRoute: make([]int32, len(items))}
	for k, i := range order {
		it := &items[i]
		t.entries[k] = Entry{Exposed: it.name, Base: it.base, Default: it.deflt, Route: it.route}
		t.byRoute[i] = int32(k)
	}
	return t
}
