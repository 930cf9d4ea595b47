package metrics

import (
	"sync"
	"sync/atomic"
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
	upstreamTools    *prometheus.GaugeVec
	toolCalls        *prometheus.CounterVec
	toolCallDuration *prometheus.HistogramVec
	sessionsActive   *prometheus.GaugeVec
	blobs            *prometheus.CounterVec
	blobBytes        *prometheus.CounterVec
	toolsQuarantined *prometheus.GaugeVec
	counters         [numCounters]*prometheus.CounterVec // those count adds one to
	children         [numCounters]childCache             // their series count resolved
	waits            *waitMetrics                        // waits.go

	protoMu  sync.Mutex        // guards protocol, and orders the up gauge's relabelling
	protocol map[string]string // the protocol label of each server's up series
}

// spec names a collector, says what it measures and lists its labels.
type spec struct {
	Name, Help string
	Labels     []string
}

func (s spec) counter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: s.Name, Help: s.Help}, s.Labels)
}

func (s spec) gauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: s.Name, Help: s.Help}, s.Labels)
}

func (s spec) histogram(buckets []float64) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: s.Name, Help: s.Help, Buckets: buckets}, s.Labels)
}

// counter is one of the counters whose methods add one to a series, and
// nothing else: Metrics.count.
type counter int

const (
	upstreamConnects counter = iota
	requests
	policyDenials
	approvals
	toolSearch
	sampling
	auth
	toolFindings
	rateLimited   // ratelimit.go
	statusSignIns // status.go
	numCounters
)

// counterSpecs are the counters of Metrics.count.
var counterSpecs = [numCounters]spec{
	upstreamConnects: {Name: "mcp_proxy_upstream_connects_total", Labels: []string{"server", "result"}, Help: "Connection attempts to upstream servers by result (ok, error)."},
	requests:         {Name: "mcp_proxy_requests_total", Labels: []string{"agent", "method", "outcome"}, Help: "Downstream MCP requests by agent, method and outcome (ok, error)."},
	policyDenials:    {Name: NamePolicyDenials, Labels: []string{"agent", "rule"}, Help: "Tool calls refused by a policy rule, by agent and rule (not_granted, server_filter, excluded_tools, allowed_tools, per_call_allowed_tools, read_only)."},
	approvals:        {Name: "mcp_proxy_approvals_total", Labels: []string{"agent", "decision"}, Help: "Approval questions by agent and decision (approve, always, deny, decline, cancel, timeout, unsupported, error)."},
	toolSearch:       {Name: "mcp_proxy_tool_search_queries_total", Labels: []string{"agent", "mode"}, Help: "tool_search queries by agent and mode (keyword, select)."},
	sampling:         {Name: "mcp_proxy_sampling_requests_total", Labels: []string{"server", "outcome"}, Help: "Sampling requests from upstream servers by server and outcome (ok, error, timeout, unsupported, unroutable, invalid, refused_disabled, refused_rate, refused_model)."},
	auth:             {Name: "mcp_proxy_auth_total", Labels: []string{"agent", "result"}, Help: "Authentications on the HTTP listener by agent (empty when none was chosen) and result (ok, missing, invalid, expired, wrong_audience, insufficient_scope, no_agent, forbidden_agent, unavailable)."},
	toolFindings:     {Name: "mcp_proxy_tool_findings_total", Labels: []string{"server", "kind"}, Help: "Tool integrity findings by server and kind, counted once per tool definition: description scan kinds, definition_changed, new_tool."},
	rateLimited:      {Name: "mcp_proxy_rate_limited_total", Labels: []string{"agent", "server", "limit"}, Help: "Tool calls refused by a rate limit and never sent upstream, by agent, server and limit (server_rate, server_concurrent, agent)."},
	statusSignIns:    {Name: "mcp_proxy_status_sign_ins_total", Labels: []string{"result"}, Help: "Tokens entered on the status page (its form or its address), by result (ok, wrong_token, throttled: refused unchecked while too many wrong tokens came)."},
}

