package metrics

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestExposition records one sample of every metric and checks the names
// and label sets Prometheus exposes (docs/operations.md#metrics), and that the Go and process
// collectors are on the base registry.
func TestExposition(t *testing.T) {
	reg := NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.UpstreamState("fs", true, 14)
	m.UpstreamConnect("fs", "ok")
	m.Request("default", "tools/call", "ok")
	m.ToolCall("fs", "read_file", OutcomeOK, 3*time.Millisecond)
	m.PolicyDenial("default", "excluded_tools")
	m.Approval("default", "approve")
	m.ToolSearch("default", "keyword")
	m.Blob("fs", "written", 1024)
	m.SessionOpened("default", "stdio")
	m.Sampling("fs", "refused_rate")
	m.Auth("eng", "ok")
	m.ToolsQuarantined("fs", 2)
	m.ToolFinding("fs", "hidden_markup")
	m.RequestWaited("fs", "sent", 1200*time.Millisecond)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, f := range families {
		var names []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			names = append(names, l.GetName())
		}
		sort.Strings(names)
		labels[f.GetName()] = strings.Join(names, ",")
	}
	want := map[string]string{
		"mcp_proxy_upstream_up":                "server",
		"mcp_proxy_upstream_connects_total":    "result,server",
		"mcp_proxy_upstream_tools":             "server",
		"mcp_proxy_requests_total":             "agent,method,outcome",
		"mcp_proxy_tool_calls_total":           "outcome,server,tool",
		"mcp_proxy_tool_call_duration_seconds": "outcome,server",
		"mcp_proxy_policy_denials_total":       "agent,rule",
		"mcp_proxy_approvals_total":            "agent,decision",
		"mcp_proxy_tool_search_queries_total":  "agent,mode",
		"mcp_proxy_blobs_total":                "result,server",
		"mcp_proxy_blob_bytes_total":           "result,server",
		"mcp_proxy_sessions_active":            "agent,transport",
		"mcp_proxy_sampling_requests_total":    "outcome,server",
		"mcp_proxy_auth_total":                 "agent,result",
		"mcp_proxy_tools_quarantined":          "server",
		"mcp_proxy_tool_findings_total":        "kind,server",
		"mcp_proxy_requests_waited_total":      "outcome,server",
		"mcp_proxy_request_wait_seconds":       "server",
		"go_goroutines":                        "",
		"process_resident_memory_bytes":        "",
	}
	for name, l := range want {
		got, ok := labels[name]
		if !ok {
			t.Errorf("%s is not exposed", name)
		} else if got != l {
			t.Errorf("%s labels = %q, want %q", name, got, l)
		}
	}
}

// TestSessionsActiveHelp: the gauge's help says what an operator reading
// it needs: most HTTP clients never send DELETE, so their sessions count
// until the idle timeout closes them.
func TestSessionsActiveHelp(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SessionOpened("default", "http")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != NameSessionsActive {
			continue
		}
		if help := f.GetHelp(); !strings.Contains(help, "never ends with DELETE") || !strings.Contains(help, "listen.session_idle_timeout") {
			t.Errorf("help = %q; it must say a session never DELETEd counts until listen.session_idle_timeout", help)
		}
		return
	}
	t.Fatal("mcp_proxy_sessions_active is not exposed")
}

// TestNilMetrics: a nil *Metrics records nothing and does not panic.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.UpstreamState("s", true, 1)
	m.ToolCall("s", "t", OutcomeError, time.Second)
	m.Sampling("s", "ok")
	m.Auth("", "missing")
	m.ToolsQuarantined("s", 1)
	m.ToolFinding("s", "long_description")
	m.RequestWaited("s", "sent", time.Second)
	m.ForgetServer("s")
}

// TestDoubleRegistrationFails: metrics are registered on the registerer the
// caller passes, never the global one, and a second set on the same
// registry is an error rather than a silent share.
func TestDoubleRegistrationFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg); err == nil {
		t.Fatal("registering twice on one registry succeeded")
	}
}
