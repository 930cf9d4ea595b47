package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/downstream"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/status"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// toolsReport is the JSON form of `mcp-proxy tools --json`.
type toolsReport struct {
	Agent   string         `json:"agent"`
	Servers []serverReport `json:"servers"`
}

type serverReport struct {
	Name  string       `json:"name"`
	State string       `json:"state"`
	Error string       `json:"error,omitempty"`
	Tools []toolReport `json:"tools"`
	// Quarantined are the tools held by tool integrity (docs/security.md#tool-integrity): not
	// listed, calls refused.
	Quarantined []quarantinedReport `json:"quarantined,omitempty"`
	// PinError says why the server's pin file cannot be used.
	PinError string `json:"pin_error,omitempty"`
}

type toolReport struct {
	Name        string `json:"name"`
	Original    string `json:"original"`
	Description string `json:"description"`
	// Findings are the description scan's findings (docs/security.md#tool-integrity).
	Findings []integrity.Finding `json:"findings,omitempty"`
	// Changed: the definition differs from its pin (served under
	// pinning: warn).
	Changed bool `json:"changed,omitempty"`
}

type quarantinedReport struct {
	Name        string              `json:"name"`
	Original    string              `json:"original"`
	Reasons     []integrity.Reason  `json:"reasons"`
	Fingerprint string              `json:"fingerprint,omitempty"`
	Findings    []integrity.Finding `json:"findings,omitempty"`
	Review      string              `json:"review"`
}

func runTools(ctx context.Context, cfg *config.Config, o options, stdout, stderr io.Writer) error {
	rt, a, err := startFor(ctx, cfg, o, stderr, true)
	if err != nil {
		return err
	}
	defer rt.close()
	rt.waitAll(ctx)
	rep := buildToolsReport(rt, a, o.perCall(), rt.reviews())
	if err := printToolsReport(rep, o.json, stdout); err != nil {
		return err
	}
	return rep.failure()
}

// failure is the exit-1 error of a report in which some enabled server is
// not connected (its error is in the report), nil when every one is.
func (rep toolsReport) failure() error {
	var down []string
	enabled := 0
	for _, s := range rep.Servers {
		if s.State == status.StateDisabled {
			continue
		}
		enabled++
		if s.State != upstream.StateConnected.String() {
			down = append(down, s.Name+" ("+s.State+")")
		}
	}
	if len(down) == 0 {
		return nil
	}
	return &exitError{code: exitRuntime, err: fmt.Errorf("%d of %d servers not connected: %s", len(down), enabled, strings.Join(down, ", "))}
}

// printToolsReport writes rep as JSON or as a table.
func printToolsReport(rep toolsReport, asJSON bool, stdout io.Writer) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(rep)
	}
	// Two groups of columns: the server lines, and the tool lines under
	// them (held tools and the pin error included).
	const servers, tools = 0, 1
	var t table
	for _, s := range rep.Servers {
		cells := []string{s.Name, s.State, fmt.Sprintf("%d tools", len(s.Tools))}
		if s.Error != "" {
			cells = append(cells, s.Error)
		}
		t.add(servers, "", cells...)
		for _, tool := range s.Tools {
			t.add(tools, "  ", tool.Name, cutWidth(tool.Description, maxDescriptionWidth))
			addFindings(&t, tool.Findings)
		}
		for _, q := range s.Quarantined {
			t.add(tools, "  ", "! "+q.Name, "quarantined ("+joinReasons(q.Reasons)+"): "+q.Review)
			addFindings(&t, q.Findings)
		}
		if s.PinError != "" {
			t.add(tools, "  ", "pins unusable", s.PinError)
		}
	}
	return t.write(stdout)
}

// maxDescriptionWidth bounds the first line of a description in the tools
// table (terminal cells), so that a line fits a wide terminal.
const maxDescriptionWidth = 80

// addFindings adds the scan findings of a tool, one line each, under it.
func addFindings(t *table, fs []integrity.Finding) {
	for _, f := range fs {
		t.add(-1, "    ", fmt.Sprintf("%s finding: %s: %s (%s)", f.Level, f.Kind, f.Excerpt, f.Where))
	}
}

func joinReasons(rs []integrity.Reason) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return strings.Join(out, ", ")
}

