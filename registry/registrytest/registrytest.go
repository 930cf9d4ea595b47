// Package registrytest serves a fake MCP Registry over loopback HTTP for
// tests: the /v0.1/servers list (search, version=latest, cursor paging),
// a server's versions, and one version, from server.json documents given
// by the test.
package registrytest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// PageSize is how many servers one list page holds, whatever limit the
// client asks for: small, so that paging is exercised.
const PageSize = 4

// Version is one published version of a server.
type Version struct {
	// Doc is the server.json.
	Doc json.RawMessage
	// Status is active, deprecated or deleted ("" is active).
	Status        string
	StatusMessage string
}

// Registry is a running fake registry.
type Registry struct {
	*httptest.Server

	mu       sync.Mutex
	versions []Version // in publication order
	requests []*http.Request
}

// New starts a registry serving versions (the last version of a name is
// its latest) and stops it when the test ends.
func New(t testing.TB, versions []Version) *Registry {
	r := &Registry{versions: versions}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

// Load reads every *.json file of dir as an active version.
func Load(t testing.TB, dir string) []Version {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no server.json files in %s: %v", dir, err)
	}
	sort.Strings(files)
	var out []Version
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Version{Doc: data})
	}
	return out
}

// Requests returns the requests served so far.
func (r *Registry) Requests() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.requests...)
}

type meta struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

func (v Version) meta() meta {
	var m meta
	_ = json.Unmarshal(v.Doc, &m)
	return m
}

func (r *Registry) latest(i int) bool {
	name := r.versions[i].meta().Name
	for _, v := range r.versions[i+1:] {
		if v.meta().Name == name {
			return false
		}
	}
	return true
}

func (r *Registry) response(i int) map[string]any {
	v := r.versions[i]
	status := v.Status
	if status == "" {
		status = "active"
	}
	official := map[string]any{"status": status, "isLatest": r.latest(i), "publishedAt": "2025-12-01T10:30:00Z"}
	if v.StatusMessage != "" {
		official["statusMessage"] = v.StatusMessage
	}
	return map[string]any{"server": v.Doc, "_meta": map[string]any{"io.modelcontextprotocol.registry/official": official}}
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.Clone(req.Context()))
	r.mu.Unlock()
	var parts []string
	for _, p := range strings.Split(strings.TrimPrefix(req.URL.EscapedPath(), "/"), "/") {
		u, err := url.PathUnescape(p)
		if err != nil {
			http.Error(w, "bad path", http.StatusBadRequest)
			return
		}
		parts = append(parts, u)
	}
	if len(parts) < 2 || parts[0] != "v0.1" || parts[1] != "servers" {
		http.NotFound(w, req)
		return
	}
	q := req.URL.Query()
	deleted := q.Get("include_deleted") == "true"
	switch {
	case len(parts) == 2:
		r.list(w, q)
	case len(parts) == 4 && parts[3] == "versions":
		var out []any
		for i := len(r.versions) - 1; i >= 0; i-- { // newest first
			v := r.versions[i]
			if v.meta().Name == parts[2] && (deleted || v.Status != "deleted") {
				out = append(out, r.response(i))
			}
		}
		if out == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "Server not found"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"servers": out, "metadata": map[string]any{"count": len(out)}})
	case len(parts) == 5 && parts[3] == "versions":
		for i := len(r.versions) - 1; i >= 0; i-- {
			m := r.versions[i].meta()
			if m.Name == parts[2] && (m.Version == parts[4] || parts[4] == "latest" && r.latest(i)) &&
				(deleted || r.versions[i].Status != "deleted") {
				writeJSON(w, http.StatusOK, r.response(i))
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "Server not found"})
	default:
		http.NotFound(w, req)
	}
}

func (r *Registry) list(w http.ResponseWriter, q url.Values) {
	var match []int
	for i, v := range r.versions {
		m := v.meta()
		if q.Get("version") == "latest" && !r.latest(i) {
			continue
		}
		if s := q.Get("search"); s != "" && !strings.Contains(strings.ToLower(m.Name), strings.ToLower(s)) {
			continue
		}
		// Deleted versions are listed, as the registry lists them when
		// asked with updated_since: the client must leave them out.
		match = append(match, i)
	}
	start := 0
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > len(match) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad cursor"})
			return
		}
		start = n
	}
	end := min(start+PageSize, len(match))
	out := []any{}
	for _, i := range match[start:end] {
		out = append(out, r.response(i))
	}
	md := map[string]any{"count": len(out)}
	if end < len(match) {
		md["nextCursor"] = strconv.Itoa(end)
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": out, "metadata": md})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
