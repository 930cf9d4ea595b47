package namespace

import "testing"

// entryOf is the entry of an exposed name (the zero Entry for a name not
// in tbl), found both ways: Lookup by the name, then Entry by its route.
func entryOf(tbl *Table, exposed string) Entry {
	r, ok := tbl.Lookup(exposed)
	if !ok {
		return Entry{}
	}
	e, ok := tbl.Entry(r.Server, r.Name)
	if !ok || e.Exposed != exposed {
		return Entry{Exposed: "entry by route: " + e.Exposed}
	}
	return e
}

// TestTableSearchesBothWays: every entry is found by its exposed name and
// by its route, with its base and default, in a table with hash suffixes,
// a rename and server names that sort differently from their exposed
// names ("s1" < "s10" but "s10__" < "s1__").
func TestTableSearchesBothWays(t *testing.T) {
	tbl, _ := Build(StyleZeroclaw, []Input{
		{Server: "s1", Prefix: "s1", Names: []string{"b", "a", "c"}, Renames: map[string]string{"c": "renamed"}},
		{Server: "s10", Prefix: "s10", Names: []string{"a", "b"}},
		{Server: "x", Prefix: "", Names: []string{"same"}},
		{Server: "y", Prefix: "", Names: []string{"same"}},
	})
	routes := tbl.Routes()
	if len(routes) != 7 || tbl.Len() != 7 {
		t.Fatalf("%d routes, Len %d: %+v", len(routes), tbl.Len(), routes)
	}
	for i, e := range routes {
		if i > 0 && routes[i-1].Exposed >= e.Exposed {
			t.Fatalf("routes not sorted by exposed name: %+v", routes)
		}
		if got := entryOf(tbl, e.Exposed); got != e {
			t.Errorf("by name %q: %+v, want %+v", e.Exposed, got, e)
		}
		if got, ok := tbl.Exposed(e.Server, e.Name); !ok || got != e.Exposed {
			t.Errorf("Exposed(%q, %q) = %q, %v; want %q", e.Server, e.Name, got, ok, e.Exposed)
		}
	}
	if e := entryOf(tbl, "renamed"); e.Default != "s1__c" || e.Base != "renamed" || e.Route != (Route{"s1", "c"}) {
		t.Errorf("renamed entry %+v", e)
	}
	for _, miss := range []Route{{"s1", "d"}, {"s2", "a"}, {"", ""}, {"s10", "c"}} {
		if e, ok := tbl.Entry(miss.Server, miss.Name); ok {
			t.Errorf("Entry(%+v) found %+v", miss, e)
		}
	}
	if _, ok := tbl.Lookup("s1__zz"); ok {
		t.Error("Lookup found a name not in the table")
	}
	var none *Table
	if _, ok := none.Entry("s1", "a"); ok {
		t.Error("a nil table has an entry")
	}
}
