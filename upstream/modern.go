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
// count as none declared.
func WithClientCapabilities(ctx context.Context, caps json.RawMessage) context.Context {
	return context.WithValue(ctx, clientCapsKey{}, caps)
}

// ClientCapabilities returns the client capabilities ctx carries
// (WithClientCapabilities) and whether it carries any.
func ClientCapabilities(ctx context.Context) (json.RawMessage, bool) {
	caps, ok := ctx.Value(clientCapsKey{}).(json.RawMessage)
	return caps, ok
}

// relayedClientCaps are the client capabilities the proxy honours for a
// client that declares them: it relays those requests to that client.
var relayedClientCaps = []string{"sampling", "elicitation"}

// clientCapabilities is the clientCapabilities member of a request's _meta
// in the 2026-07-28 era.
func (s *session) clientCapabilities(ctx context.Context) json.RawMessage {
	own := mcp.ClientCapabilities{}
	if s.c.opts.OnRequest != nil {
		own = relayCapabilities()
	}
	declared, ok := ClientCapabilities(ctx)
	if !ok {
		b, _ := json.Marshal(own)
		return b
	}
	out := map[string]json.RawMessage{}
	if s.c.opts.OnRequest != nil {
		for _, k := range relayedClientCaps {
			if v, ok, _ := rawjson.Get(declared, k); ok && len(v) > 0 && v[0] == '{' {
				out[k] = v
			}
		}
		out["roots"] = json.RawMessage(`{}`)
	}
	b, _ := json.Marshal(out)
	return b
}

// modernize adds the per-request _meta (protocol version, client info and
// capabilities) and the headers that a 2026-07-28 request needs: Mcp-Method,
// Mcp-Name, and for tools/call the Mcp-Param-* headers the tool declares.
// version is the request's protocol version (s.protocol, or the one a
// -32022 answer offered). Values in params are kept byte for byte.
func (s *session) modernize(ctx context.Context, method, version string, params json.RawMessage) (json.RawMessage, http.Header, error) {
	fields := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &fields); err != nil || fields == nil {
			return nil, nil, fmt.Errorf("%w: params must be a JSON object", ErrBadRequest)
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := fields["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return nil, nil, fmt.Errorf("%w: _meta must be a JSON object", ErrBadRequest)
		}
	}
	put := func(k string, v any) {
		b, _ := json.Marshal(v)
		meta[k] = b
	}
	put(mcp.MetaKeyProtocolVersion, version)
	put(mcp.MetaKeyClientInfo, mcp.Implementation{Name: clientName, Version: Version})
	meta[mcp.MetaKeyClientCapabilities] = s.clientCapabilities(ctx)
	if level := s.c.logLevel(); level != "" {
		put(mcp.MetaKeyLogLevel, level) // this protocol's logging/setLevel (SetLogLevel)
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, nil, err
	}
	fields["_meta"] = m
	encoded, err := json.Marshal(fields)
	if err != nil {
		return nil, nil, err
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
