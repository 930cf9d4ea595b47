package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// A Streamable HTTP server may open a stream with an event that has an id
// and empty data, so that a client can resume from it. The answer that
// follows is read, and the priming event leaves no warning in the log.
func TestPrimingEventPassedOverQuietly(t *testing.T) {
	for _, priming := range []string{"id: 0\ndata:\n\n", "id: 0\ndata: \n\n", "id: 0\ndata\n\n"} {
		var log logBuffer
		w := &httpWire{in: inbox{log: testLogger(&log), requests: newRequestServer(testLogger(&log)), life: context.Background()}}
		stream := priming + "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"px-1\",\"result\":{\"ok\":true}}\n\n"
		key := rawjson.IDKey(json.RawMessage(`"px-1"`))
		r, err := w.streamAnswer(context.Background(), io.NopCloser(strings.NewReader(stream)), replyTo{}, key)
		if err != nil {
			t.Fatalf("%q: %v", priming, err)
		}
		if !bytes.Equal(r.result, []byte(`{"ok":true}`)) {
			t.Errorf("%q: result %s", priming, r.result)
		}
		if got := log.String(); strings.Contains(got, "dropped") {
			t.Errorf("%q: the priming event was logged as dropped:\n%s", priming, got)
		}
	}
}
