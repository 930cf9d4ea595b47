package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/config"
)

// discoverProbeTimeout bounds the server/discover probe of protocol auto: a
// server that predates the method should answer method not found, but one
// may ignore it (MCP 2026-07-28, basic/lifecycle: a client falls back to
// initialize when discover is not answered).
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
// s.modern (docs/protocol.md#upstream-protocol):
//
//   - a pinned 2026-07-28 asks server/discover only;
//   - a pinned older version runs initialize at it;
//   - auto over legacy SSE (which the stateless core has not), or on a stdio
//     child respawned because it exited on server/discover, runs initialize;
//   - auto otherwise asks server/discover first (5 s at most) unless the
//     server is known to predate it, and runs initialize when discover is
//     answered -32601 or -32600, HTTP 400, 404 or 405, or not at all. An
//     initialize refused with an error that names the stateless core
//     (-32022 offering it, -32020, "method not found: initialize") makes the
//     server one of the new era.
//
// What it finds is kept on the Conn for the next connections (eraMemo).
func (s *session) handshake(ctx context.Context) (handshakeResult, error) {
	pinned := s.pinnedProtocol()
	switch {
	case pinned != "" && mcp.IsModernProtocol(pinned):
		return s.discoverProtocol(ctx, pinned)
	case pinned != "":
		return s.initialize(ctx, pinned)
	case s.c.transportKind() == config.TransportSSE || s.initializeOnly:
		return s.initializeAuto(ctx)
	}
	era := s.c.era.load()
	if era.known && !era.modern {
		return s.initializeAuto(ctx)
	}
	version := era.version
	if version == "" {
		version = mcp.LATEST_PROTOCOL_VERSION
	}
	pctx, cancel := context.WithTimeout(ctx, discoverProbeTimeout)
	res, err := s.discoverProtocol(pctx, version)
	probeExpired := pctx.Err() != nil
	cancel()
	switch {
	case err == nil:
		return res, nil
	case s.exitedOnDiscover(err): // before ctx, which ends with the session
		return handshakeResult{}, fmt.Errorf("%w: %w", errExitedOnDiscover, err)
	case ctx.Err() != nil:
		return handshakeResult{}, err
	case offersSessionEra(err):
		// It answers server/discover, but offers only versions with
		// initialize (a server serving sessions on this endpoint).
		s.log.Debug().Err(safe(err)).Msg("server/discover offers no stateless version; initialize follows")
		return s.initializeAuto(ctx)
	case probeExpired || predatesDiscover(err):
		s.log.Debug().Err(safe(err)).Msg("server/discover not answered; initialize follows")
		return s.initializeAuto(ctx)
	}
	return handshakeResult{}, err
}

// pinnedProtocol is the version the config pins, or "" for auto.
func (s *session) pinnedProtocol() string {
	switch p := s.c.cfg.Protocol; p {
	case config.ProtocolAuto, "":
		return "" // "": defaults not applied; auto is the default
	default:
		return p
	}
}

