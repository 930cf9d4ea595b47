package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// This file is the per-request part of the stateless 2026-07-28 core
// (MCP 2026-07-28, basic: every request carries its protocol version,
// client information and client capabilities in _meta, and over Streamable
// HTTP its method, name and x-mcp-header parameters in headers, SEP-2243).

type clientCapsKey struct{}

// WithClientCapabilities returns ctx carrying the capabilities of the
// client a request is sent for, as that client declared them (a JSON
// object). In the 2026-07-28 era the request's _meta then declares, of
// those, what the proxy can honour for that client: sampling and
// elicitation as the client declared them (absent when it cannot be
// asked), roots always (the proxy answers roots/list itself when the client
// cannot). Without them a request declares the capabilities the proxy
// declares on its own (those of initialize). caps that are not a JSON object
// count as none declared. Over a session-era Streamable HTTP server a call
// carrying them goes on a session initialized with them (sidesession.go).
func WithClientCapabilities(ctx context.Context, caps json.RawMessage) context.Context {
	return context.WithValue(ctx, clientCapsKey{}, caps)
}

// ClientCapabilities returns the client capabilities ctx carries
// (WithClientCapabilities) and whether it carries any.
func ClientCapabilities(ctx context.Context) (json.RawMessage, bool) {
	caps, ok := ctx.Value(clientCapsKey{}).(json.RawMessage)
	return caps, ok
}

// clientCapabilities is the clientCapabilities member of a request's _meta
// in the 2026-07-28 era.
func (s *session) clientCapabilities(ctx context.Context) json.RawMessage {
	declared, ok := ClientCapabilities(ctx)
	switch {
	case s.c.opts.OnRequest == nil:
		return json.RawMessage(`{}`)
	case !ok:
		return relayCapabilitiesJSON
	}
	// The members in the order encoding/json writes a map's: elicitation,
	// roots, sampling.
	out := append(make([]byte, 0, 64), '{')
	if v, ok, _ := rawjson.Get(declared, "elicitation"); ok && len(v) > 0 && v[0] == '{' {
		out = append(append(out, `"elicitation":`...), v...)
		out = append(out, ',')
	}
	out = append(out, `"roots":{}`...)
	if v, ok, _ := rawjson.Get(declared, "sampling"); ok && len(v) > 0 && v[0] == '{' {
		out = append(append(out, `,"sampling":`...), v...)
	}
	return append(out, '}')
}

// relayCapabilitiesJSON is relayCapabilities encoded once: what a request
// declares for a client whose own capabilities it does not carry.
var relayCapabilitiesJSON = func() json.RawMessage {
	b, _ := json.Marshal(relayCapabilities())
	return b
}()

// modernize adds the per-request _meta (protocol version, client info and
// capabilities) and the headers that a 2026-07-28 request needs: Mcp-Method,
// Mcp-Name, and for tools/call the Mcp-Param-* headers the tool declares.
// version is the request's protocol version (s.protocol, or the one a
// -32022 answer offered). Values in params are kept byte for byte.
func (s *session) modernize(ctx context.Context, method, version string, params json.RawMessage) (json.RawMessage, http.Header, error) {
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	if len(params) == 0 || params[0] != '{' {
		return nil, nil, fmt.Errorf("%w: params must be a JSON object", ErrBadRequest)
	}
	// The members are spliced into the params as they came (rawjson), not
	// decoded and encoded again: this runs on every request of a
	// 2026-07-28 server, tools/call included.
	kvs := []rawjson.KV{
		{Key: mcp.MetaKeyProtocolVersion, Value: rawjson.String(version)},
		{Key: mcp.MetaKeyClientInfo, Value: clientInfoJSON},
		{Key: mcp.MetaKeyClientCapabilities, Value: s.clientCapabilities(ctx)},
	}
	if level := s.c.logLevel(); level != "" {
		kvs = append(kvs, rawjson.KV{Key: mcp.MetaKeyLogLevel, Value: rawjson.String(level)}) // this protocol's logging/setLevel (SetLogLevel)
	}
	meta := json.RawMessage(`{}`)
	if raw, ok, err := rawjson.Get(params, "_meta"); err != nil {
		return nil, nil, fmt.Errorf("%w: params must be a JSON object", ErrBadRequest)
	} else if ok {
		if len(raw) == 0 || raw[0] != '{' {
			return nil, nil, fmt.Errorf("%w: _meta must be a JSON object", ErrBadRequest)
		}
		meta = raw
	}
	m, err := rawjson.SetMany(meta, kvs...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: _meta must be a JSON object", ErrBadRequest)
	}
	encoded, err := rawjson.Set(params, "_meta", m)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: params must be a JSON object", ErrBadRequest)
	}
	if !s.tr.sendsHeaders() {
		return encoded, nil, nil
	}
	header := http.Header{}
	header.Set(mcp.HeaderProtocolVersion, version)
	for k, v := range mcp.StandardHeaders(version, mcp.MCPMethod(method), encoded) {
		header.Set(k, v)
	}
	if method == string(mcp.MethodToolsCall) {
		if t := s.c.headerTool(encoded); t != nil {
			for k, v := range mcp.GenerateParamHeaders(t, encoded) {
				header.Set(k, v)
			}
		}
	}
	return encoded, header, nil
}

// clientInfoJSON is the clientInfo member of every 2026-07-28 request's
// _meta: the proxy's name and version, encoded once.
var clientInfoJSON = func() json.RawMessage {
	b, _ := json.Marshal(mcp.Implementation{Name: clientName, Version: Version})
	return b
}()

// headerTool is the x-mcp-header declaring tool a tools/call's params
// name, nil when the tool declares none (or is unknown).
func (c *Conn) headerTool(params json.RawMessage) *mcp.Tool {
	v, ok, _ := rawjson.Get(params, "name")
	if !ok {
		return nil
	}
	name, err := rawjson.Unquote(v)
	if err != nil {
		return nil
	}
	for _, t := range c.Snapshot().Tools {
		if t.Name == name {
			return t.headers
		}
	}
	return nil
}

// paramHeaderTool reads the x-mcp-header declarations of a tool (SEP-2243):
// nil when it has none, an error when one is invalid (on a property that is
// not a string, integer or boolean, empty, not an HTTP token, or declared
// twice): such a tool is left out of the catalog, never called.
func paramHeaderTool(name string, raw json.RawMessage) (*mcp.Tool, error) {
	if !bytes.Contains(raw, []byte("x-mcp-header")) {
		return nil, nil // the common case, without a decode
	}
	v, err := rawjson.Pick(raw, "inputSchema")
	if err != nil || len(v[0]) == 0 {
		return nil, nil
	}
	t := &mcp.Tool{Name: name, RawInputSchema: v[0]}
	if err := mcp.ValidateParamHeaderAnnotations(t); err != nil {
		return nil, fmt.Errorf("%w: invalid x-mcp-header declaration: %w", ErrBadResponse, err)
	}
	if len(mcp.ExtractParamHeaderBindings(t)) == 0 {
		return nil, nil
	}
	return t, nil
}
