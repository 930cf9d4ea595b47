package upstream

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// minSSEResponseTimeout is the floor of the SSE transport's own wait for a
// response event; mcp-go's default (60 s) is shorter than a tool call may
// take. Requests are bounded by their ctx deadline anyway.
const minSSEResponseTimeout = 60 * time.Second

// newTransport builds the transport for the server's configured kind. For
// stdio it also starts the child process (s.proc).
// maxIdleConnsPerUpstream is how many idle keep-alive connections an HTTP
// upstream keeps: enough for the concurrency a busy proxy sends one server.
const maxIdleConnsPerUpstream = 64

func (s *session) newTransport(ctx context.Context) (transport.Interface, error) {
	cfg := s.c.cfg
	switch kind := s.c.transportKind(); kind {
	case config.TransportStdio:
		env := childEnv(cfg, s.c.opts.LookupEnv, s.c.opts.Environ)
		p, err := startProcess(cfg, env, s.log)
		if err != nil {
			return nil, err
		}
		s.proc = p
		dropped := func(err error) {
			s.log.Warn().Err(err).Msg("over-long message from the server dropped")
		}
		tr := newStdioTransport(p.stdoutReader(s.c.maxResponseBytes(), dropped), p.stdin, s.log)
		if d := s.c.opts.StallTimeout; d > 0 {
			tr.stallTimeout = d
		}
		tr.onStall = func(err error) { s.die(err) }
		tr.ended = s.ctx.Done()
		return tr, nil
	case config.TransportHTTP, config.TransportSSE:
		hc, err := s.httpClient()
		if err != nil {
			return nil, err
		}
		headers := maps.Clone(cfg.Headers)
		logger := newSlogger(s.log)
		if kind == config.TransportHTTP {
			tr, err := transport.NewStreamableHTTP(cfg.URL,
				transport.WithHTTPBasicClient(hc),
				transport.WithHTTPHeaders(headers),
				transport.WithContinuousListening(),
				transport.WithHTTPLogger(logger),
			)
			if err != nil {
				return nil, fmt.Errorf("streamable HTTP transport: %w", err)
			}
			return tr, nil
		}
		// The SSE stream lives on the session's ctx, so the wait for the
		// endpoint event is bounded here, by what is left of connect_timeout.
		endpointWait := s.c.connectTimeout()
		if dl, ok := ctx.Deadline(); ok {
			if endpointWait = time.Until(dl); endpointWait <= 0 {
				return nil, context.DeadlineExceeded
			}
		}
		tr, err := transport.NewSSE(cfg.URL,
			transport.WithHTTPClient(hc),
			transport.WithHeaders(headers),
			transport.WithResponseTimeout(max(s.c.requestTimeout(), s.c.connectTimeout(), minSSEResponseTimeout)),
			transport.WithEndpointTimeout(endpointWait),
			transport.WithSSELogger(logger),
		)
		if err != nil {
			return nil, fmt.Errorf("SSE transport: %w", err)
		}
		return tr, nil
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownTransport, kind)
	}
}

// transportKind is cfg.Transport, inferred like the config does when empty.
func (c *Conn) transportKind() string {
	if t := c.cfg.Transport; t != "" {
		return t
	}
	if c.cfg.Command != "" {
		return config.TransportStdio
	}
	return config.TransportHTTP
}

// httpClient builds the HTTP client of an http or sse upstream: the proxy's
// retry policy and response cap, the server's CA if configured (then the URL
// and every redirect must be https), a redirect policy that never
// downgrades https to http, the configured headers on every request to the
// server's origin, and the server's requests to the proxy taken out of its
// event streams and answered.
func (s *session) httpClient() (*http.Client, error) {
	cfg := s.c.cfg
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	// Every request of this connection goes to one host, from every
	// downstream session at once; net/http's default of 2 idle connections
	// per host would open and close a connection for most concurrent calls.
	base.MaxIdleConnsPerHost = maxIdleConnsPerUpstream
	s.httpBase = base // its idle connections are closed with the session
	if cfg.TLSCACertPath != "" {
		if err := requireHTTPS(u); err != nil {
			return nil, err
		}
		pool, err := LoadCAPool(cfg.TLSCACertPath)
		if err != nil {
			return nil, err
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hc := newHTTPClient(base, s.c.maxResponseBytes(), s.log)
	if cfg.TLSCACertPath != "" {
		hc.CheckRedirect = noDowngradeRedirect // nothing but https, ever
	} // else newHTTPClient's default: no https→http downgrade
	headers := maps.Clone(cfg.Headers)
	if headers == nil {
		headers = map[string]string{}
	}
	if err := s.authorize(hc, headers); err != nil {
		return nil, err
	}
	// The header transport sits inside the token client's (which sets or
	// removes Authorization itself), so a static header never overrides it.
	if t, ok := hc.Transport.(*oauthclient.Transport); ok {
		ht := newHeaderTransport(t.Base, u, headers)
		ht.tracer = s.c.opts.Tracer
		t.Base = ht
	} else {
		ht := newHeaderTransport(hc.Transport, u, headers)
		ht.tracer = s.c.opts.Tracer
		hc.Transport = ht
	}
	// Outermost: the server's requests are taken out of its event streams
	// before mcp-go reads them (streamrequests.go).
	rt := newRequestTransport(hc.Transport, s, s.c.transportKind() == config.TransportSSE)
	rt.client = hc
	hc.Transport = rt
	return hc, nil
}

// checkSSEEndpoint refuses a plain-http message endpoint when the server has
// a CA configured (SPEC §9.3).
func (s *session) checkSSEEndpoint(tr *transport.SSE) error {
	if s.c.cfg.TLSCACertPath == "" {
		return nil
	}
	ep := tr.GetEndpoint()
	if ep == nil {
		return fmt.Errorf("SSE server advertised no endpoint")
	}
	if err := requireHTTPS(ep); err != nil {
		return fmt.Errorf("SSE endpoint: %w", err)
	}
	return nil
}

// maxResponseBytes is the server's wire cap per message.
func (c *Conn) maxResponseBytes() int64 { return c.cfg.ResponseLimit() }
