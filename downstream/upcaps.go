package downstream

import "encoding/json"

// upstreamCaps is the capabilities object of c as an upstream of the
// 2026-07-28 era is told them on a request sent for this client
// (upstream.WithClientCapabilities): only the requests the proxy relays to
// a client, and only those this client can answer.
func (c clientCaps) upstreamCaps() json.RawMessage {
	out := map[string]any{}
	if c.sampling {
		out["sampling"] = struct{}{}
	}
	if c.elicitation || c.elicitationURL {
		modes := map[string]any{}
		if c.elicitation {
			modes["form"] = struct{}{}
		}
		if c.elicitationURL {
			modes["url"] = struct{}{}
		}
		out["elicitation"] = modes
	}
	b, _ := json.Marshal(out)
	return b
}
