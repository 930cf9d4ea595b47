package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
	"github.com/mcp-proxy/mcp-proxy/internal/httpjson"
)

// maxMetadataBytes bounds a metadata document or token response read from
// the network (RFC 8414 documents are a few KiB).
const maxMetadataBytes = 1 << 20

// drainBytes is how much of a refused or unwanted response's body is read
// and dropped before it is closed, so the connection can be reused; a
// longer body costs a new connection rather than the time to read it.
const drainBytes = 4 << 10

// Metadata is what discovery learned about a server's authorization.
type Metadata struct {
	// Resource is the RFC 8707 resource indicator: the protected resource
	// metadata's resource exactly as written when it has one (it passed
	// resourceCovers), else the canonical server URL.
	Resource string
	// ScopesSupported are the protected resource metadata's scopes.
	ScopesSupported []string
	// Issuer and the endpoints come from the authorization server's
	// metadata, or from the 2025-03-26 defaults (Legacy).
	Issuer string
	// ResponseIssuer is the issuer an authorization response's iss must
	// name, exactly (RFC 9207 §2.4): the metadata's issuer as written, or
	// Issuer when the metadata names none (2025-03-26 defaults).
	ResponseIssuer string
	// ResponseIssRequired is the metadata's
	// authorization_response_iss_parameter_supported: a response without
	// iss is refused.
	ResponseIssRequired   bool
	AuthorizationEndpoint string
	TokenEndpoint         string
	RegistrationEndpoint  string
	// ASScopesSupported is the authorization server's scopes_supported.
	ASScopesSupported []string
	// TokenAuthMethods is token_endpoint_auth_methods_supported.
	TokenAuthMethods []string
	// CIMDSupported is client_id_metadata_document_supported.
	CIMDSupported bool
	// PKCE: code_challenge_methods_supported lists S256 (assumed for the
	// 2025-03-26 default endpoints).
	PKCE bool
	// Legacy says how a server without resource metadata was handled:
	// "" (it has some), "origin-metadata" or "default-endpoints".
	Legacy string
}

// fetchJSON GETs a metadata document into out. found is false, with no
// error, when the URL answered 404 or another 4xx (the caller tries its
// next candidate); an unreachable host, a 5xx, or a 200 that is not one
// JSON object is an error naming the URL (without its query).
func fetchJSON(ctx context.Context, hc *http.Client, what, rawURL string, out any) (found bool, err error) {
	status, err := httpjson.Get(ctx, hc, rawURL, httpjson.Limits{Body: maxMetadataBytes, Drain: drainBytes}, out)
	var e *httpjson.Error
	switch {
	case err == nil:
		return true, nil
	case status >= 400 && status < 500:
		return false, nil
	case !errors.As(err, &e):
		return false, err
	}
	u := redactURL(rawURL)
	switch e.Kind {
	case httpjson.Request:
		return false, fmt.Errorf("%s URL %s: %w", what, u, e.Err)
	case httpjson.Send:
		return false, fmt.Errorf("%s: GET %s: %w", what, u, unwrapURLError(e.Err))
	case httpjson.Status:
		return false, fmt.Errorf("%s: GET %s answered HTTP %d", what, u, status)
	case httpjson.Read:
		return false, fmt.Errorf("%s: GET %s: reading the body: %w", what, u, e.Err)
	case httpjson.TooLarge:
		return false, fmt.Errorf("%s at %s is larger than %d bytes", what, u, e.Limit)
	}
	return false, fmt.Errorf("%s at %s is not a JSON object", what, u)
}

