package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/httpjson"
)

// DefaultURL is the official MCP Registry.
const DefaultURL = "https://registry.modelcontextprotocol.io"

const (
	// requestTimeout bounds one request: the registry answers in well
	// under a second, and a CLI should not hang on a dead link.
	requestTimeout = 30 * time.Second
	// pageLimit is the page size asked for.
	pageLimit = 100
	// maxSearchPages bounds the pages one search follows: a search term
	// that matches more than this many servers wants narrowing.
	maxSearchPages = 5
	// drainBytes is how much of an error response is read before the
	// connection is closed, so it can be reused.
	drainBytes = 64 << 10
)

// Client reads one registry. The zero Client reads the official registry
// with a 30-second timeout per request. A Client is safe for concurrent
// use once its fields are set.
type Client struct {
	// BaseURL is the registry's base URL; "" means DefaultURL.
	BaseURL string
	// Headers are sent with every request (a private registry's
	// Authorization). Their values are never part of an error.
	Headers map[string]string
	// HTTP sends the requests; nil means a client with requestTimeout.
	HTTP *http.Client
}

// NewClient returns a Client for baseURL with headers that trusts caPool
// for TLS; a nil caPool means the system's roots.
func NewClient(baseURL string, headers map[string]string, caPool *x509.CertPool) *Client {
	c := &Client{BaseURL: baseURL, Headers: headers}
	if caPool != nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: caPool, MinVersion: tls.VersionTLS12}
		c.HTTP = &http.Client{Transport: t, Timeout: requestTimeout}
	}
	return c
}

func (c *Client) base() string {
	if c.BaseURL == "" {
		return DefaultURL
	}
	return strings.TrimSuffix(c.BaseURL, "/")
}

func (c *Client) client() *http.Client {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: requestTimeout}
	}
	if len(c.Headers) == 0 {
		return hc
	}
	withHeaders := *hc
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	withHeaders.Transport = headerTransport{next: next, headers: c.Headers, host: hostOf(c.base())}
	return &withHeaders
}

// headerTransport adds the configured headers to requests for the
// registry's own host, and to no other (a redirect elsewhere loses them).
type headerTransport struct {
	next    http.RoundTripper
	headers map[string]string
	host    string
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.next.RoundTrip(r)
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// get fetches one JSON object. found is false on 404; any other failure
// is an error naming the URL (without user info).
func (c *Client) get(ctx context.Context, rawURL string) (data []byte, found bool, err error) {
	return c.getLimit(ctx, rawURL, MaxResponseBytes)
}

func (c *Client) getLimit(ctx context.Context, rawURL string, limit int64) (data []byte, found bool, err error) {
	var raw json.RawMessage
	status, err := httpjson.Get(ctx, c.client(), rawURL, httpjson.Limits{Body: limit, Drain: drainBytes}, &raw)
	if status == http.StatusNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, describe(err, rawURL)
	}
	return raw, true, nil
}

// describe turns a failed GET into an error that names the URL tried.
func describe(err error, rawURL string) error {
	shown := shownURL(rawURL)
	var he *httpjson.Error
	if !errors.As(err, &he) {
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, shown, err)
	}
	switch he.Kind {
	case httpjson.Send, httpjson.Read:
		cause := he.Err
		var ue *url.Error
		if errors.As(cause, &ue) {
			cause = ue.Err // its text repeats the URL
		}
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, shown, cause)
	case httpjson.Status:
		return fmt.Errorf("%w: %s answered status %d", ErrUnreachable, shown, he.Status)
	case httpjson.Request:
		return fmt.Errorf("registry URL %s: %w", shown, he.Err)
	}
	return fmt.Errorf("%w: %s: %w", ErrBadResponse, shown, he)
}

// shownURL is rawURL without user info, for messages.
func shownURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(an invalid URL)"
	}
	u.User = nil
	return u.String()
}

func (c *Client) serverURL(name string, parts ...string) string {
	s := c.base() + "/v0.1/servers/" + url.PathEscape(name)
	for _, p := range parts {
		s += "/" + url.PathEscape(p)
	}
	return s
}

