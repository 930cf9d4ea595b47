package authn

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetadataHandler: the protected resource metadata of each endpoint at
// both well-known forms, byte for byte.
func TestMetadataHandler(t *testing.T) {
	is := newTestIssuer(t, newRSAKey(t, "k1"))
	r := newRig(t, oauthDoc, is.srv.URL)
	h := r.a.MetadataHandler()
	iss := is.srv.URL
	tests := []struct {
		path, want string
		status     int
	}{
		{WellKnownPath + "/mcp", `{"resource":"https://mcp.example.com/mcp","authorization_servers":["` + iss +
			`"],"scopes_supported":["mcp"],"bearer_methods_supported":["header"],"resource_name":"mcp-proxy"}`, 200},
		{WellKnownPath + "/agents/eng/mcp", `{"resource":"https://mcp.example.com/agents/eng/mcp","authorization_servers":["` + iss +
			`"],"scopes_supported":["mcp"],"bearer_methods_supported":["header"],"resource_name":"mcp-proxy agent eng"}`, 200},
		{WellKnownPath, `{"resource":"https://mcp.example.com","authorization_servers":["` + iss +
			`"],"scopes_supported":["mcp"],"bearer_methods_supported":["header"],"resource_name":"mcp-proxy"}`, 200},
		{WellKnownPath + "/agents/nobody/mcp", "", 404},
		{WellKnownPath + "/agents/eng/mcp/x", "", 404},
		{WellKnownPath + "/other", "", 404},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if w.Code != tt.status {
			t.Errorf("%s: status %d, want %d", tt.path, w.Code, tt.status)
			continue
		}
		if tt.status != 200 {
			continue
		}
		if got := w.Body.String(); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.path, got, tt.want)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tt.path, ct)
		}
		if w.Header().Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: no CORS header", tt.path)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, WellKnownPath+"/mcp", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", w.Code)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodOptions, WellKnownPath+"/mcp", nil))
	if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Methods") == "" {
		t.Errorf("OPTIONS: %d %v", w.Code, w.Header())
	}
}

// TestMetadataPublicPath: a public_url with a path (behind a reverse proxy)
// puts that path in the resource and after the well-known prefix.
func TestMetadataPublicPath(t *testing.T) {
	is := newTestIssuer(t, newRSAKey(t, "k1"))
	doc := strings.Replace(oauthDoc, `public_url: "https://mcp.example.com"`, `public_url: "https://example.com/proxy/"`, 1)
	r := newRig(t, doc, is.srv.URL)
	if got := r.a.MetadataURL("eng"); got != "https://example.com/.well-known/oauth-protected-resource/proxy/agents/eng/mcp" {
		t.Errorf("MetadataURL = %s", got)
	}
	if got := r.a.Resource(""); got != "https://example.com/proxy/mcp" {
		t.Errorf("Resource = %s", got)
	}
	w := httptest.NewRecorder()
	r.a.MetadataHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, WellKnownPath+"/proxy/agents/eng/mcp", nil))
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"resource":"https://example.com/proxy/agents/eng/mcp"`) {
		t.Errorf("%d %s", w.Code, w.Body.String())
	}
}

// TestMetadataWithoutOAuth: no listen.auth, no metadata.
func TestMetadataWithoutOAuth(t *testing.T) {
	r := newRig(t, staticDoc, "")
	w := httptest.NewRecorder()
	r.a.MetadataHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, WellKnownPath+"/mcp", nil))
	if w.Code != 404 || r.a.oauth != nil {
		t.Errorf("status %d, OAuth verifier %v", w.Code, r.a.oauth != nil)
	}
}