// unwrapURLError drops the *url.Error wrapper, whose text repeats the URL
// with its query.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// discover finds the authorization server of the server at serverURL
// (canonical) from its 401 challenge ch, in the order of the MCP
// authorization specification.
func discover(ctx context.Context, hc *http.Client, serverURL string, ch Challenge) (*Metadata, error) {
	md := &Metadata{Resource: serverURL}
	prm, err := fetchResourceMetadata(ctx, hc, serverURL, ch)
	if err != nil {
		return nil, err
	}
	if prm == nil {
		return legacyMetadata(ctx, hc, serverURL, md)
	}
	if prm.Resource != "" {
		md.Resource = prm.Resource
	}
	md.ScopesSupported = splitScopes(strings.Join(prm.ScopesSupported, " "))
	if len(prm.AuthorizationServers) == 0 {
		return nil, errors.New("protected resource metadata names no authorization server")
	}
	issuer := prm.AuthorizationServers[0]
	if err := checkEndpoint(serverURL, "authorization_servers[0]", issuer, true); err != nil {
		return nil, err
	}
	asm, err := fetchServerMetadata(ctx, hc, issuer)
	if err != nil {
		return nil, err
	}
	if asm == nil {
		return nil, fmt.Errorf("authorization server %s publishes no metadata (RFC 8414 or OpenID discovery)", redactURL(issuer))
	}
	if !SameIssuer(asm.Issuer, issuer) {
		return nil, fmt.Errorf("%w: asked %s, the metadata says %q", ErrIssuerMismatch, redactURL(issuer), cut(asm.Issuer, 200))
	}
	if err := fill(md, serverURL, asm); err != nil {
		return nil, err
	}
	md.Issuer = issuer
	md.ResponseIssuer = asm.Issuer
	return md, nil
}

// fetchResourceMetadata tries the challenge's resource_metadata URL, then
// the well-known URI at the server's path, then at its root. nil, nil
// means none answered (a 2025-03-26 server). A document whose resource
// does not cover the server is refused (RFC 9728 §3.3: its content must
// not be used); one without a resource stands for the server's URL.
func fetchResourceMetadata(ctx context.Context, hc *http.Client, serverURL string, ch Challenge) (*oauthex.ProtectedResourceMetadata, error) {
	su, err := url.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	var candidates []string
	if ch.ResourceMetadata != "" {
		if err := checkEndpoint(serverURL, "resource_metadata", ch.ResourceMetadata, true); err != nil {
			return nil, err
		}
		candidates = append(candidates, ch.ResourceMetadata)
	}
	const wellKnown = "/.well-known/oauth-protected-resource"
	if p := strings.TrimSuffix(su.EscapedPath(), "/"); p != "" {
		candidates = append(candidates, originOf(su)+wellKnown+p)
	}
	candidates = append(candidates, originOf(su)+wellKnown)
	for _, c := range candidates {
		var prm oauthex.ProtectedResourceMetadata
		found, err := fetchJSON(ctx, hc, "protected resource metadata", c, &prm)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		if prm.Resource != "" && !resourceCovers(prm.Resource, serverURL) {
			return nil, fmt.Errorf("%w: %s says resource %q, the server is %s", ErrResourceMismatch, redactURL(c), cut(prm.Resource, 200), serverURL)
		}
		return &prm, nil
	}
	return nil, nil
}

// fetchServerMetadata reads RFC 8414 metadata, then OpenID discovery, in
// the path-inserted forms for an issuer with a path (and OpenID's
// path-appended form), else at the root. nil, nil: none answered.
func fetchServerMetadata(ctx context.Context, hc *http.Client, issuer string) (*oauthex.AuthServerMeta, error) {
	for _, u := range ServerMetadataURLs(issuer) {
		var asm oauthex.AuthServerMeta
		found, err := fetchJSON(ctx, hc, "authorization server metadata", u, &asm)
		if err != nil {
			return nil, err
		}
		if found {
			return &asm, nil
		}
	}
	return nil, nil
}

// ServerMetadataURLs lists the metadata URLs of issuer in the order the
// MCP specification (2025-11-25) gives: OAuth 2.0 authorization server
// metadata (RFC 8414) with the path inserted, then OpenID Connect
// discovery inserted and appended; an issuer without a path has two. The
// proxy's resource server side (authn) finds an issuer's jwks_uri there.
func ServerMetadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	origin := originOf(u)
	path := strings.Trim(u.EscapedPath(), "/")
	if path == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server/" + path,
		origin + "/.well-known/openid-configuration/" + path,
		origin + "/" + path + "/.well-known/openid-configuration",
	}
}

