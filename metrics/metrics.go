package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Tool call outcomes, the values of the outcome label of tool call metrics.
const (
	OutcomeOK        = "ok"
	OutcomeToolError = "tool_error"
	OutcomeError     = "error"
	OutcomeTimeout   = "timeout"
	OutcomeCanceled  = "canceled"
	OutcomeDenied    = "denied"
)

// Names of the metrics the status page reads (status.Window); the page
// goes blank where a name it reads is not registered.
const (
	NameToolCalls        = "mcp_proxy_tool_calls_total"
	NameToolCallDuration = "mcp_proxy_tool_call_duration_seconds"
	NameSessionsActive   = "mcp_proxy_sessions_active"
	NamePolicyDenials    = "mcp_proxy_policy_denials_total"
)

// Metrics is the set of collectors. All methods are safe for concurrent use.
// A nil *Metrics is valid and records nothing, so tests and the CLI verbs that
// serve no metrics need not build one.
type Metrics struct {
	upstreamUp       *prometheus.GaugeVec
	upstreamConnects *prometheus.CounterVec
	upstreamTools    *prometheus.GaugeVec
	requests         *prometheus.CounterVec
	toolCalls        *prometheus.CounterVec
	toolCallDuration *prometheus.HistogramVec
	sessionsActive   *prometheus.GaugeVec
	blobs            *prometheus.CounterVec
	blobBytes        *prometheus.CounterVec
	policyDenials    *prometheus.CounterVec
	approvals        *prometheus.CounterVec
	toolSearch       *prometheus.CounterVec
	sampling         *prometheus.CounterVec
	auth             *prometheus.CounterVec
	toolsQuarantined *prometheus.GaugeVec
	toolFindings     *prometheus.CounterVec
	rateLimited      *prometheus.CounterVec // ratelimit.go
	statusSignIns    *prometheus.CounterVec // status.go
	waits            *waitMetrics           // waits.go

	protoMu  sync.Mutex        // guards protocol, and orders the up gauge's relabelling
	protocol map[string]string // the protocol label of each server's up series
}

// callDurationBuckets spans a fast local tool (1 ms) to the 600 s timeout cap.
var callDurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		upstreamUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcp_proxy_upstream_up",
			Help: "1 when the upstream MCP server is connected, else 0; protocol is the MCP version last spoken with it (\"\" before any).",
		}, []string{"server", "protocol"}),
		upstreamConnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_proxy_upstream_connects_total",
			Help: "Connection attempts to upstream servers by result (ok, error).",
		}, []string{"server", "result"}),
		upstreamTools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcp_proxy_upstream_tools",
			Help: "Tools the upstream server currently exposes through the proxy: its tools after tools.include/exclude, without those held in quarantine, before any agent's policy; 0 while it is down.",
		}, []string{"server"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_proxy_requests_total",
			Help: "Downstream MCP requests by agent, method and outcome (ok, error).",
		}, []string{"agent", "method", "outcome"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NameToolCalls,
			Help: "Tool calls by server, upstream tool name and outcome.",
		}, []string{"server", "tool", "outcome"}),
		toolCallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    NameToolCallDuration,
			Help:    "Tool call latency through the proxy, by server and outcome.",
			Buckets: callDurationBuckets,
		}, []string{"server", "outcome"}),
		sessionsActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: NameSessionsActive,
			Help: "Downstream sessions currently open, by agent and transport. An HTTP session its client never ends with DELETE counts until listen.session_idle_timeout closes it.",
		}, []string{"agent", "transport"}),
		blobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_proxy_blobs_total",
			Help: "Embedded blobs in tool results by server and result (written, reused, unavailable, invalid, too_large, over_budget).",
		}, []string{"server", "result"}),
		blobBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_proxy_blob_bytes_total",
			Help: "Decoded bytes of embedded blobs in tool results by server and result.",
		}, []string{"server", "result"}),
		policyDenials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NamePolicyDenials,
			Help: "Tool calls refused by a policy rule, by agent and rule (not_granted, server_filter, excluded_tools, allowed_tools, per_call_allowed_tools, read_only).",
		}, []string{"agent", "rule"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_proxy_approvals_total",
			Help: "Approval questions by agent and decision (approve, always, deny, decline, cancel, timeout, unsupported, error).",
		}, []string{"agent", "decision"}),
		toolSearch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_proxy_tool_search_queries_total",
			Help: "tool_search queries by agent and mode (keyword, select).",
		}, []string{"agent", "mode"}),
		sampling: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_proxy_sampling_requests_total",
			Help: "Sampling requests from upstream servers by server and outcome (ok, error, timeout, unsupported, unroutable, invalid, refused_disabled, refused_rate, refused_model).",
		}, []string{"server", "outcome"}),
		auth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_proxy_auth_total",
			Help: "Authentications on the HTTP listener by agent (empty when none was chosen) and result (ok, missing, invalid, expired, wrong_audience, insufficient_scope, no_agent, forbidden_agent, unavailable).",
		}, []string{"agent", "result"}),
		toolsQuarantined: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcp_proxy_tools_quarantined",
			Help: "Tools of the upstream server held in quarantine (changed since pinned, new, or held by the description scan).",
		}, []string{"server"}),
		toolFindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_proxy_tool_findings_total",
			Help: "Tool integrity findings by server and kind, counted once per tool definition: description scan kinds, definition_changed, new_tool.",
		}, []string{"server", "kind"}),
		rateLimited:   newRateLimited(),
		statusSignIns: newStatusSignIns(),
	}
	if err := register(reg, m.upstreamUp, m.upstreamConnects, m.upstreamTools,
		m.requests, m.toolCalls, m.toolCallDuration, m.sessionsActive, m.blobs, m.blobBytes,
		m.policyDenials, m.approvals, m.toolSearch, m.sampling, m.auth, m.toolsQuarantined, m.toolFindings, m.rateLimited, m.statusSignIns); err != nil {
		return nil, err
	}
	var err error
	if m.waits, err = newWaitMetrics(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers every collector of cs on reg, stopping at the first
// that fails.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// UpstreamState records whether server is connected and how many tools it has.
func (m *Metrics) UpstreamState(server string, up bool, tools int) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.protoMu.Lock()
	m.upstreamUp.WithLabelValues(server, m.protocol[server]).Set(v)
	m.protoMu.Unlock()
	m.upstreamTools.WithLabelValues(server).Set(float64(tools))
}

