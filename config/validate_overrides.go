package config

import (
	"strconv"

	"github.com/mcp-proxy/mcp-proxy/namespace"
)

// ProxyToolNames are the names of the proxy's own tools (docs/deferred-loading.md, docs/resources.md#resources-and-prompts). An
// override may not take one: where the proxy offers its own tool, a tool
// of the same name is not listed.
var ProxyToolNames = []string{"tool_search", "call_tool", "mcp_resources", "mcp_prompts"}

// hintAnnotations are the boolean hints of the MCP tool annotations.
var hintAnnotations = []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

// approvedArgument is the argument the proxy removes from every call so
// that a model cannot approve itself (docs/agents.md#approval).
const approvedArgument = "approved"

// validateOverrides checks every server's tools.overrides (docs/agents.md#overrides-and-rate-limits): names
// valid and unique across the config, values JSON can hold, hints of the
// right type, pinned arguments the proxy can send. Whether a pinned
// parameter is in the tool's schema is only known at discovery, where the
// proxy logs a warning.
func (c *Config) validateOverrides(v *validator) {
	names := map[string]string{} // override name -> the path of the first one
	for _, server := range sortedKeys(c.Servers) {
		s := c.Servers[server]
		if s == nil {
			continue
		}
		base := joinPath("servers", pathKey(server)) + ".tools.overrides"
		for _, tool := range sortedKeys(s.Tools.Overrides) {
			path := joinPath(base, pathKey(tool))
			o := s.Tools.Overrides[tool]
			switch {
			case tool == "":
				v.add(path, "empty tool name")
				continue
			case o == nil || o.empty():
				v.add(path, "sets nothing: give name, title, description, annotations or arguments")
				continue
			}
			c.validateOverride(v, path, o)
			if o.Name == "" || !namespace.ValidName(o.Name) {
				continue
			}
			if first, dup := names[o.Name]; dup {
				v.add(path+".name", strconv.Quote(o.Name)+" is also the name given by "+first+": two tools cannot share one name")
			} else {
				names[o.Name] = path
			}
		}
	}
}

// empty reports whether the override changes nothing.
func (o *ToolOverride) empty() bool {
	return o.Name == "" && o.Title == "" && o.Description == "" && len(o.Annotations) == 0 && len(o.Arguments) == 0
}

func (c *Config) validateOverride(v *validator, path string, o *ToolOverride) {
	at := func(field string) string { return path + "." + field }
	switch {
	case o.Name == "":
		if c.isSet(at("name")) {
			v.add(at("name"), "must not be empty (leave it out to keep the default name)")
		}
	case !namespace.ValidName(o.Name):
		v.add(at("name"), "must be 1 to 64 of letters, digits, \"_\" and \"-\" (the names model APIs accept), got "+quoteValue(o.Name))
	default:
		for _, own := range ProxyToolNames {
			if o.Name == own {
				v.add(at("name"), strconv.Quote(own)+" is the name of one of the proxy's own tools")
			}
		}
	}
	for _, field := range []struct{ name, value string }{{"title", o.Title}, {"description", o.Description}} {
		if field.value == "" && c.isSet(at(field.name)) {
			v.add(at(field.name), "must not be empty (leave it out to keep the upstream's)")
		}
	}
	for _, k := range sortedKeys(o.Annotations) {
		kp := joinPath(at("annotations"), pathKey(k))
		if k == "" {
			v.add(at("annotations"), "empty annotation name")
			continue
		}
		val := o.Annotations[k]
		if _, err := JSONValue(val); err != nil {
			v.add(kp, err.Error())
			continue
		}
		_, isBool := val.(bool)
		_, isString := val.(string)
		switch {
		case isHint(k) && val != nil && !isBool:
			v.add(kp, "must be true or false (null removes the upstream's)")
		case k == "title" && val != nil && !isString:
			v.add(kp, "must be a string (null removes the upstream's)")
		}
	}
	for _, k := range sortedKeys(o.Arguments) {
		kp := joinPath(at("arguments"), pathKey(k))
		switch k {
		case "":
			v.add(at("arguments"), "empty parameter name")
			continue
		case approvedArgument:
			v.add(kp, `the proxy removes "approved" from every call, so it cannot be pinned`)
			continue
		}
		if _, err := JSONValue(o.Arguments[k]); err != nil {
			v.add(kp, err.Error())
		}
	}
}

func isHint(k string) bool {
	for _, h := range hintAnnotations {
		if k == h {
			return true
		}
	}
	return false
}

// overrideWarnings notes the overrides that widen what read_only agents
// reach (docs/agents.md#overrides-and-rate-limits: `validate` says so).
func (c *Config) overrideWarnings() []string {
	var out []string
	for _, server := range sortedKeys(c.Servers) {
		s := c.Servers[server]
		if s == nil {
			continue
		}
		for _, tool := range sortedKeys(s.Tools.Overrides) {
			o := s.Tools.Overrides[tool]
			if o == nil {
				continue
			}
			if ro, ok := o.Annotations["readOnlyHint"].(bool); ok && ro {
				path := joinPath(joinPath("servers", pathKey(server))+".tools.overrides", pathKey(tool)) + ".annotations.readOnlyHint"
				out = append(out, path+": marks the tool read-only, so agents with autonomy read_only may call it")
			}
		}
	}
	return out
}