// legacyMetadata handles a server without protected resource metadata, as
// the 2025-03-26 specification did: the authorization server is the
// server's origin; its RFC 8414 metadata, else the default endpoints.
func legacyMetadata(ctx context.Context, hc *http.Client, serverURL string, md *Metadata) (*Metadata, error) {
	su, _ := url.Parse(serverURL)
	origin := originOf(su)
	var asm oauthex.AuthServerMeta
	found, err := fetchJSON(ctx, hc, "authorization server metadata", origin+"/.well-known/oauth-authorization-server", &asm)
	if err != nil {
		return nil, err
	}
	if !found {
		md.Legacy = "default-endpoints"
		md.Issuer, md.ResponseIssuer = origin, origin
		md.AuthorizationEndpoint = origin + "/authorize"
		md.TokenEndpoint = origin + "/token"
		md.RegistrationEndpoint = origin + "/register"
		md.PKCE = true
		return md, nil
	}
	md.Legacy = "origin-metadata"
	// The 2025-03-26 servers publish their metadata at the origin whatever
	// their issuer's path: the issuer is held to the server's origin only.
	md.Issuer = origin
	if asm.Issuer != "" {
		iu, err := url.Parse(asm.Issuer)
		if err != nil || originOf(iu) != origin {
			return nil, fmt.Errorf("%w: the metadata at %s names issuer %q, not of the server's origin", ErrIssuerMismatch, origin, cut(asm.Issuer, 200))
		}
		md.Issuer = asm.Issuer
	}
	if err := fill(md, serverURL, &asm); err != nil {
		return nil, err
	}
	md.ResponseIssuer = md.Issuer
	return md, nil
}

// fill copies and checks the endpoints of asm. Only the token endpoint is
// required here: a login needs the authorization endpoint and PKCE too
// (checked there), a client_credentials grant does not.
func fill(md *Metadata, serverURL string, asm *oauthex.AuthServerMeta) error {
	md.PKCE = contains(asm.CodeChallengeMethodsSupported, "S256")
	for _, e := range []struct {
		name, value string
		required    bool
	}{
		{"authorization_endpoint", asm.AuthorizationEndpoint, false},
		{"token_endpoint", asm.TokenEndpoint, true},
		{"registration_endpoint", asm.RegistrationEndpoint, false},
	} {
		if e.value == "" && !e.required {
			continue
		}
		if err := checkEndpoint(serverURL, e.name, e.value, e.required); err != nil {
			return err
		}
	}
	md.AuthorizationEndpoint = asm.AuthorizationEndpoint
	md.TokenEndpoint = asm.TokenEndpoint
	md.RegistrationEndpoint = asm.RegistrationEndpoint
	md.ASScopesSupported = splitScopes(strings.Join(asm.ScopesSupported, " "))
	md.TokenAuthMethods = asm.TokenEndpointAuthMethodsSupported
	md.CIMDSupported = asm.ClientIDMetadataDocumentSupported
	md.ResponseIssRequired = asm.AuthorizationResponseIssParameterSupported
	return nil
}

// checkEndpoint refuses a metadata URL that is missing, not http(s), or
// plain http for an https server (no downgrade of where tokens and codes
// go).
func checkEndpoint(serverURL, name, raw string, required bool) error {
	if raw == "" {
		if required {
			return fmt.Errorf("authorization server metadata has no %s", name)
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s %q is not an absolute URL", name, cut(raw, 200))
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if strings.HasPrefix(serverURL, "https:") && !httpguard.IsLoopback(u.Hostname()) {
			return fmt.Errorf("%s %s is plain http for an https server", name, redactURL(raw))
		}
	default:
		return fmt.Errorf("%s %q is not an http or https URL", name, cut(raw, 200))
	}
	return nil
}

// sameIssuer compares issuer identifiers exactly (RFC 8414 §3.3), apart
// from one trailing slash.
func SameIssuer(got, want string) bool {
	return got != "" && strings.TrimSuffix(got, "/") == strings.TrimSuffix(want, "/")
}
