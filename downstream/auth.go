package downstream

import (
	"net/http"
	"strconv"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
)

// authorized reports whether r carries a bearer token of agent. An agent
// without tokens needs none (config validation refuses that on a
// non-loopback address).
func (p *Proxy) authorized(r *http.Request, agent string) bool {
	var tokens []string
	if a := p.gen().cfg.Agents[agent]; a != nil {
		tokens = a.Tokens
	}
	return len(tokens) == 0 || httpguard.BearerAllowed(r, tokens)
}

// originAllowed validates the Origin header against DNS rebinding
// (httpguard.OriginAllowed).
func originAllowed(r *http.Request) bool { return httpguard.OriginAllowed(r) }

func strconvQuote(s string) string { return strconv.Quote(s) }
