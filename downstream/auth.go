package downstream

import (
	"net/http"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
)

// hostAllowed and originAllowed guard the MCP endpoint against DNS
// rebinding (MCP transport spec): on a loopback listener the Host must be a
// loopback name, and a browser's Origin must be the endpoint's own (or
// loopback to loopback). The rules are httpguard's, which the metrics
// listener applies too.
func hostAllowed(r *http.Request) bool { return httpguard.HostAllowed(r) }

func originAllowed(r *http.Request) bool { return httpguard.OriginAllowed(r) }
