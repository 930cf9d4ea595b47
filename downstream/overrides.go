package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/override"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Tool overrides (docs/agents.md#overrides-and-rate-limits), in the catalog and the call chain:
//
//   - A catalog build applies each server's overrides to its tools
//     (showTools): the overridden bytes are what integrity scans (its
//     Visible input, so an override's description can release a tool the
//     scan held) and what clients see; an override's name goes to the
//     namespace as a reserved rename. The fingerprint stays the upstream's.
//   - pinnedGate refuses a call that sets a pinned parameter and sets the
//     pinned values in the arguments sent upstream; the call goes to the
//     upstream's own tool name, and its result passes unchanged.

// toolOverrides are the compiled tools.overrides of one config, by server
// and upstream tool name; nil when the config has none.
type toolOverrides map[string]map[string]*override.Tool

// compileOverrides compiles every server's overrides. Validation has
// refused what cannot compile; anything that still fails is logged and left
// out.
func compileOverrides(cfg *config.Config, log zerolog.Logger) toolOverrides {
	var out toolOverrides
	for name, s := range cfg.Servers {
		if s == nil || len(s.Tools.Overrides) == 0 {
			continue
		}
		m := make(map[string]*override.Tool, len(s.Tools.Overrides))
		for tool, o := range s.Tools.Overrides {
			if o == nil {
				continue
			}
			t, err := override.Compile(o)
			if err != nil {
				log.Warn().Str("server", name).Str("tool", sanitize.Text(tool)).Err(err).Msg("tool override ignored")
				continue
			}
			m[tool] = t
		}
		if out == nil {
			out = toolOverrides{}
		}
		out[name] = m
	}
	return out
}

// shownTool is one upstream tool as clients are to see it before tool
// integrity has its say: the override applied, or the upstream's own.
type shownTool struct {
	raw      json.RawMessage
	readOnly bool
	ov       *override.Tool // nil: no override
}

// showTools applies a server's overrides (nil: none) to its tools, in
// order. The warnings name pinned parameters a tool's schema does not
// declare and, for a connected server, overrides of tools it does not list;
// the catalog logs each once.
func showTools(server string, ovs map[string]*override.Tool, tools []upstream.Tool, connected bool) ([]shownTool, []string) {
	out := make([]shownTool, len(tools))
	var warns []string
	used := 0
	for i, t := range tools {
		out[i] = shownTool{raw: t.Raw, readOnly: t.ReadOnly}
		ov := ovs[t.Name]
		if ov == nil {
			continue
		}
		used++
		applied, err := ov.Apply(t.Raw)
		if err != nil {
			warns = append(warns, fmt.Sprintf("server %s: tools.overrides of tool %s not applied: %v", server, sanitize.Text(t.Name), err))
			continue
		}
		out[i] = shownTool{raw: applied.Raw, readOnly: applied.ReadOnly, ov: ov}
		if len(applied.Missing) > 0 {
			warns = append(warns, fmt.Sprintf("server %s: tools.overrides.%s pins %s, which the tool's inputSchema does not declare; sent in every call all the same",
				server, sanitize.Text(t.Name), strings.Join(applied.Missing, ", ")))
		}
	}
	if connected && used < len(ovs) {
		listed := make(map[string]bool, len(tools))
		for _, t := range tools {
			listed[t.Name] = true
		}
		for _, name := range slices.Sorted(maps.Keys(ovs)) {
			if !listed[name] {
				warns = append(warns, fmt.Sprintf("server %s: tools.overrides names tool %s, which the server does not list", server, sanitize.Text(name)))
			}
		}
	}
	return out, warns
}

// pinnedGate applies a tool's pinned arguments (docs/agents.md#overrides-and-rate-limits): a call that sets
// one is refused with an isError result naming them, before any limit is
// spent or person asked; otherwise the pinned values go into the arguments
// sent upstream (toolCall.upArgs).
func (tc *toolCalls) pinnedGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		ov := c.entry.override
		if ov == nil || len(ov.Pinned()) == 0 {
			return next(ctx, c)
		}
		args, sent, err := ov.Arguments(c.args)
		switch {
		case err != nil:
			c.outcome = metrics.OutcomeError
			return nil, errorf(codeInvalidParams, "invalid tools/call params: %s", sanitize.Error(err.Error()))
		case len(sent) > 0:
			c.outcome = metrics.OutcomeDenied
			return textResult(pinnedRefusal(c.name, sent), true), nil
		}
		c.upArgs = args
		return next(ctx, c)
	}
}

// pinnedRefusal is the text of a call that set pinned parameters.
func pinnedRefusal(tool string, sent []string) string {
	quoted := make([]string, len(sent))
	for i, s := range sent {
		quoted[i] = "'" + sanitize.Text(s) + "'"
	}
	what, them := "argument "+quoted[0]+" is", "it"
	if len(quoted) > 1 {
		what, them = "arguments "+strings.Join(quoted, ", ")+" are", "them"
	}
	return fmt.Sprintf("tool '%s' was not run: %s fixed by the proxy's configuration and may not be sent; call the tool without %s",
		tool, what, them)
}

// integrityTools is what tool integrity reviews of a server's tools: each
// upstream definition (the fingerprint's) and, for an overridden tool, the
// bytes clients would see (the scan's), as a catalog build gives them. The
// `tools` verb reviews through it so that it judges what the proxy serves.
func (e *env) integrityTools(server string, tools []upstream.Tool) []integrity.Tool {
	shown, _ := showTools(server, e.gen().overrides[server], tools, false)
	out := make([]integrity.Tool, len(tools))
	for i, t := range tools {
		out[i] = integrity.Tool{Name: t.Name, Upstream: t.Raw}
		if shown[i].ov != nil {
			out[i].Visible = shown[i].raw
		}
	}
	return out
}