// UpstreamProtocol records the MCP version spoken with server
// (2026-07-28 or a session-era version): the protocol label of its
// mcp_proxy_upstream_up series from now on, which keeps its value. "" is
// ignored: a server that is down keeps the version last spoken.
func (m *Metrics) UpstreamProtocol(server, protocol string) {
	if m == nil || protocol == "" {
		return
	}
	m.protoMu.Lock()
	defer m.protoMu.Unlock()
	old, known := m.protocol[server]
	if known && old == protocol {
		return
	}
	if m.protocol == nil {
		m.protocol = map[string]string{}
	}
	m.protocol[server] = protocol
	var v float64
	if g, err := m.upstreamUp.GetMetricWithLabelValues(server, old); err == nil && known {
		var pb dto.Metric
		if g.Write(&pb) == nil {
			v = pb.GetGauge().GetValue()
		}
	}
	m.upstreamUp.DeleteLabelValues(server, old)
	m.upstreamUp.WithLabelValues(server, protocol).Set(v)
}

// UpstreamConnect counts one connection attempt; result is "ok" or "error".
func (m *Metrics) UpstreamConnect(server, result string) {
	if m == nil {
		return
	}
	m.upstreamConnects.WithLabelValues(server, result).Inc()
}

// ForgetServer drops the series of a server removed from the config.
func (m *Metrics) ForgetServer(server string) {
	if m == nil {
		return
	}
	m.protoMu.Lock()
	m.upstreamUp.DeletePartialMatch(prometheus.Labels{"server": server})
	delete(m.protocol, server)
	m.protoMu.Unlock()
	m.upstreamTools.DeleteLabelValues(server)
	m.toolsQuarantined.DeleteLabelValues(server)
	m.waits.forget(server)
}

// Request counts one downstream request; outcome is "ok" or "error".
func (m *Metrics) Request(agent, method, outcome string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(agent, method, outcome).Inc()
}

// ToolCall records one tool call's outcome and latency.
func (m *Metrics) ToolCall(server, tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.toolCalls.WithLabelValues(server, tool, outcome).Inc()
	m.toolCallDuration.WithLabelValues(server, outcome).Observe(d.Seconds())
}

// SessionOpened and SessionClosed track active downstream sessions.
func (m *Metrics) SessionOpened(agent, transport string) {
	if m == nil {
		return
	}
	m.sessionsActive.WithLabelValues(agent, transport).Inc()
}

// SessionClosed is the counterpart of SessionOpened.
func (m *Metrics) SessionClosed(agent, transport string) {
	if m == nil {
		return
	}
	m.sessionsActive.WithLabelValues(agent, transport).Dec()
}

// Blob counts one embedded blob of a tool result and its decoded size.
func (m *Metrics) Blob(server, result string, bytes int64) {
	if m == nil {
		return
	}
	m.blobs.WithLabelValues(server, result).Inc()
	m.blobBytes.WithLabelValues(server, result).Add(float64(bytes))
}

// PolicyDenial counts one call refused by rule.
func (m *Metrics) PolicyDenial(agent, rule string) {
	if m == nil {
		return
	}
	m.policyDenials.WithLabelValues(agent, rule).Inc()
}

// Approval counts one approval question by its decision.
func (m *Metrics) Approval(agent, decision string) {
	if m == nil {
		return
	}
	m.approvals.WithLabelValues(agent, decision).Inc()
}

// ToolSearch counts one tool_search query; mode is "keyword" or "select".
func (m *Metrics) ToolSearch(agent, mode string) {
	if m == nil {
		return
	}
	m.toolSearch.WithLabelValues(agent, mode).Inc()
}

// Sampling counts one sampling request of an upstream by its outcome.
func (m *Metrics) Sampling(server, outcome string) {
	if m == nil {
		return
	}
	m.sampling.WithLabelValues(server, outcome).Inc()
}

// Auth counts one authentication on the HTTP listener. agent is a
// configured agent name or "" when none was chosen; result is one of the
// fixed set of authn's results. Neither may ever be a subject or a token.
func (m *Metrics) Auth(agent, result string) {
	if m == nil {
		return
	}
	m.auth.WithLabelValues(agent, result).Inc()
}

// ToolsQuarantined sets how many of server's tools are held in quarantine.
func (m *Metrics) ToolsQuarantined(server string, n int) {
	if m == nil {
		return
	}
	m.toolsQuarantined.WithLabelValues(server).Set(float64(n))
}

// ToolFinding counts one tool integrity finding of kind on server.
func (m *Metrics) ToolFinding(server, kind string) {
	if m == nil {
		return
	}
	m.toolFindings.WithLabelValues(server, kind).Inc()
}
