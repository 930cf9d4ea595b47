package config

import (
	"path/filepath"
	"strings"
)

// Allowed values of the tool integrity keys (docs/security.md#tool-integrity).
var (
	pinningModes  = []string{"quarantine", "warn", "off"}
	newToolsModes = []string{"allow", "quarantine"}
	scanModes     = []string{"warn", "strip", "quarantine"}
)

// validateIntegrity checks pinning, new_tools and scan (top level and per
// server) and state_dir. A server value equal to the top-level one is only
// judged at the top level, so one bad default is one problem, not one per
// server.
func (c *Config) validateIntegrity(v *validator) {
	v.oneOf("pinning", c.Pinning, pinningModes)
	v.oneOf("new_tools", c.NewTools, newToolsModes)
	v.oneOf("scan", c.Scan, scanModes)
	pins := c.Pinning != "off"
	for _, name := range sortedKeys(c.Servers) {
		s := c.Servers[name]
		if s == nil {
			continue
		}
		path := joinPath("servers", pathKey(name))
		if s.Pinning != c.Pinning {
			v.oneOf(path+".pinning", s.Pinning, pinningModes)
		}
		if s.NewTools != c.NewTools {
			v.oneOf(path+".new_tools", s.NewTools, newToolsModes)
		}
		if s.Scan != c.Scan {
			v.oneOf(path+".scan", s.Scan, scanModes)
		}
		if s.IsEnabled() && s.Pinning != "off" {
			pins = true
		}
	}
	switch dir := c.StateDir; {
	case dir == "":
		if pins {
			v.add("state_dir", "no default directory could be found for the tool pins: set state_dir, $XDG_STATE_HOME or $HOME (or pinning: off)")
		}
	case strings.HasPrefix(dir, "~"):
		v.add("state_dir", `"~" is not expanded: write ${HOME} instead`)
	case !filepath.IsAbs(dir):
		v.add("state_dir", "must be an absolute path, got "+quoteValue(dir))
	}
}
