package integrity

import "github.com/mcp-proxy/mcp-proxy/config"

// Pinning is a server's pinning mode (config key pinning).
type Pinning string

// Pinning modes.
const (
	// PinQuarantine holds a tool whose definition changed since it was
	// pinned until an operator approves it.
	PinQuarantine Pinning = "quarantine"
	// PinWarn logs and counts a changed definition and serves it; the pin
	// stays, so the change is pending in the pin file until approved.
	PinWarn Pinning = "warn"
	// PinOff neither pins nor compares; the pin file is not touched.
	PinOff Pinning = "off"
)

// NewTools is what happens to a tool that appears after its server was
// pinned (config key new_tools).
type NewTools string

// NewTools modes.
const (
	NewAllow      NewTools = "allow"      // pinned and served
	NewQuarantine NewTools = "quarantine" // held until approved
)

// ScanMode is what the description scan does with its findings (config key
// scan).
type ScanMode string

// Scan modes.
const (
	// ScanWarn logs and counts findings; clients see the tool as it is.
	ScanWarn ScanMode = "warn"
	// ScanStrip also removes invisible characters and hidden markup from
	// what clients see.
	ScanStrip ScanMode = "strip"
	// ScanQuarantine holds a tool with a quarantine-level finding.
	ScanQuarantine ScanMode = "quarantine"
)

// Policy is one server's integrity settings. The zero Policy behaves as the
// defaults: pinning warn, new_tools allow, scan warn.
type Policy struct {
	Pinning  Pinning
	NewTools NewTools
	Scan     ScanMode
}

// PolicyOf returns server's policy from a loaded config (defaults applied,
// so a server's empty key has already become the top-level value). An
// unknown server gets the top-level values.
func PolicyOf(cfg *config.Config, server string) Policy {
	p := Policy{Pinning: Pinning(cfg.Pinning), NewTools: NewTools(cfg.NewTools), Scan: ScanMode(cfg.Scan)}
	if s := cfg.Servers[server]; s != nil {
		p = Policy{Pinning: Pinning(s.Pinning), NewTools: NewTools(s.NewTools), Scan: ScanMode(s.Scan)}
	}
	return p.normalized()
}

// normalized fills empty fields with the defaults.
func (p Policy) normalized() Policy {
	if p.Pinning == "" {
		p.Pinning = PinWarn
	}
	if p.NewTools == "" {
		p.NewTools = NewAllow
	}
	if p.Scan == "" {
		p.Scan = ScanWarn
	}
	return p
}

// PinningServers returns the enabled servers of cfg whose pinning is not
// off, the ones whose pin files must be readable for the proxy to start.
// It is empty when cfg.Enabled is false.
func PinningServers(cfg *config.Config) []string {
	if !cfg.IsEnabled() {
		return nil
	}
	var out []string
	for _, name := range cfg.ServerNames() {
		if s := cfg.Servers[name]; s.IsEnabled() && PolicyOf(cfg, name).Pinning != PinOff {
			out = append(out, name)
		}
	}
	return out
}
