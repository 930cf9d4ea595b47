package upstream

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/tracing"
)

// headerTransport is the outermost RoundTripper of an http or sse upstream.
//
// It sets the configured headers on every request to the server's own
// origin (the wires set none themselves). Requests to another origin (a
// redirect) have them removed:
// http.Client copies custom headers onto every redirect, so an API key
// would otherwise follow a redirect off-site.
//
// It carries the trace context of the request's ctx in the traceparent and
// tracestate headers when tracing is on (tracer not nil), so an HTTP
// upstream's own instrumentation continues the proxy's trace.
type headerTransport struct {
	next    http.RoundTripper
	origin  string // scheme://host of the server URL
	headers map[string]string
	tracer  *tracing.Tracer // nil: no trace headers
}

func newHeaderTransport(next http.RoundTripper, server *url.URL, headers map[string]string) *headerTransport {
	return &headerTransport{next: next, origin: originOf(server), headers: headers}
}

func originOf(u *url.URL) string {
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	trace := t.tracer.Propagates(req.Context())
	if len(t.headers) > 0 || trace {
		req = req.Clone(req.Context()) // a RoundTripper must not modify its request
		same := originOf(req.URL) == t.origin
		for k, v := range t.headers {
			if same {
				req.Header.Set(k, v)
			} else {
				req.Header.Del(k) // copied by http.Client onto a redirect
			}
		}
		if trace {
			t.tracer.InjectHeader(req.Context(), req.Header)
		}
	}
	return t.next.RoundTrip(req)
}