// Get returns the server name at version ("" or "latest" for the
// latest). A name the registry does not know is ErrNotFound; a version it
// does not have is ErrNoVersion, whose text lists the versions there are.
func (c *Client) Get(ctx context.Context, name, version string) (*Entry, error) {
	if version == "" {
		version = "latest"
	}
	u := c.serverURL(name, "versions", version)
	data, found, err := c.get(ctx, u)
	if err != nil {
		return nil, err
	}
	if !found {
		if version != "latest" {
			if versions, err := c.Versions(ctx, name); err == nil && len(versions) > 0 {
				return nil, fmt.Errorf("%w: server %q has no version %q; it has %s", ErrNoVersion, name, version, listVersions(versions))
			}
		}
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	e, err := ParseEntry(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shownURL(u), err)
	}
	if e.Server.Name != name {
		return nil, fmt.Errorf("%w: %s: asked for %q, got %q", ErrBadResponse, shownURL(u), name, e.Server.Name)
	}
	return e, nil
}

// maxVersionsShown bounds the versions an error lists.
const maxVersionsShown = 10

func listVersions(v []string) string {
	if len(v) > maxVersionsShown {
		return strings.Join(v[:maxVersionsShown], ", ") + " and " + strconv.Itoa(len(v)-maxVersionsShown) + " more"
	}
	return strings.Join(v, ", ")
}

// Versions lists the versions of server name the registry has (newest
// first, as the registry orders them), deleted ones left out.
func (c *Client) Versions(ctx context.Context, name string) ([]string, error) {
	u := c.serverURL(name, "versions")
	data, found, err := c.get(ctx, u)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	p, err := ParsePage(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shownURL(u), err)
	}
	var out []string
	for _, e := range p.Servers {
		if !e.Deleted() && e.Server.Name == name && !slices.Contains(out, e.Server.Version) {
			out = append(out, e.Server.Version)
		}
	}
	return out, nil
}

// Search returns the latest version of every server whose name, title or
// description contains each of terms (ignoring case), deleted ones left
// out, in the registry's order. The registry is asked for the longest
// term (it matches names); the rest are checked here.
func (c *Client) Search(ctx context.Context, terms []string) ([]Entry, error) {
	query := ""
	for _, t := range terms {
		if len(t) > len(query) {
			query = t
		}
	}
	var out []Entry
	cursor := ""
	for range maxSearchPages {
		q := url.Values{"version": {"latest"}, "limit": {strconv.Itoa(pageLimit)}}
		if query != "" {
			q.Set("search", query)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		u := c.base() + "/v0.1/servers?" + q.Encode()
		data, found, err := c.get(ctx, u)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("%w: %s answered status 404: is it an MCP registry?", ErrUnreachable, shownURL(u))
		}
		p, err := ParsePage(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shownURL(u), err)
		}
		for _, e := range p.Servers {
			if !e.Deleted() && matches(&e.Server, terms) {
				out = append(out, e)
			}
		}
		if p.NextCursor == "" || p.NextCursor == cursor {
			break
		}
		cursor = p.NextCursor
	}
	return out, nil
}

func matches(s *Server, terms []string) bool {
	text := strings.ToLower(s.Name + "\n" + s.Title + "\n" + s.Description)
	for _, t := range terms {
		if !strings.Contains(text, strings.ToLower(t)) {
			return false
		}
	}
	return true
}

// Suggest returns up to n registry names close to name, for an unknown
// name's error. The registry is searched for name's last segment and for
// each word of it ("weather-mcp": "weather", "mcp"), and what comes back is
// ranked by edit distance.
func (c *Client) Suggest(ctx context.Context, name string, n int) []string {
	seg := lastSegment(name)
	queries := []string{seg}
	for _, w := range strings.FieldsFunc(seg, func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
		if len(w) >= 3 && !slices.Contains(queries, w) {
			queries = append(queries, w)
		}
	}
	var candidates []string
	for _, q := range queries {
		found, err := c.Search(ctx, []string{q})
		if err != nil {
			break
		}
		for _, e := range found {
			if !slices.Contains(candidates, e.Server.Name) {
				candidates = append(candidates, e.Server.Name)
			}
		}
	}
	return Closest(name, candidates, n)
}
