package integrity

import (
	"encoding/json"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/filter"
)

// Reason says why a tool is held.
type Reason string

// Reasons.
const (
	// ReasonChanged: the upstream's definition differs from the pinned
	// one (pinning: quarantine).
	ReasonChanged Reason = "changed"
	// ReasonNew: the tool appeared after its server was pinned
	// (new_tools: quarantine).
	ReasonNew Reason = "new"
	// ReasonScan: the description scan found a quarantine-level finding
	// (scan: quarantine).
	ReasonScan Reason = "scan"
	// ReasonStoreError: the server's pin file cannot be read or written,
	// so nothing can be compared (pinning: quarantine fails closed).
	ReasonStoreError Reason = "store_error"
)

// Verdict is the integrity decision on one tool of one catalog build.
type Verdict struct {
	// Server and Name are the configured server name and the upstream's
	// own tool name.
	Server string
	Name   string
	// Fingerprint is the SHA-256 of the upstream's definition ("" when the
	// tool object could not be read).
	Fingerprint string
	// Held is true when the tool is quarantined: it must not be listed in
	// tools/list or returned by tool_search, and a call to it must be
	// refused with Refusal's text (rule "quarantined").
	Held bool
	// Reasons are why it is held, in the order changed/new, scan,
	// store_error; empty when not held.
	Reasons []Reason
	// Changed is true when the upstream's definition differs from the
	// pinned one, also when it is served (pinning: warn).
	Changed bool
	// Visible is what clients are to see of the tool: the Tool's Visible
	// bytes (or Upstream when Visible was nil) with, under scan: strip,
	// invisible characters and hidden markup removed from its texts. It is
	// the input slice itself when nothing was removed, and must not be
	// modified.
	Visible json.RawMessage
	// Findings are the description scan's findings on the client-visible
	// definition, before any strip (Stripped marks what strip removed).
	Findings []Finding
}

// Refusal is the text of the isError result of a call to a held tool,
// exposed to clients as exposed: the rule, why, and the command that
// reviews it.
func (v *Verdict) Refusal(exposed string) string {
	msg := "tool '" + exposed + "' is denied by " + string(filter.RuleQuarantined) + ": "
	var why []string
	for _, r := range v.Reasons {
		switch r {
		case ReasonChanged:
			why = append(why, "its definition changed since it was pinned; review the change with 'mcp-proxy tools diff "+v.Server+
				"' and approve it with 'mcp-proxy tools approve "+v.Server+"/"+v.Name+"'")
		case ReasonNew:
			why = append(why, "it appeared after its server was pinned; review it with 'mcp-proxy tools diff "+v.Server+
				"' and approve it with 'mcp-proxy tools approve "+v.Server+"/"+v.Name+"'")
		case ReasonScan:
			why = append(why, "its description has findings of the description scan ("+strings.Join(v.kinds(LevelQuarantine), ", ")+
				"); see 'mcp-proxy tools --json', and re-describe it under servers."+v.Server+".tools.overrides or set servers."+v.Server+".scan: warn")
		case ReasonStoreError:
			why = append(why, "the pin file of server "+v.Server+" cannot be read, so its tools cannot be checked; see the proxy's log")
		}
	}
	return msg + strings.Join(why, "; ")
}

// kinds lists the distinct kinds of the findings at level, in order.
func (v *Verdict) kinds(level Level) []string {
	var out []string
	seen := map[Kind]bool{}
	for _, f := range v.Findings {
		if f.Level == level && !seen[f.Kind] {
			seen[f.Kind] = true
			out = append(out, string(f.Kind))
		}
	}
	return out
}

// Review is the result of Guard.Review for one server.
type Review struct {
	Server string
	// Verdicts are in the order of the input tools.
	Verdicts []Verdict
	// Err is set when the server's pin file could not be read or written
	// (already logged by the Guard); the verdicts then fail closed under
	// pinning: quarantine (every tool held, ReasonStoreError) and open
	// under pinning: warn.
	Err error
}

// Held counts the held tools.
func (r *Review) Held() int {
	n := 0
	for i := range r.Verdicts {
		if r.Verdicts[i].Held {
			n++
		}
	}
	return n
}

// Verdict returns the verdict of the upstream tool name, or nil.
func (r *Review) Verdict(name string) *Verdict {
	for i := range r.Verdicts {
		if r.Verdicts[i].Name == name {
			return &r.Verdicts[i]
		}
	}
	return nil
}
