package downstream

import "encoding/json"

// upstreamCaps is the capabilities object of c as an upstream is told them
// on a request sent for this client (in the 2026-07-28 era in its _meta,
// over a session-era Streamable HTTP server by the session it goes on)
// (upstream.WithClientCapabilities): only the requests the proxy relays to
// a client, and only those this client can answer. It runs on every
// tools/call, so the eight possible objects are encoded once.
func (c clientCaps) upstreamCaps() json.RawMessage {
	i := 0
	if c.sampling {
		i |= 1
	}
	if c.elicitation {
		i |= 2
	}
	if c.elicitationURL {
		i |= 4
	}
	return upstreamCapsTable[i]
}

// upstreamCapsTable holds upstreamCaps for each combination of sampling
// (bit 0), form elicitation (bit 1) and URL elicitation (bit 2).
var upstreamCapsTable = func() (t [8]json.RawMessage) {
	for i := range t {
		out := map[string]any{}
		if i&1 != 0 {
			out["sampling"] = struct{}{}
		}
		if i&6 != 0 {
			modes := map[string]any{}
			if i&2 != 0 {
				modes["form"] = struct{}{}
			}
			if i&4 != 0 {
				modes["url"] = struct{}{}
			}
			out["elicitation"] = modes
		}
		t[i], _ = json.Marshal(out)
	}
	return t
}()