// callDurationBuckets spans a fast local tool (1 ms) to the 600 s timeout cap.
var callDurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		upstreamUp:       spec{Name: "mcp_proxy_upstream_up", Labels: []string{"server", "protocol"}, Help: "1 when the upstream MCP server is connected, else 0; protocol is the MCP version last spoken with it (\"\" before any)."}.gauge(),
		upstreamTools:    spec{Name: "mcp_proxy_upstream_tools", Labels: []string{"server"}, Help: "Tools the upstream server currently exposes through the proxy: its tools after tools.include/exclude, without those held in quarantine, before any agent's policy; 0 while it is down."}.gauge(),
		toolCalls:        spec{Name: NameToolCalls, Labels: []string{"server", "tool", "outcome"}, Help: "Tool calls by server, upstream tool name and outcome."}.counter(),
		toolCallDuration: spec{Name: NameToolCallDuration, Labels: []string{"server", "outcome"}, Help: "Tool call latency through the proxy, by server and outcome."}.histogram(callDurationBuckets),
		sessionsActive:   spec{Name: NameSessionsActive, Labels: []string{"agent", "transport"}, Help: "Downstream sessions currently open, by agent and transport. An HTTP session its client never ends with DELETE counts until listen.session_idle_timeout closes it."}.gauge(),
		blobs:            spec{Name: "mcp_proxy_blobs_total", Labels: []string{"server", "result"}, Help: "Embedded blobs in tool results by server and result (written, reused, unavailable, invalid, too_large, over_budget)."}.counter(),
		blobBytes:        spec{Name: "mcp_proxy_blob_bytes_total", Labels: []string{"server", "result"}, Help: "Decoded bytes of embedded blobs in tool results by server and result."}.counter(),
		toolsQuarantined: spec{Name: "mcp_proxy_tools_quarantined", Labels: []string{"server"}, Help: "Tools of the upstream server held in quarantine (changed since pinned, new, or held by the description scan)."}.gauge(),
	}
	cs := []prometheus.Collector{m.upstreamUp, m.upstreamTools, m.toolCalls, m.toolCallDuration,
		m.sessionsActive, m.blobs, m.blobBytes, m.toolsQuarantined}
	for c, s := range counterSpecs {
		m.counters[c] = s.counter()
		cs = append(cs, m.counters[c])
	}
	if err := register(reg, cs...); err != nil {
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

// count adds one to the series labels of counter c; a nil m records
// nothing.
func (m *Metrics) count(c counter, labels ...string) {
	if m == nil {
		return
	}
	var k labelKey
	if len(labels) > len(k) {
		m.counters[c].WithLabelValues(labels...).Inc()
		return
	}
	copy(k[:], labels)
	m.children[c].get(k, m.counters[c], labels).Inc()
}

// gaugeValue is 1 for true, 0 for false.
func gaugeValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// UpstreamState records whether server is connected and how many tools it has.
func (m *Metrics) UpstreamState(server string, up bool, tools int) {
	if m == nil {
		return
	}
	m.protoMu.Lock()
	m.upstreamUp.WithLabelValues(server, m.protocol[server]).Set(gaugeValue(up))
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
func (m *Metrics) UpstreamConnect(server, result string) { m.count(upstreamConnects, server, result) }

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
func (m *Metrics) Request(agent, method, outcome string) { m.count(requests, agent, method, outcome) }

// ToolCall records one tool call's outcome and latency.
func (m *Metrics) ToolCall(server, tool, outcome string, d time.Duration) {
	m.ToolCallOf(nil, server, tool, outcome, d)
}

// ToolSeries holds the series of one tool's calls once its first call of
// an outcome has resolved them, so that the next calls of that outcome
// skip the collectors' label hashing and their lock. The caller keeps one
// per tool for as long as the tool exists (the proxy: on its catalog
// entry, so that a tool gone from the catalog takes its ToolSeries with
// it); its zero value is ready. It creates no series of its own: a series
// appears when a call records on it, exactly as through ToolCall.
type ToolSeries struct {
	outcomes [numOutcomes]atomic.Pointer[toolChildren]
}

// toolChildren are the series one tool's calls of one outcome record on.
type toolChildren struct {
	m        *Metrics // they belong to m's collectors
	calls    prometheus.Counter
	duration prometheus.Observer
}

// The outcomes ToolSeries keeps series for, in outcomeIndex's order.
const numOutcomes = 6

// outcomeIndex is the slot of a ToolSeries for outcome, or -1 for a value
// that is none of the Outcome constants.
func outcomeIndex(outcome string) int {
	switch outcome {
	case OutcomeOK:
		return 0
	case OutcomeToolError:
		return 1
	case OutcomeError:
		return 2
	case OutcomeTimeout:
		return 3
	case OutcomeCanceled:
		return 4
	case OutcomeDenied:
		return 5
	}
	return -1
}

// ToolCallOf is ToolCall for a call of the tool whose series ts caches
// (nil: none); it records the same series with the same values. ts must
// only ever be passed with the same server and tool.
func (m *Metrics) ToolCallOf(ts *ToolSeries, server, tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	i := outcomeIndex(outcome)
	if ts == nil || i < 0 {
		m.toolCalls.WithLabelValues(server, tool, outcome).Inc()
		m.toolCallDuration.WithLabelValues(server, outcome).Observe(d.Seconds())
		return
	}
	ch := ts.outcomes[i].Load()
	if ch == nil || ch.m != m {
		ch = &toolChildren{m: m, calls: m.toolCalls.WithLabelValues(server, tool, outcome),
			duration: m.toolCallDuration.WithLabelValues(server, outcome)}
		ts.outcomes[i].Store(ch)
	}
	ch.calls.Inc()
	ch.duration.Observe(d.Seconds())
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
func (m *Metrics) PolicyDenial(agent, rule string) { m.count(policyDenials, agent, rule) }

// Approval counts one approval question by its decision.
func (m *Metrics) Approval(agent, decision string) { m.count(approvals, agent, decision) }

// ToolSearch counts one tool_search query; mode is "keyword" or "select".
func (m *Metrics) ToolSearch(agent, mode string) { m.count(toolSearch, agent, mode) }

// Sampling counts one sampling request of an upstream by its outcome.
func (m *Metrics) Sampling(server, outcome string) { m.count(sampling, server, outcome) }

// Auth counts one authentication on the HTTP listener. agent is a
// configured agent name or "" when none was chosen; result is one of the
// fixed set of authn's results. Neither may ever be a subject or a token.
func (m *Metrics) Auth(agent, result string) { m.count(auth, agent, result) }

// ToolsQuarantined sets how many of server's tools are held in quarantine.
func (m *Metrics) ToolsQuarantined(server string, n int) {
	if m == nil {
		return
	}
	m.toolsQuarantined.WithLabelValues(server).Set(float64(n))
}

// ToolFinding counts one tool integrity finding of kind on server.
func (m *Metrics) ToolFinding(server, kind string) { m.count(toolFindings, server, kind) }