// initializeAuto is the initialize of protocol auto, at the newest version
// that has it: a server that refuses it naming the stateless core is asked
// server/discover instead, one that answers is remembered as of the
// session era.
func (s *session) initializeAuto(ctx context.Context) (handshakeResult, error) {
	res, err := s.initialize(ctx, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	if err == nil {
		s.c.era.store(false, res.ProtocolVersion)
		return res, nil
	}
	if v := newEraNamed(err); v != "" && ctx.Err() == nil && s.ctx.Err() == nil {
		s.log.Info().Err(safe(err)).Str("protocol", v).Msg("initialize refused for the stateless protocol; speaking it")
		return s.discoverProtocol(ctx, v)
	}
	var rpc *RPCError
	if errors.As(err, &rpc) && rpc.Code == mcp.UNSUPPORTED_PROTOCOL_VERSION && ctx.Err() == nil {
		// -32022 offering only older session versions: once at the newest.
		if v := mutualVersion(rpc); v != "" && v != mcp.LATEST_LEGACY_PROTOCOL_VERSION {
			if res, err2 := s.initialize(ctx, v); err2 == nil {
				s.c.era.store(false, res.ProtocolVersion)
				return res, nil
			}
		}
	}
	return handshakeResult{}, err
}

// initialize runs the initialize handshake at version and sends
// notifications/initialized.
func (s *session) initialize(ctx context.Context, version string) (handshakeResult, error) {
	var caps mcp.ClientCapabilities
	switch {
	case s.declared != nil:
		caps = *s.declared
	case s.c.opts.OnRequest != nil:
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
		if s.c.transportKind() == config.TransportHTTP && hintsLegacySSE(err) && newEraNamed(err) == "" {
			return handshakeResult{}, fmt.Errorf("%w (if it is a legacy SSE server, set transport: sse)", err)
		}
		return handshakeResult{}, err
	}
	var res handshakeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return handshakeResult{}, s.c.opError(string(mcp.MethodInitialize), fmt.Errorf("%w: %w", ErrBadResponse, err))
	}
	if !mcp.IsValidProtocolVersion(res.ProtocolVersion) || mcp.IsModernProtocol(res.ProtocolVersion) {
		return handshakeResult{}, s.c.opError(string(mcp.MethodInitialize),
			fmt.Errorf("the server chose protocol version %s, which the proxy does not speak with initialize", strconv.Quote(res.ProtocolVersion)))
	}
	s.protocol, s.modern = res.ProtocolVersion, false
	s.tr.setProtocol(s.protocol) // the HTTP wires' protocol version header
	if err := s.tr.notify(withMethod(ctx, string(mcp.MethodNotificationInitialized)), string(mcp.MethodNotificationInitialized), nil); err != nil {
		return handshakeResult{}, s.c.opError(string(mcp.MethodNotificationInitialized), err)
	}
	return res, nil
}

// discoverProtocol asks server/discover at version: on success the session
// is stateless, at version, and the Conn remembers it. A -32022 answer
// whose supported list has a version of the stateless core the proxy speaks
// is asked once more at that version (the one asked, too: the server may
// have refused it for a passing reason).
func (s *session) discoverProtocol(ctx context.Context, version string) (handshakeResult, error) {
	res, err := s.discoverAt(ctx, version)
	var rpc *RPCError
	if errors.As(err, &rpc) && rpc.Code == mcp.UNSUPPORTED_PROTOCOL_VERSION {
		if v := mutualVersion(rpc); mcp.IsModernProtocol(v) {
			res, err = s.discoverAt(ctx, v) // once, even at the same version
		}
	}
	if err != nil {
		s.protocol, s.modern = "", false
		s.tr.setProtocol("")
		return handshakeResult{}, err
	}
	s.c.era.store(true, s.protocol)
	return res, nil
}

func (s *session) discoverAt(ctx context.Context, version string) (handshakeResult, error) {
	// Each request of the stateless protocol carries the version in its
	// _meta and, over HTTP, its header (modernize), from this one on.
	s.protocol, s.modern = version, true
	s.tr.setProtocol(version)
	raw, err := s.exchange(ctx, string(mcp.MethodServerDiscover), nil)
	var d mcp.DiscoverResult
	if err == nil {
		if err = json.Unmarshal(raw, &d); err != nil {
			err = s.c.opError(string(mcp.MethodServerDiscover), fmt.Errorf("%w: %w", ErrBadResponse, err))
		}
	}
	if err != nil {
		return handshakeResult{}, err
	}
	if !slices.Contains(d.SupportedVersions, version) && (len(d.SupportedVersions) > 0 || s.pinnedProtocol() == "") {
		// With auto, an answer without the list that the revision requires
		// is no proof of the new era (a server that answers every method
		// alike): it is initialized.
		return handshakeResult{}, s.c.opError(string(mcp.MethodServerDiscover), &offersError{version: version, supported: d.SupportedVersions})
	}
	res := handshakeResult{ProtocolVersion: version, Capabilities: d.Capabilities, Instructions: d.Instructions}
	if info := d.GetResultMeta().ServerInfo(); info != nil {
		res.ServerInfo = *info
	}
	return res, nil
}

