package override

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Arguments returns a call's arguments with every pinned parameter set to
// its pinned value, or the pinned parameters the client sent (sorted, each
// once), which the caller refuses: a client may not set a pinned value. args
// is the client's arguments object, or empty or null for none; the pins go
// after its members, which keep their bytes. An error means args is not a
// JSON object. args is never modified.
func (t *Tool) Arguments(args json.RawMessage) (json.RawMessage, []string, error) {
	if len(t.pins) == 0 {
		return args, nil, nil
	}
	if rawjson.IsNull(bytes.TrimSpace(args)) {
		out := make([]byte, 0, len(t.pinsJSON)+2)
		out = append(append(append(out, '{'), t.pinsJSON...), '}')
		return out, nil, nil
	}
	ms, err := rawjson.Members(args)
	if err != nil {
		return nil, nil, err
	}
	var sent []string
	for _, m := range ms {
		if slices.Contains(t.pinned, m.Key) && !slices.Contains(sent, m.Key) {
			sent = append(sent, m.Key)
		}
	}
	if len(sent) > 0 {
		slices.Sort(sent)
		return nil, sent, nil
	}
	at, comma := bytes.IndexByte(args, '{')+1, false
	if len(ms) > 0 {
		at, comma = ms[len(ms)-1].ValueEnd, true
	}
	out := make([]byte, 0, len(args)+len(t.pinsJSON)+1)
	out = append(out, args[:at]...)
	if comma {
		out = append(out, ',')
	}
	out = append(out, t.pinsJSON...)
	return append(out, args[at:]...), nil, nil
}