// buildToolsReport lists, per granted server, the tools the agent sees and
// the tools tool integrity holds (from reviews, by server).
func buildToolsReport(rt *runtime, a *filter.Agent, perCall []string, reviews map[string]*integrity.Review) toolsReport {
	byServer := map[string][]toolReport{}
	held := map[string][]quarantinedReport{}
	for _, e := range rt.proxy.Catalog().Tools() {
		t := e.PolicyTool()
		if !e.Connected || a.Decide(t, perCall) != filter.RuleNone || !a.Visible(t, nil) {
			continue
		}
		var v *integrity.Verdict
		if rev := reviews[e.Server]; rev != nil {
			v = rev.Verdict(e.Name)
		}
		switch {
		case v != nil && v.Held:
			held[e.Server] = append(held[e.Server], quarantinedReport{Name: e.Exposed, Original: e.Name, Reasons: v.Reasons,
				Fingerprint: v.Fingerprint, Findings: v.Findings, Review: reviewCommand(v)})
		case v != nil:
			byServer[e.Server] = append(byServer[e.Server], toolReport{Name: e.Exposed, Original: e.Name, Description: e.Description,
				Findings: v.Findings, Changed: v.Changed})
		default:
			byServer[e.Server] = append(byServer[e.Server], toolReport{Name: e.Exposed, Original: e.Name, Description: e.Description})
		}
	}
	rep := toolsReport{Agent: a.Name, Servers: []serverReport{}}
	scrub := sanitize.NewScrubber(rt.cfg.Secrets()) // an upstream may echo a header in its error
	for name, c := range rt.connections() {
		if !a.Granted(name) {
			continue
		}
		s := c.Snapshot()
		sr := serverReport{Name: name, State: s.Status(), Tools: byServer[name], Quarantined: held[name]}
		if rev := reviews[name]; rev != nil && rev.Err != nil {
			sr.PinError = rev.Err.Error()
		}
		if sr.Tools == nil {
			sr.Tools = []toolReport{}
		}
		if s.Err != nil && s.State != upstream.StateConnected {
			sr.Error = scrub.Text(s.Err.Error())
		}
		rep.Servers = append(rep.Servers, sr)
	}
	for name, s := range rt.cfg.Servers {
		if (!s.IsEnabled() || !rt.cfg.IsEnabled()) && (!rt.cfg.HasAgents() || filter.Grants(rt.cfg, rt.cfg.Agents[a.Name])[name]) {
			rep.Servers = append(rep.Servers, serverReport{Name: name, State: status.StateDisabled, Tools: []toolReport{}})
		}
	}
	sort.Slice(rep.Servers, func(i, j int) bool { return rep.Servers[i].Name < rep.Servers[j].Name })
	return rep
}

// reviewCommand is what an operator runs about a held tool.
func reviewCommand(v *integrity.Verdict) string {
	for _, r := range v.Reasons {
		if r == integrity.ReasonChanged || r == integrity.ReasonNew {
			return "mcp-proxy tools diff " + v.Server + "; mcp-proxy tools approve " + v.Server + "/" + v.Name
		}
	}
	if len(v.Reasons) > 0 && v.Reasons[0] == integrity.ReasonScan {
		return "re-describe it under servers." + v.Server + ".tools.overrides, or set servers." + v.Server + ".scan: warn"
	}
	return "repair or delete the pin file named in pin_error"
}

func runCall(ctx context.Context, cfg *config.Config, o options, name, arguments string, stdout, stderr io.Writer) error {
	if !json.Valid([]byte(arguments)) {
		return usageErr("arguments are not valid JSON: %s", arguments)
	}
	rt, _, err := startFor(ctx, cfg, o, stderr, true)
	if err != nil {
		return err
	}
	defer rt.close()
	rt.waitAll(ctx)
	result, err := rt.proxy.CallTool(ctx, o.agent, o.perCall(), name, json.RawMessage(arguments))
	if err != nil {
		return &exitError{code: exitRuntime, err: err}
	}
	if _, err := stdout.Write(append(indent(result), '\n')); err != nil {
		return err
	}
	if downstream.IsErrorResult(result) {
		return &exitError{code: exitRuntime, err: fmt.Errorf("tool %s returned isError: true", name)}
	}
	return nil
}

// indent pretty-prints raw for a terminal, keeping its bytes otherwise.
func indent(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return raw
	}
	return buf.Bytes()
}
