package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// A response keeps a value of pieceMin bytes or more as a piece of its
// own, the very bytes it was given; a smaller one is copied into one
// message. Either way every transport writes the same message.
func TestResponsePieces(t *testing.T) {
	small := []byte(`{"tools":[]}`)
	large := []byte(`{"text":"` + strings.Repeat("x", pieceMin) + `"}`)
	limit := []byte(`"` + strings.Repeat("y", pieceMin-2) + `"`)
	for _, tt := range []struct {
		name   string
		value  []byte
		pieces bool
	}{{"small", small, false}, {"pieceMin bytes", limit, true}, {"large", large, true}} {
		t.Run(tt.name, func(t *testing.T) {
			orig := string(tt.value)
			r := response([]byte(`7`), "result", tt.value)
			want := `{"jsonrpc":"2.0","id":7,"result":` + orig + `}`
			if got := string(r.bytes()); got != want {
				t.Fatalf("bytes() = %.80q…, want %.80q…", got, want)
			}
			if r.size() != len(want) {
				t.Fatalf("size() = %d, want %d", r.size(), len(want))
			}
			if shared := len(r.body) > 0 && &r.body[0] == &tt.value[0]; shared != tt.pieces {
				t.Fatalf("value shared = %v, want %v", shared, tt.pieces)
			}
			for _, frame := range []struct{ pre, post string }{{"", "\n"}, {"event: message\ndata: ", "\n\n"}} {
				var out bytes.Buffer
				if err := r.write(&out, frame.pre, frame.post); err != nil {
					t.Fatal(err)
				}
				if got := out.String(); got != frame.pre+want+frame.post {
					t.Fatalf("write(%q, %q) wrote %d bytes, want %d", frame.pre, frame.post, len(got), len(frame.pre+want+frame.post))
				}
			}
			if string(tt.value) != orig || string(envelopeTail) != "}" {
				t.Fatal("a shared piece was modified")
			}
		})
	}
	// A whole message of any size is written as it is, framed.
	big := whole(large)
	var out bytes.Buffer
	if err := big.write(&out, "<", ">"); err != nil || out.String() != "<"+string(large)+">" {
		t.Fatalf("whole large message written as %d bytes (%v)", out.Len(), err)
	}
	if got := replyArray([]reply{whole(small), response([]byte(`1`), "result", large)}); string(got) != "["+string(small)+`,{"jsonrpc":"2.0","id":1,"result":`+string(large)+"}]" {
		t.Fatalf("replyArray = %.80q…", got)
	}
}

// A write error of any piece is reported.
func TestReplyWriteErrors(t *testing.T) {
	large := bytes.Repeat([]byte("x"), pieceMin)
	for n := range 4 {
		w := &failAfter{n: n}
		err := response([]byte(`1`), "result", append(append([]byte(`"`), large...), '"')).write(w, "pre", "post")
		if (err != nil) != (n < 3) {
			t.Fatalf("fail at write %d: error %v", n, err)
		}
	}
}

// failAfter fails every write after its first n.
type failAfter struct{ n int }

func (f *failAfter) Write(b []byte) (int, error) {
	if f.n == 0 {
		return 0, errWriteFailed
	}
	f.n--
	return len(b), nil
}

// manyToolsProxy is a proxy over one server of n tools.
func manyToolsProxy(t testing.TB, n int) *Proxy {
	fx := &fakeUpstream{}
	s := &upstream.Snapshot{State: upstream.StateConnected}
	for i := range n {
		s.Tools = append(s.Tools, rawTool(fmt.Sprintf(`{"name":"tool_%04d","description":"Search the issue tracker for issues matching a query.","inputSchema":{"type":"object","properties":{"query":{"type":"string"}}}}`, i)))
	}
	fx.snap.Store(s)
	return newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
}

