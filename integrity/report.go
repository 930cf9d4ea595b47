package integrity

import (
	"slices"
	"sort"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// report logs and counts what a Review found for one tool, each event once
// per tool and fingerprint (and, for findings, per set of findings).
func (g *Guard) report(st *serverState, server string, pol Policy, v *Verdict, pins []pinState, i int) {
	tool := sanitize.Text(v.Name)
	if pins != nil {
		p := pins[i]
		switch {
		case p.held == ReasonNew:
			if g.once(st, "new", v.Name, v.Fingerprint) {
				g.metrics.ToolFinding(server, string(KindNewTool))
				g.log.Warn().Str("server", server).Str("tool", tool).Str("fingerprint", ShortFingerprint(v.Fingerprint)).
					Str("review", "mcp-proxy tools diff "+server).Str("approve", "mcp-proxy tools approve "+server+"/"+v.Name).
					Msg("new tool quarantined until approved (new_tools: quarantine)")
			}
		case p.changed:
			if g.once(st, "changed", v.Name, v.Fingerprint) {
				g.metrics.ToolFinding(server, string(KindDefinitionChanged))
				msg := "tool definition changed since it was pinned: quarantined until approved"
				if p.held == "" {
					msg = "tool definition changed since it was pinned: serving it anyway (pinning: " + string(pol.Pinning) + ")"
				}
				ev := g.log.Warn().Str("server", server).Str("tool", tool).Str("fingerprint", ShortFingerprint(v.Fingerprint))
				if pinned := pinnedFingerprint(st.file, v.Name); pinned != "" {
					ev = ev.Str("pinned", ShortFingerprint(pinned))
				}
				ev.Str("review", "mcp-proxy tools diff "+server).Str("approve", "mcp-proxy tools approve "+server+"/"+v.Name).Msg(msg)
			}
		case p.event == "pinned":
			g.log.Info().Str("server", server).Str("tool", tool).Str("fingerprint", ShortFingerprint(v.Fingerprint)).Msg("new tool pinned")
		case p.event == "returned":
			g.log.Info().Str("server", server).Str("tool", tool).Str("fingerprint", ShortFingerprint(v.Fingerprint)).
				Msg("tool definition is back to its pinned fingerprint")
		}
	}
	if prev := st.held[v.Name]; prev != "" && !v.Held {
		g.log.Info().Str("server", server).Str("tool", tool).Str("was", prev).Msg("tool released from quarantine")
	}
	if len(v.Findings) > 0 && g.once(st, "scan", v.Name, v.Fingerprint+"\x00"+findingsKey(v.Findings)) {
		for _, f := range v.Findings {
			g.metrics.ToolFinding(server, string(f.Kind))
		}
		action := "served as is (scan: " + string(pol.Scan) + ")"
		switch {
		case slices.Contains(v.Reasons, ReasonScan):
			action = "quarantined (scan: quarantine)"
		case v.Held:
			// Held for another reason (pinning, new_tools, the pin
			// store): the scan's own mode did not decide, and the log
			// must not say the tool is served.
			action = "held in quarantine (" + joinReasons(v.Reasons) + "); the scan alone would not hold it (scan: " + string(pol.Scan) + ")"
		case pol.Scan == ScanStrip && anyStripped(v.Findings):
			action = "served with invisible characters and hidden markup removed (scan: strip)"
		}
		ev := g.log.Info()
		if hasLevel(v.Findings, LevelQuarantine) {
			ev = g.log.Warn()
		}
		ev.Str("server", server).Str("tool", tool).Str("fingerprint", ShortFingerprint(v.Fingerprint)).
			Strs("kinds", findingKinds(v.Findings)).Interface("findings", v.Findings).Str("action", action).
			Msg("tool description scan findings")
	}
}

// once reports whether the event key was neither met by the last Review
// nor earlier in this one, and marks it met. Called only during a Review.
func (g *Guard) once(st *serverState, parts ...string) bool {
	key := strings.Join(parts, "\x00")
	if st.logged[key] || st.logging[key] {
		st.logging[key] = true
		return false
	}
	st.logging[key] = true
	return true
}

func pinnedFingerprint(f *pinFile, name string) string {
	if f == nil || f.Tools[name] == nil || f.Tools[name].Pinned == nil {
		return ""
	}
	return f.Tools[name].Pinned.Fingerprint
}

// findingsKey identifies a set of findings (rule and member of each).
func findingsKey(fs []Finding) string {
	keys := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = f.Rule + "@" + f.Where
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// findingKinds lists the distinct kinds, sorted.
func findingKinds(fs []Finding) []string {
	seen := map[Kind]bool{}
	var out []string
	for _, f := range fs {
		if !seen[f.Kind] {
			seen[f.Kind] = true
			out = append(out, string(f.Kind))
		}
	}
	sort.Strings(out)
	return out
}

func anyStripped(fs []Finding) bool {
	for _, f := range fs {
		if f.Stripped {
			return true
		}
	}
	return false
}

// reportFirstSight logs the pins of a server seen for the first time.
func (g *Guard) reportFirstSight(server string, pins []pinState) {
	n := 0
	for _, p := range pins {
		if p.event == "first" {
			n++
		}
	}
	if n > 0 {
		g.log.Info().Str("server", server).Int("tools", n).Str("file", g.store.Path(server)).
			Msg("pinned the tools of a server seen for the first time (trust on first use)")
	}
}

// joinReasons says why a tool is held, each reason with the setting that
// holds it.
func joinReasons(rs []Reason) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		switch r {
		case ReasonChanged:
			parts[i] = "definition changed since pinned, pinning: quarantine"
		case ReasonNew:
			parts[i] = "new tool, new_tools: quarantine"
		case ReasonStoreError:
			parts[i] = "the pin file cannot be used, pinning: quarantine"
		default:
			parts[i] = string(r)
		}
	}
	return strings.Join(parts, "; ")
}
