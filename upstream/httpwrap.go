package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mcp-proxy/mcp-proxy/tracing"
)

// headerTransport is the outermost RoundTripper of an http or sse upstream.
//
// It sets the configured headers on every request to the server's own
// origin. mcp-go applies them itself to most requests but not to the DELETE
// that ends a Streamable HTTP session, which an authenticating server would
// then refuse. Requests to another origin (a redirect) have them removed:
// http.Client copies custom headers onto every redirect, so an API key
// would otherwise follow a redirect off-site.
//
// It also reports an over-long response body to the request that read it
// (see withTooLargeSink): mcp-go turns a failed SSE response stream into
// "unexpected nil response", losing the reason.
//
// It carries the trace context of the request's ctx in the traceparent and
// tracestate headers when tracing is on (tracer not nil), so an HTTP
// upstream's own instrumentation continues the proxy's trace.
//
// And it hands mcp-go a 410 Gone for a request that carried a session id as
// a 404: both mean the server no longer knows the session (SPEC §9.2), but
// mcp-go only recognizes the 404 (ErrSessionTerminated), and would
// otherwise report a 410 as a plain failed request.
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
	sink, _ := req.Context().Value(tooLargeKey{}).(*tooLargeSink)
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusGone && req.Header.Get(transport.HeaderKeySessionID) != "" {
		resp.StatusCode, resp.Status = http.StatusNotFound, "404 Not Found"
	}
	if sink == nil {
		return resp, err
	}
	sink.note(err)
	if resp != nil && resp.Body != nil {
		resp.Body = &sinkBody{ReadCloser: resp.Body, sink: sink}
	}
	return resp, err
}

type tooLargeKey struct{}

// tooLargeSink keeps the first *ResponseTooLargeError met while a request's
// response was read.
type tooLargeSink struct {
	mu  sync.Mutex
	err error
}

// withTooLargeSink returns a ctx whose HTTP responses report an over-long
// body to the returned sink.
func withTooLargeSink(ctx context.Context) (context.Context, *tooLargeSink) {
	s := &tooLargeSink{}
	return context.WithValue(ctx, tooLargeKey{}, s), s
}

func (s *tooLargeSink) note(err error) {
	var tl *ResponseTooLargeError
	if errors.As(err, &tl) {
		s.mu.Lock()
		if s.err == nil {
			s.err = tl
		}
		s.mu.Unlock()
	}
}

// get returns the recorded error, or nil.
func (s *tooLargeSink) get() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

type sinkBody struct {
	io.ReadCloser
	sink *tooLargeSink
}

func (b *sinkBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.sink.note(err)
	}
	return n, err
}