// exitedOnDiscover reports whether err is the death of a stdio child
// during the discover probe: a server that exits on a request it does not
// know. It is respawned once for initialize (connect).
func (s *session) exitedOnDiscover(err error) bool {
	if s.proc == nil || s.ctx.Err() == nil {
		return false
	}
	if errors.Is(context.Cause(s.ctx), errSessionClosed) {
		return false // the proxy closed it
	}
	return errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrProcessExited) || errors.Is(err, errSessionEnded)
}

// offersError: a server/discover answer whose supportedVersions lack the
// version asked for.
type offersError struct {
	version   string
	supported []string
}

func (e *offersError) Error() string {
	return fmt.Sprintf("the server supports %s, not %s", strings.Join(e.supported, ", "), e.version)
}

// offersSessionEra reports whether err is a server/discover answer that
// offers no stateless version but one of the session era the proxy speaks,
// or no list at all.
func offersSessionEra(err error) bool {
	var oe *offersError
	if !errors.As(err, &oe) {
		return false
	}
	if len(oe.supported) == 0 {
		return true
	}
	v := mcp.NegotiateMutuallySupportedVersion(oe.supported)
	return v != "" && !mcp.IsModernProtocol(v)
}

// predatesDiscover reports whether err is how a server that predates
// server/discover refuses it: JSON-RPC -32601 or -32600, or HTTP 400, 404 or
// 405.
func predatesDiscover(err error) bool {
	var rpc *RPCError
	if errors.As(err, &rpc) {
		return rpc.Code == mcp.METHOD_NOT_FOUND || rpc.Code == mcp.INVALID_REQUEST
	}
	var se *statusError
	if errors.As(err, &se) {
		switch se.code {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
			return true
		}
		return false
	}
	return errors.Is(err, errNotFound)
}

// newEraNamed returns the stateless version to speak when err, the answer
// to initialize, names the stateless core: -32022 whose supported list has
// it, -32020 (a header only that core has), method not found for
// initialize, or an error whose text or data names a stateless version.
// It returns "" otherwise.
func newEraNamed(err error) string {
	var rpc *RPCError
	if errors.As(err, &rpc) {
		if rpc.Code == mcp.UNSUPPORTED_PROTOCOL_VERSION {
			if v := mutualVersion(rpc); mcp.IsModernProtocol(v) {
				return v
			}
		}
		if rpc.Code == mcp.HEADER_MISMATCH ||
			rpc.Code == mcp.METHOD_NOT_FOUND && strings.Contains(strings.ToLower(rpc.Message), string(mcp.MethodInitialize)) {
			return mcp.LATEST_PROTOCOL_VERSION
		}
		return modernNamedIn(rpc.Message + " " + string(rpc.Data))
	}
	var se *statusError
	if errors.As(err, &se) {
		return modernNamedIn(se.body)
	}
	return ""
}

// modernNamedIn returns the newest stateless version the proxy speaks that
// text names, or "".
func modernNamedIn(text string) string {
	for _, v := range mcp.ValidProtocolVersions { // newest first
		if mcp.IsModernProtocol(v) && strings.Contains(text, v) {
			return v
		}
	}
	return ""
}

// mutualVersion is the newest version of a -32022 answer's supported list
// that the proxy speaks, or "".
func mutualVersion(rpc *RPCError) string {
	var data mcp.UnsupportedProtocolVersionData
	if len(rpc.Data) == 0 || json.Unmarshal(rpc.Data, &data) != nil {
		return ""
	}
	return mcp.NegotiateMutuallySupportedVersion(data.Supported)
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
