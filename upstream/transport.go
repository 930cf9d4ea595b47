package upstream

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// newTransport builds the transport for the server's configured kind. For
// stdio it also starts the child process (s.proc).
// maxIdleConnsPerUpstream is how many idle keep-alive connections an HTTP
// upstream keeps: enough for the concurrency a busy proxy sends one server.
const maxIdleConnsPerUpstream = 64

func (s *session) newTransport(ctx context.Context) (wire, error) {
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
		in := s.newInbox()
		if kind == config.TransportHTTP {
			// A server that cannot be reached has dropped the connection,
			// as a stdio child that exited has: the reconnect schedule
			// takes over (docs/operations.md#reconnection).
			unreachable := func(err error) { s.die(fmt.Errorf("the server cannot be reached: %w", err)) }
			return &httpWire{url: cfg.URL, client: hc, in: in, unreachable: unreachable}, nil
		}
		// The SSE stream lives on the session's ctx, so the wait for the
		// endpoint event is bounded here, by what is left of connect_timeout.
		endpointWait := s.c.connectTimeout()
		if dl, ok := ctx.Deadline(); ok {
			if endpointWait = time.Until(dl); endpointWait <= 0 {
				return nil, context.DeadlineExceeded
			}
		}
		lost := func(err error) { s.die(fmt.Errorf("SSE stream lost: %w", err)) }
		return startSSE(ctx, cfg.URL, hc, in, cfg.TLSCACertPath != "", endpointWait, lost)
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownTransport, kind)
	}
}

// newInbox is the inbox of an http or sse wire of the session.
func (s *session) newInbox() inbox {
	return inbox{
		log:      s.log,
		requests: newRequestServer(s.log),
		onNote:   s.onRawNotification,
		answer:   s.answer,
		spawn:    s.spawn,
		life:     s.ctx,
		timeout:  s.c.requestTimeout(),
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
// downgrades https to http, and the configured headers on every request to
// the server's origin.
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
	return hc, nil
}

// maxResponseBytes is the server's wire cap per message.
func (c *Conn) maxResponseBytes() int64 { return c.cfg.ResponseLimit() }
