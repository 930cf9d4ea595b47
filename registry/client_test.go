package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/registry"
	"github.com/mcp-proxy/mcp-proxy/registry/registrytest"
)

// examples starts a registry serving the example documents, with a
// deprecated and a deleted server and two versions of one.
func examples(t *testing.T) *registrytest.Registry {
	t.Helper()
	versions := registrytest.Load(t, filepath.Join("testdata", "server-json"))
	for i := range versions {
		var m struct{ Name string }
		_ = json.Unmarshal(versions[i].Doc, &m)
		switch m.Name {
		case "io.modelcontextprotocol.anonymous/mcp-fs":
			versions[i].Status, versions[i].StatusMessage = "deprecated", "use io.github.modelcontextprotocol/filesystem"
		case "io.modelcontextprotocol.anonymous/embedded-mcp":
			versions[i].Status = "deleted"
		}
	}
	return registrytest.New(t, versions)
}

func names(entries []registry.Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Server.Name)
	}
	return out
}

// TestSearch: a search follows the cursor through every page, keeps only
// servers matching every term (name, title or description), leaves deleted
// ones out and keeps deprecated ones marked.
func TestSearch(t *testing.T) {
	reg := examples(t)
	c := &registry.Client{BaseURL: reg.URL}
	ctx := context.Background()

	all, err := c.Search(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 19 documents, two of them versions of knapcode, one deleted.
	if len(all) != 17 {
		t.Errorf("search with no terms found %d servers, want 17: %q", len(all), names(all))
	}
	if slices.Contains(names(all), "io.modelcontextprotocol.anonymous/embedded-mcp") {
		t.Errorf("a deleted server is listed")
	}
	pages := 0
	for _, r := range reg.Requests() {
		if r.URL.Path == "/v0.1/servers" {
			pages++
			if r.URL.Query().Get("version") != "latest" {
				t.Errorf("list request without version=latest: %s", r.URL)
			}
		}
	}
	if pages != 5 {
		t.Errorf("%d list requests, want 5 (18 latest versions, %d a page)", pages, registrytest.PageSize)
	}

	got, err := c.Search(ctx, []string{"weather", "python"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"io.github.example/weather-mcp"}; !slices.Equal(names(got), want) {
		t.Errorf("search weather python = %q, want %q", names(got), want)
	}
	fs, err := c.Search(ctx, []string{"fs"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || !fs[0].Deprecated() || fs[0].Official.StatusMessage == "" {
		t.Errorf("search fs = %+v, want the deprecated mcp-fs with its message", fs)
	}
}

// TestGet: a name and version are URL-encoded in the path; "latest" gives
// the last version published; a missing version lists the versions there
// are; an unknown name is ErrNotFound.
func TestGet(t *testing.T) {
	reg := examples(t)
	c := &registry.Client{BaseURL: reg.URL}
	ctx := context.Background()
	name := "io.github.joelverhagen/knapcode-samplemcpserver"

	e, err := c.Get(ctx, name, "")
	if err != nil {
		t.Fatal(err)
	}
	if e.Server.Version != "0.5.0" || !e.Official.IsLatest {
		t.Errorf("latest = %s (isLatest %v), want 0.5.0", e.Server.Version, e.Official.IsLatest)
	}
	old, err := c.Get(ctx, name, "0.4.0-beta")
	if err != nil || old.Server.Version != "0.4.0-beta" {
		t.Fatalf("Get 0.4.0-beta = %v, %v", old, err)
	}
	last := reg.Requests()[len(reg.Requests())-1]
	if want := "/v0.1/servers/io.github.joelverhagen%2Fknapcode-samplemcpserver/versions/0.4.0-beta"; last.URL.EscapedPath() != want {
		t.Errorf("path %s, want %s", last.URL.EscapedPath(), want)
	}

	_, err = c.Get(ctx, name, "9.9.9")
	if !errors.Is(err, registry.ErrNoVersion) {
		t.Fatalf("missing version: %v, want ErrNoVersion", err)
	}
	if want := `no such version: server "io.github.joelverhagen/knapcode-samplemcpserver" has no version "9.9.9"; it has 0.5.0, 0.4.0-beta`; err.Error() != want {
		t.Errorf("error %q\nwant %q", err, want)
	}

	_, err = c.Get(ctx, "io.github.example/wether-mcp", "")
	if !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("unknown name: %v, want ErrNotFound", err)
	}
	if got := c.Suggest(ctx, "io.github.example/wether-mcp", 3); !slices.Equal(got, []string{"io.github.example/weather-mcp"}) {
		t.Errorf("Suggest = %q", got)
	}
}

// TestUnreachable: a registry that cannot be reached, or answers with an
// error status, is ErrUnreachable with the URL tried (without its user
// info) in the text.
func TestUnreachable(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer ts.Close()
	c := &registry.Client{BaseURL: strings.Replace(ts.URL, "http://", "http://user:pw@", 1)}
	_, err := c.Search(context.Background(), []string{"x"})
	if !errors.Is(err, registry.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	want := "registry unreachable: " + ts.URL + "/v0.1/servers?limit=100&search=x&version=latest answered status 503"
	if err.Error() != want {
		t.Errorf("error %q\nwant %q", err, want)
	}

	ts.Close() // nothing listens there now
	_, err = (&registry.Client{BaseURL: ts.URL}).Get(context.Background(), "a.b/c", "")
	if !errors.Is(err, registry.ErrUnreachable) || !strings.Contains(err.Error(), ts.URL+"/v0.1/servers/a.b%2Fc/versions/latest: ") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err = %v, want ErrUnreachable naming the URL and the refusal", err)
	}
}

// TestHeadersOnlyToTheRegistry: the configured headers go with every
// request to the registry's host.
func TestHeadersOnlyToTheRegistry(t *testing.T) {
	reg := examples(t)
	c := &registry.Client{BaseURL: reg.URL, Headers: map[string]string{"Authorization": "Bearer rt-1"}}
	if _, err := c.Get(context.Background(), "io.github.example/weather-mcp", ""); err != nil {
		t.Fatal(err)
	}
	for _, r := range reg.Requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer rt-1" {
			t.Errorf("request %s has Authorization %q", r.URL, got)
		}
	}
}

// TestPackageIndex: the npm and PyPI registries' real documents resolve
// the latest version and check a given one.
func TestPackageIndex(t *testing.T) {
	npmDoc, err := os.ReadFile(filepath.Join("testdata", "npm", "server-everything.json"))
	if err != nil {
		t.Fatal(err)
	}
	pypiDoc, err := os.ReadFile(filepath.Join("testdata", "pypi", "pylev-1.3.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var accept string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/@modelcontextprotocol%2Fserver-everything":
			accept = r.Header.Get("Accept")
			w.Write(npmDoc)
		case "/pypi/pylev/json", "/pypi/pylev/1.3.0/json":
			w.Write(pypiDoc)
		default:
			http.NotFound(w, r)
		}
	}))
	defer ts.Close()
	x := &registry.PackageIndex{NPMURL: ts.URL, PyPIURL: ts.URL}
	ctx := context.Background()
	for _, tc := range []struct {
		name, version, want, err string
		get                      func(context.Context, string, string) (string, error)
	}{
		{"@modelcontextprotocol/server-everything", "", "2026.8.31", "", x.NPMVersion},
		{"@modelcontextprotocol/server-everything", "2025.11.25", "2025.11.25", "", x.NPMVersion},
		{"@modelcontextprotocol/server-everything", "latest", "2026.8.31", "", x.NPMVersion},
		{"@modelcontextprotocol/server-everything", "1.0.0", "", `no such version: npm has no version "1.0.0" of "@modelcontextprotocol/server-everything"`, x.NPMVersion},
		{"@modelcontextprotocol/server-nothing", "", "", `not found: npm has no package "@modelcontextprotocol/server-nothing"`, x.NPMVersion},
		{"Not A Name", "", "", `"Not A Name" is not an npm package name`, x.NPMVersion},
		{"pylev", "", "1.3.0", "", x.PyPIVersion},
		{"pylev", "1.3.0", "1.3.0", "", x.PyPIVersion},
		{"pylev", "2.0", "", `no such version: PyPI has no version "2.0" of "pylev"`, x.PyPIVersion},
		{"pylev", "1.0; rm -rf", "", `"1.0; rm -rf" is not a version`, x.PyPIVersion},
	} {
		got, err := tc.get(ctx, tc.name, tc.version)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s %q: err %v, want %q", tc.name, tc.version, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %q = %q, %v; want %q", tc.name, tc.version, got, err, tc.want)
		}
	}
	if !strings.HasPrefix(accept, "application/vnd.npm.install-v1+json") {
		t.Errorf("npm Accept %q, want the abbreviated document first", accept)
	}
}
