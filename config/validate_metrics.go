package config

import (
	"net"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
)

// validateMetrics checks metrics.tokens like an agent's tokens.
func (c *Config) validateMetrics(v *validator) {
	checkTokens(v, "metrics.tokens", c.Metrics.Tokens)
}

// metricsWarnings warns about a metrics listener others can reach without a
// token: /metrics names agents, servers and tools (docs/configuration.md#metrics).
func (c *Config) metricsWarnings() []string {
	if c.Metrics.Listen == "" || len(c.Metrics.Tokens) > 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(c.Metrics.Listen)
	if err != nil || httpguard.IsLoopback(host) {
		return nil
	}
	return []string{"metrics.tokens: metrics.listen " + quoteValue(c.Metrics.Listen) +
		" is not a loopback address and no tokens are set, so anyone who reaches it can read the metrics and the status page (whose actions need its token)"}
}

// checkTokens checks a list of bearer tokens: each non-empty, without
// spaces or control characters (they could not be sent in a header).
func checkTokens(v *validator, path string, tokens []string) {
	for i, t := range tokens {
		p := indexPath(path, i)
		switch {
		case t == "":
			v.add(p, "empty token")
		case containsSpaceOrControl(t):
			v.add(p, "token contains spaces or control characters")
		}
	}
}

func containsSpaceOrControl(s string) bool {
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return true
		}
	}
	return false
}
