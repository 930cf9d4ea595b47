package authn

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// WellKnownPath is the root of the protected resource metadata URLs
// (RFC 9728 §3). The front mounts MetadataHandler on it and on everything
// under it (WellKnownPath + "/").
const WellKnownPath = "/.well-known/oauth-protected-resource"

// metadataMaxAge lets clients and caches keep the metadata for a while; it
// changes only with the config.
const metadataMaxAge = "300"

// endpointPath is the path of an MCP endpoint: listen.path for pathAgent
// "", else /agents/<pathAgent>/mcp.
func (a *Authenticator) endpointPath(pathAgent string) string {
	if pathAgent == "" {
		return a.path
	}
	return "/agents/" + pathAgent + "/mcp"
}

// Resource is the resource identifier of an MCP endpoint (pathAgent "" is
// the default endpoint): the public URL followed by the endpoint's path.
func (a *Authenticator) Resource(pathAgent string) string {
	return a.public + a.endpointPath(pathAgent)
}

// MetadataURL is where the endpoint's protected resource metadata is
// served: the well-known path inserted between the public URL's host and
// the resource's path (RFC 9728 §3.1).
func (a *Authenticator) MetadataURL(pathAgent string) string {
	origin := strings.TrimSuffix(a.public, a.publicPath)
	return origin + WellKnownPath + a.publicPath + a.endpointPath(pathAgent)
}

// audiences are the aud values a token must name one of to be used at an
// endpoint: listen.auth.audience when set, else the endpoint's resource or
// the bare public URL (docs/security.md#oauth-on-the-http-listener).
func (a *Authenticator) audiences(pathAgent string) []string {
	if aud := a.cfg.Listen.Auth.Audience; aud != "" {
		return []string{aud}
	}
	return []string{a.Resource(pathAgent), a.public}
}

// MetadataHandler serves the protected resource metadata of the listener
// under WellKnownPath: WellKnownPath + <public path> + <endpoint path> for
// each endpoint (listen.path and /agents/<a>/mcp of every agent), and
// WellKnownPath (+ <public path>) alone for the bare public URL, which a
// token's aud may name too. Anything else under WellKnownPath is 404, and
// so is everything when listen.auth is not set. GET and HEAD only (OPTIONS
// answers a CORS preflight: browser-based clients read the metadata across
// origins).
func (a *Authenticator) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.oauth == nil {
			http.NotFound(w, r)
			return
		}
		resource, name, ok := a.resourceAt(r.URL.Path)
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, MCP-Protocol-Version")
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		// The protected resource metadata document (RFC 9728 §2), in the
		// SDK's type that oauthclient decodes it with: its two lists always
		// hold a value here, so their omitempty never drops them.
		body, err := json.Marshal(oauthex.ProtectedResourceMetadata{
			Resource:               resource,
			AuthorizationServers:   []string{a.cfg.Listen.Auth.Issuer},
			ScopesSupported:        a.oauth.required,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           name,
		})
		if err != nil {
			http.Error(w, "cannot encode metadata", http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "public, max-age="+metadataMaxAge)
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}

// resourceAt maps a metadata request path to its resource and a name for
// people; ok is false for paths that name no endpoint.
func (a *Authenticator) resourceAt(path string) (resource, name string, ok bool) {
	rest, found := strings.CutPrefix(path, WellKnownPath)
	if !found {
		return "", "", false
	}
	if rest == "" || rest == "/" || rest == a.publicPath || rest == a.publicPath+"/" {
		return a.public, "mcp-proxy", true
	}
	rest, found = strings.CutPrefix(rest, a.publicPath)
	if !found {
		return "", "", false
	}
	if rest == a.path {
		return a.Resource(""), "mcp-proxy", true
	}
	agent, found := strings.CutPrefix(rest, "/agents/")
	if !found {
		return "", "", false
	}
	agent, found = strings.CutSuffix(agent, "/mcp")
	if !found || agent == "" || strings.Contains(agent, "/") || a.agentConfig(agent) == nil {
		return "", "", false
	}
	return a.Resource(agent), "mcp-proxy agent " + agent, true
}