// A tools/list of a large catalog answers with the view's one result as
// its value, not a copy, and stdio and HTTP write it whole.
func TestToolsListIsNotCopied(t *testing.T) {
	p := manyToolsProxy(t, 2000)
	st := testState(t, p)
	resp, _ := p.route.answer(context.Background(), reqFor(st, "tools/list", nil))
	view := p.views.viewFor(st).listJSON
	if len(resp.body) == 0 || &resp.body[0] != &view[0] || len(resp.body) != len(view) {
		t.Fatalf("the response's value (%d bytes) is not the view's result (%d bytes)", len(resp.body), len(view))
	}
	want := `{"jsonrpc":"2.0","id":1,"result":` + string(view) + "}\n"
	var out bytes.Buffer
	if err := (&lineWriter{out: &out}).sendReply(resp); err != nil || out.String() != want {
		t.Fatalf("stdio wrote %d bytes (%v), want %d", out.Len(), err, len(want))
	}
	rec := httptest.NewRecorder()
	newPostStream(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil)).finish([]reply{resp}, false, http.StatusOK)
	if rec.Body.String() != want || rec.Header().Get("Content-Length") != strconv.Itoa(len(want)) {
		t.Fatalf("HTTP wrote %d bytes with Content-Length %s, want %d", rec.Body.Len(), rec.Header().Get("Content-Length"), len(want))
	}
}

// BenchmarkToolsList2000 answers and writes the tools/list of a catalog of
// 2,000 tools to a stdio client and as an HTTP body; B/op shows what one
// list allocates (the list itself is about 336 KB).
func BenchmarkToolsList2000(b *testing.B) {
	p := manyToolsProxy(b, 2000)
	st := testState(b, p)
	b.Run("stdio", func(b *testing.B) {
		w := &lineWriter{out: io.Discard}
		b.ReportAllocs()
		for b.Loop() {
			resp, _ := p.route.answer(context.Background(), reqFor(st, "tools/list", nil))
			if err := w.sendReply(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stateless", func(b *testing.B) {
		// A 2026-07-28 list: its result gains the server's identity,
		// resultType and the cache members.
		w := &lineWriter{out: io.Discard}
		b.ReportAllocs()
		for b.Loop() {
			r := reqFor(st, "tools/list", nil)
			r.modern, r.version = true, modernVersion
			resp, _ := p.route.answer(context.Background(), r)
			if err := w.sendReply(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			rec.Body = nil // keep nothing
			resp, _ := p.route.answer(context.Background(), reqFor(st, "tools/list", nil))
			newPostStream(rec, req).finish([]reply{resp}, false, http.StatusOK)
		}
	})
}

// A 2026-07-28 tools/list result is the view's list with the server's
// identity in _meta, resultType and the cache members added, each once,
// the tools as they were.
func TestStatelessListDecorated(t *testing.T) {
	p := manyToolsProxy(t, 2000) // a result of pieces, whose value can be compared
	st := testState(t, p)
	r := reqFor(st, "tools/list", nil)
	r.modern, r.version = true, modernVersion
	resp, _ := p.route.answer(context.Background(), r)
	var got struct {
		Tools      []json.RawMessage          `json:"tools"`
		Meta       map[string]json.RawMessage `json:"_meta"`
		ResultType string                     `json:"resultType"`
		TTL        *int                       `json:"ttlMs"`
		Scope      string                     `json:"cacheScope"`
	}
	m, err := rawjson.ParseMessage(resp.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := rawjson.Unique(m.Result); err != nil {
		t.Fatalf("%v in %.200s", err, m.Result)
	}
	if err := json.Unmarshal(m.Result, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Tools) != 2000 || got.Meta[metaServerInfo] == nil || got.ResultType != "complete" || got.TTL == nil || *got.TTL != 0 || got.Scope != "private" {
		t.Fatalf("decorated list: %d tools, _meta %v, resultType %q, ttlMs %v, cacheScope %q", len(got.Tools), got.Meta, got.ResultType, got.TTL, got.Scope)
	}
	view := p.views.viewFor(st).listJSON
	if !bytes.Contains(m.Result, view[:len(view)-1]) {
		t.Fatal("the tools are not the view's list as it was")
	}
	// A second list is the same result, decorated once per view.
	again, _ := p.route.answer(context.Background(), r)
	if len(again.body) == 0 || &again.body[0] != &resp.body[0] {
		t.Error("the second stateless list was decorated again")
	}
}
