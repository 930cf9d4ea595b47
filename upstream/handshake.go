package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/config"
)

// discoverProbeTimeout bounds the server/discover probe of protocol auto: a
// server that predates the method should answer method not found, but one
// may ignore it.
const discoverProbeTimeout = 5 * time.Second

// handshakeResult is what the server said about itself, by initialize or
// by server/discover.
type handshakeResult struct {
	ProtocolVersion string                 `json:"protocolVersion"`
	Capabilities    mcp.ServerCapabilities `json:"capabilities"`
	ServerInfo      mcp.Implementation     `json:"serverInfo"`
	Instructions    string                 `json:"instructions"`
}

// handshake settles the protocol with the server and sets s.protocol and
// s.modern. With protocol auto, or a pinned stateless version (2026-07-28
// and later), it first asks server/discover, at most discoverProbeTimeout;
// a server that answers it is stateless and needs no initialize. Otherwise,
// or when the probe fails, it runs the initialize handshake at the pinned
// version, or at the newest version that has it, and sends
// notifications/initialized. Over Streamable HTTP the probe is skipped: the
// proxy keeps a GET stream open for the server's notifications, which the
// stateless protocol has not.
func (s *session) handshake(ctx context.Context) (handshakeResult, error) {
	preferred := s.preferredProtocol()
	if (preferred == "" || mcp.IsModernProtocol(preferred)) && s.c.transportKind() != config.TransportHTTP {
		res, err := s.discoverProtocol(ctx, preferred)
		if err == nil || ctx.Err() != nil {
			return res, err // stateless, or out of time: no initialize either
		}
	}
	version := preferred
	if version == "" || mcp.IsModernProtocol(version) {
		version = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	}
	var caps mcp.ClientCapabilities
	if s.c.opts.OnRequest != nil {
		caps = relayCapabilities()
	}
	params, err := json.Marshal(mcp.InitializeParams{
		ProtocolVersion: version,
		ClientInfo:      mcp.Implementation{Name: clientName, Version: Version},
		Capabilities:    caps,
	})
	if err != nil {
		return handshakeResult{}, err
	}
	raw, err := s.exchange(ctx, string(mcp.MethodInitialize), params)
	if err != nil {
		if s.c.transportKind() == config.TransportHTTP && hintsLegacySSE(err) {
			return handshakeResult{}, fmt.Errorf("%w (if it is a legacy SSE server, set transport: sse)", err)
		}
		return handshakeResult{}, err
	}
	var res handshakeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return handshakeResult{}, s.c.opError(string(mcp.MethodInitialize), fmt.Errorf("%w: %w", ErrBadResponse, err))
	}
	if !mcp.IsValidProtocolVersion(res.ProtocolVersion) {
		return handshakeResult{}, s.c.opError(string(mcp.MethodInitialize),
			fmt.Errorf("the server chose protocol version %s, which the proxy does not speak", strconv.Quote(res.ProtocolVersion)))
	}
	s.protocol, s.modern = res.ProtocolVersion, false
	if v, ok := s.tr.(interface{ setProtocol(string) }); ok {
		v.setProtocol(s.protocol) // the HTTP wires' protocol version header
	}
	if err := s.tr.notify(withMethod(ctx, string(mcp.MethodNotificationInitialized)), string(mcp.MethodNotificationInitialized), nil); err != nil {
		return handshakeResult{}, s.c.opError(string(mcp.MethodNotificationInitialized), err)
	}
	return res, nil
}

// discoverProtocol is the server/discover probe: on success the session is
// stateless at the version it settled.
func (s *session) discoverProtocol(ctx context.Context, preferred string) (handshakeResult, error) {
	if preferred == "" {
		preferred = mcp.LATEST_PROTOCOL_VERSION
	}
	ctx, cancel := context.WithTimeout(ctx, discoverProbeTimeout)
	defer cancel()
	// Each request of the stateless protocol carries the version in its
	// _meta (modernize), from this one on.
	s.protocol, s.modern = preferred, true
	raw, err := s.exchange(ctx, string(mcp.MethodServerDiscover), nil)
	var d mcp.DiscoverResult
	if err == nil {
		err = json.Unmarshal(raw, &d)
	}
	if err != nil {
		s.protocol, s.modern = "", false
		return handshakeResult{}, err
	}
	res := handshakeResult{ProtocolVersion: s.protocol, Capabilities: d.Capabilities, Instructions: d.Instructions}
	if info := d.GetResultMeta().ServerInfo(); info != nil {
		res.ServerInfo = *info
	}
	return res, nil
}

// exchange sends one request of the handshake or a keepalive ping: send
// with an id of its own, without a client span.
func (s *session) exchange(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return s.send(ctx, method, "px-"+strconv.FormatUint(s.c.ids.Add(1), 10), params)
}

// hintsLegacySSE reports whether initialize failed the way a legacy SSE
// server refuses a POST to its stream URL: a 4xx answer other than 401
// and 403 (which an authenticating server gives).
func hintsLegacySSE(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.code/100 == 4 && se.code != 401 && se.code != 403
	}
	return errors.Is(err, errNotFound)
}
