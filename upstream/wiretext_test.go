package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// An upstream result that is not a JSON object (every MCP result is one)
// fails the request with an error that names the server and the method,
// whatever the method; an object, even an empty one, passes as it came.
func TestRequestRefusesResultNotObject(t *testing.T) {
	c := start(t, fakeServer(t, "fk"), Options{})
	mustConnected(t, c)
	for _, tt := range []struct{ result, want string }{
		{"null", `upstream "fk" returned an invalid tools/call result: null`},
		{`"text"`, `upstream "fk" returned an invalid tools/call result: "text"`},
		{`[{"type":"text"}]`, `upstream "fk" returned an invalid tools/call result: [{"type":"text"}]`},
		{"42", `upstream "fk" returned an invalid tools/call result: 42`},
		{`"` + strings.Repeat("a", 50) + `"`, `upstream "fk" returned an invalid tools/call result: "` + strings.Repeat("a", 39) + `…`},
	} {
		params, _ := json.Marshal(map[string]any{"name": "raw", "arguments": map[string]string{"result": tt.result}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		raw, err := c.Request(ctx, "tools/call", params)
		cancel()
		var invalid *InvalidResultError
		if !errors.As(err, &invalid) || !errors.Is(err, ErrBadResponse) || raw != nil {
			t.Errorf("result %s: got %s, %v; want an *InvalidResultError", tt.result, raw, err)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("result %s: error %q, want %q", tt.result, err, tt.want)
		}
	}
	params := json.RawMessage(`{"name":"raw","arguments":{"result":"{ }"}}`)
	if raw, err := c.Request(context.Background(), "tools/call", params); err != nil || string(raw) != "{ }" {
		t.Errorf("result { }: got %s, %v", raw, err)
	}
}

// badText is a result whose text holds ill-formed UTF-8 between valid
// characters and escapes (a lone surrogate's escape is valid JSON text),
// and goodText what the proxy passes on: each ill-formed sequence one
// U+FFFD, every other byte as it came.
const (
	badText  = "{\"content\":[{\"type\":\"text\",\"text\":\"caf\xc3 \xe2\x82 \u00e9 \\ud800 \xff\xfe\"}]}"
	goodText = "{\"content\":[{\"type\":\"text\",\"text\":\"caf\uFFFD \uFFFD \u00e9 \\ud800 \uFFFD\uFFFD\"}]}"
)

// Text that is not UTF-8 is repaired where a stdio server's lines enter:
// in responses and in notifications.
func TestStdioTransportRepairsUTF8(t *testing.T) {
	tr, child := newPipeTransport(t)
	notes := make(chan string, 1)
	tr.setRawNotificationHandler(func(method string, params json.RawMessage) { notes <- method + " " + string(params) })
	ch := sendAsync(tr, context.Background(), "u")
	child.read(t)
	child.write(t, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`+"\xc0x"+`"}}`,
		`{"jsonrpc":"2.0","id":"u","result":`+badText+`}`)
	if s := wait(t, ch); s.err != nil || string(s.result) != goodText {
		t.Errorf("result %q, %v\nwant %q", s.result, s.err, goodText)
	}
	select {
	case n := <-notes:
		if want := "notifications/message {\"level\":\"info\",\"data\":\"\uFFFDx\"}"; n != want {
			t.Errorf("notification %q, want %q", n, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
}

// The same over Streamable HTTP: a JSON body, and the events of a POST's
// stream.
func TestHTTPWireRepairsUTF8(t *testing.T) {
	t.Parallel()
	var srv wireServer
	ts := srv.start(t, func(w http.ResponseWriter, r *http.Request, n int, body string) {
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"px-1","result":`+badText+`}`)
			return
		}
		sseHeaders(w)
		flush(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"message\":\"\xed\xa0\x80\"}}\n\n")
		flush(w, `data: {"jsonrpc":"2.0","id":"px-2","result":`+badText+"}\n\n")
	})
	w, rec := testWire(t, ts)
	for _, id := range []string{"px-1", "px-2"} {
		res, rpcErr, err := w.call(context.Background(), id, "tools/call", json.RawMessage(`{"name":"x"}`), nil)
		if err != nil || rpcErr != nil || string(res) != goodText {
			t.Errorf("%s: result %q, %v, %v\nwant %q", id, res, rpcErr, err, goodText)
		}
	}
	if got := rec.got(); len(got) != 1 || got[0] != "notifications/progress {\"message\":\"\uFFFD\uFFFD\uFFFD\"}" {
		t.Errorf("notifications %q", got)
	}
}

// FuzzReadMessage: what readMessage makes of any bytes a server sends is
// what rawjson.ParseMessage makes of them when they are valid UTF-8 (the
// same sub-slices: byte for byte), and otherwise holds only valid UTF-8.
func FuzzReadMessage(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":"px-1","result":{"t":"\ud800"}}`, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"\xff\"}}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"\xc3\":1}}", "\xe2\x82", `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, fresh, err := readMessage(msg)
		if utf8.Valid(msg) {
			want, werr := rawjson.ParseMessage(msg)
			if fresh || (err == nil) != (werr == nil) || !sameParts(m, want) {
				t.Fatalf("valid %q: read %+v (fresh %v, %v), parsed %+v (%v)", msg, m, fresh, err, want, werr)
			}
			return
		}
		if !fresh {
			t.Fatalf("%q is not UTF-8 but was not repaired", msg)
		}
		for _, part := range [][]byte{m.ID, m.Params, m.Result, m.Error, []byte(m.Method)} {
			if !utf8.Valid(part) {
				t.Fatalf("%q: a part %q is not UTF-8", msg, part)
			}
		}
	})
}

// sameParts reports whether a and b are one envelope over the same bytes.
func sameParts(a, b rawjson.Message) bool {
	same := func(x, y []byte) bool { return len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0]) }
	return a.Kind == b.Kind && a.Method == b.Method && a.Invalid == b.Invalid &&
		same(a.ID, b.ID) && same(a.Params, b.Params) && same(a.Result, b.Result) && same(a.Error, b.Error)
}
