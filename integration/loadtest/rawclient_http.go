package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// HTTP client limits.
const (
	// maxIdleConns keeps one connection per concurrent worker alive, so
	// concurrency 8 reuses 8 connections instead of redialling.
	maxIdleConns = 64
	// idleConnTimeout is longer than any pause between rounds.
	idleConnTimeout = 2 * time.Minute
	// errorBodyPrefix is how much of an unexpected body an error quotes.
	errorBodyPrefix = 300
)

// httpClient is a raw JSON-RPC client of one Streamable HTTP MCP session.
// request is safe for concurrent use: each request is its own POST.
type httpClient struct {
	url     string
	hc      *http.Client
	token   string // sent as a bearer token when not empty
	session string // Mcp-Session-Id, set by initialize ("" for a stateless server)
	ready   bool   // initialize is done: later requests name the protocol version
	nextID  atomic.Int64
}

// newHTTPClient returns a client of url with keep-alive connections and no
// proxy from the environment (the servers are on 127.0.0.1).
func newHTTPClient(url string) *httpClient {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        maxIdleConns,
		MaxIdleConnsPerHost: maxIdleConns,
		IdleConnTimeout:     idleConnTimeout,
		DisableCompression:  true,
	}
	return &httpClient{url: url, hc: &http.Client{Transport: tr}}
}

// initialize runs the handshake and keeps the session id.
func (c *httpClient) initialize(ctx context.Context) error {
	res, hdr, err := c.post(ctx, "initialize", initializeParams, true)
	if err != nil {
		return err
	}
	if err := checkInitialize(res); err != nil {
		return err
	}
	// A stateless server (the peer) names no session; every request then
	// stands alone.
	c.session = hdr.Get("Mcp-Session-Id")
	c.ready = true
	_, _, err = c.post(ctx, "notifications/initialized", nil, false)
	return err
}

// request posts one request and returns its response.
func (c *httpClient) request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	res, _, err := c.post(ctx, method, params, true)
	return res, err
}

// close ends the session (DELETE) and drops idle connections.
func (c *httpClient) close(ctx context.Context) error {
	defer c.hc.CloseIdleConnections()
	if c.session == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return fmt.Errorf("DELETE session: %w", err)
	}
	c.setHeaders(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("DELETE session: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMessageBytes))
	_ = resp.Body.Close()
	return nil
}

func (c *httpClient) setHeaders(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.ready {
		req.Header.Set("MCP-Protocol-Version", protocolVersion)
	}
}

// post sends one message. A request (isRequest) must get its response, as
// JSON or inside an event stream; a notification must get 202.
func (c *httpClient) post(ctx context.Context, method string, params json.RawMessage, isRequest bool) (json.RawMessage, http.Header, error) {
	id := int64(-1)
	if isRequest {
		id = c.nextID.Add(1)
	}
	body := encodeRequest(id, method, params)
	resp, err := c.send(ctx, body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", method, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMessageBytes))
		_ = resp.Body.Close()
	}()
	if !isRequest {
		if resp.StatusCode != http.StatusAccepted {
			return nil, nil, fmt.Errorf("%s: HTTP %d, want 202: %s", method, resp.StatusCode, bodyPrefix(resp.Body))
		}
		return nil, resp.Header, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, bodyPrefix(resp.Body))
	}
	want := fmt.Sprint(id)
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var e *envelope
	switch ctype {
	case "application/json":
		e, err = readJSONBody(resp.Body, want)
	case "text/event-stream":
		e, err = readSSE(resp.Body, want, func(msg *envelope) error {
			return c.answer(ctx, msg)
		})
	default:
		err = fmt.Errorf("unexpected Content-Type %q", resp.Header.Get("Content-Type"))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", method, err)
	}
	res, err := e.outcome()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", method, err)
	}
	return res, resp.Header, nil
}

func (c *httpClient) send(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	c.setHeaders(req)
	return c.hc.Do(req)
}

// answer posts our reply to a request the server sent inside a stream.
func (c *httpClient) answer(ctx context.Context, msg *envelope) error {
	resp, err := c.send(ctx, replyToServer(msg))
	if err != nil {
		return fmt.Errorf("answer %s: %w", msg.Method, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMessageBytes))
	_ = resp.Body.Close()
	return nil
}

// readJSONBody reads a JSON response body that must be the response to want.
func readJSONBody(r io.Reader, want string) (*envelope, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxMessageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(data) > maxMessageBytes {
		return nil, fmt.Errorf("response body over %d bytes", maxMessageBytes)
	}
	e, err := parseEnvelope(data)
	if err != nil {
		return nil, err
	}
	if e.Method != "" || idKey(e.ID) != want {
		return nil, fmt.Errorf("body is not the response to request %s: %.200s", want, data)
	}
	return e, nil
}

// readSSE reads an event stream until the response to request want.
// Notifications are skipped; requests from the server go to onRequest.
func readSSE(r io.Reader, want string, onRequest func(*envelope) error) (*envelope, error) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), maxMessageBytes)
	var data []byte
	for {
		more := s.Scan()
		line := s.Bytes()
		if !more {
			line = nil // a last event without its blank line still counts
		}
		if len(line) > 0 {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				v = bytes.TrimPrefix(v, []byte(" "))
				if len(data)+len(v) > maxMessageBytes {
					return nil, fmt.Errorf("event over %d bytes", maxMessageBytes)
				}
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, v...)
			}
			continue // event:, id:, retry: and comments carry nothing we need
		}
		if data == nil {
			if !more {
				break
			}
			continue
		}
		e, err := parseEnvelope(data)
		data = nil
		if err != nil {
			return nil, err
		}
		switch {
		case e.Method != "" && len(e.ID) > 0:
			if err := onRequest(e); err != nil {
				return nil, err
			}
		case e.Method != "":
		case idKey(e.ID) == want:
			return e, nil
		default:
			return nil, fmt.Errorf("stream carries a response to request %s, want %s", idKey(e.ID), want)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read event stream: %w", err)
	}
	return nil, fmt.Errorf("%w: event stream ended before the response", errNoResponse)
}

func bodyPrefix(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, errorBodyPrefix))
	return strings.TrimSpace(string(b))
}

// dialHTTP initializes a session with the server at url, sending token as
// a bearer token ("" none).
func dialHTTP(ctx context.Context, url, token string) (*httpClient, error) {
	c := newHTTPClient(url)
	c.token = token
	if err := c.initialize(ctx); err != nil {
		c.hc.CloseIdleConnections()
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return c, nil
}
