package oauthclient

import (
	"path/filepath"
	"testing"
	"time"
)

// TestImport: Import copies the entries the destination lacks or holds
// older, keeps newer ones, and copies nothing the second time; Servers
// lists the folder's servers.
func TestImport(t *testing.T) {
	open := func() *Store {
		st, err := OpenStore(filepath.Join(t.TempDir(), "auth"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	src, dst := open(), open()
	now := time.Now().UTC()
	put := func(st *Store, e Entry) {
		t.Helper()
		if err := st.Update("web", func(es []Entry) ([]Entry, error) { return replace(es, e), nil }); err != nil {
			t.Fatal(err)
		}
	}
	put(src, Entry{ServerURL: "https://a.example/mcp", Issuer: "https://as.example", AccessToken: "a-src", Updated: now})
	put(src, Entry{ServerURL: "https://b.example/mcp", Issuer: "https://as.example", AccessToken: "b-src", Updated: now.Add(-time.Hour)})
	put(dst, Entry{ServerURL: "https://b.example/mcp", Issuer: "https://as.example", AccessToken: "b-dst", Updated: now})
	if servers, err := src.Servers(); err != nil || len(servers) != 1 || servers[0] != "web" {
		t.Fatalf("Servers = %v, %v", servers, err)
	}
	for i, want := range []int{1, 0} {
		n, err := dst.Import(src, "web", false)
		if err != nil || n != want {
			t.Fatalf("import %d: %d, %v; want %d", i, n, err, want)
		}
	}
	entries, err := dst.Load("web")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.ServerURL] = e.AccessToken
	}
	if got["https://a.example/mcp"] != "a-src" || got["https://b.example/mcp"] != "b-dst" {
		t.Errorf("after the import: %v", got)
	}
}
