package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
)

func TestChildEnv(t *testing.T) {
	t.Parallel()
	proxyEnv := map[string]string{
		"PATH": "/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "XDG_DATA_HOME": "/d",
		"AWS_SECRET_ACCESS_KEY": "s3cr3t", "GITHUB_TOKEN": "ghp_x", "EMPTY": "",
	}
	lookup := func(k string) (string, bool) { v, ok := proxyEnv[k]; return v, ok }
	environ := func() []string {
		var out []string
		for k, v := range proxyEnv {
			out = append(out, k+"="+v)
		}
		return out
	}
	asMap := func(env []string) map[string]string {
		m := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			if _, dup := m[k]; dup {
				t.Errorf("%s appears twice", k)
			}
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		cfg  config.Server
		want map[string]string
	}{
		{"filtered", config.Server{}, map[string]string{
			"PATH": "/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "XDG_DATA_HOME": "/d",
		}},
		{"env added and wins", config.Server{Env: map[string]string{"PATH": "/opt/bin", "API_KEY": "k"}}, map[string]string{
			"PATH": "/opt/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "XDG_DATA_HOME": "/d", "API_KEY": "k",
		}},
		{"inherit_env", config.Server{InheritEnv: true, Env: map[string]string{"HOME": "/srv"}}, map[string]string{
			"PATH": "/bin", "HOME": "/srv", "LANG": "C.UTF-8", "XDG_DATA_HOME": "/d",
			"AWS_SECRET_ACCESS_KEY": "s3cr3t", "GITHUB_TOKEN": "ghp_x", "EMPTY": "",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := asMap(childEnv(&tc.cfg, lookup, environ))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("env %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestParseTool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		want      Tool
		err       bool
	}{
		{"full", `{"name":"a","description":"d","annotations":{"readOnlyHint":true}}`, Tool{Name: "a", Description: "d", ReadOnly: true}, false},
		{"hint false", `{"name":"a","annotations":{"readOnlyHint":false}}`, Tool{Name: "a"}, false},
		{"hint not bool", `{"name":"a","annotations":{"readOnlyHint":"yes"}}`, Tool{Name: "a"}, false},
		{"annotations not object", `{"name":"a","annotations":[1]}`, Tool{Name: "a"}, false},
		{"description not string", `{"name":"a","description":{"x":1}}`, Tool{Name: "a"}, false},
		{"no name", `{"description":"d"}`, Tool{}, true},
		{"empty name", `{"name":""}`, Tool{}, true},
		{"name not string", `{"name":7}`, Tool{}, true},
		{"null", `null`, Tool{}, true},
		{"not object", `[1,2]`, Tool{}, true},
		{"escaped name", `{"name":"caf\u00e9","description":"\u003cb\u003e"}`, Tool{Name: "café", Description: "<b>"}, false},
		{"two names", `{"name":"safe","name":"evil"}`, Tool{}, true},
		{"two descriptions", `{"name":"a","description":"x","description":"y"}`, Tool{}, true},
		{"hint twice", `{"name":"a","annotations":{"readOnlyHint":false,"readOnlyHint":true}}`, Tool{Name: "a"}, false},
		{"trailing garbage", `{"name":"a"} x`, Tool{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTool(json.RawMessage(tc.raw))
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if err != nil {
				if !errors.Is(err, ErrBadResponse) {
					t.Errorf("err %v is not ErrBadResponse", err)
				}
				return
			}
			if string(got.Raw) != tc.raw {
				t.Errorf("raw %s", got.Raw)
			}
			if got.Name != tc.want.Name || got.Description != tc.want.Description || got.ReadOnly != tc.want.ReadOnly {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDecodePage(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name, raw string
		items     []string
		cursor    *string
		err       bool
	}{
		{"items and cursor", `{"tools":[{"a":1}, {"b" : 2}],"nextCursor":"n"}`, []string{`{"a":1}`, `{"b" : 2}`}, str("n"), false},
		{"last page", `{"tools":[]}`, []string{}, nil, false},
		{"null cursor", `{"tools":null,"nextCursor":null}`, nil, nil, false},
		{"no items key", `{}`, nil, nil, false},
		{"items not array", `{"tools":{}}`, nil, nil, true},
		{"cursor not string", `{"tools":[],"nextCursor":3}`, nil, nil, true},
		{"result not object", `[]`, nil, nil, true},
		{"escaped cursor", `{"tools":[],"nextCursor":"a\u0062"}`, []string{}, str("ab"), false},
		{"two item members", `{"tools":[],"tools":[{"name":"x"}]}`, nil, nil, true},
		{"two cursors", `{"tools":[],"nextCursor":"a","nextCursor":"b"}`, nil, nil, true},
		{"other members ignored", `{"_meta":{"tools":1},"tools":[ 1 ]}`, []string{`1`}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := decodePage(json.RawMessage(tc.raw), "tools")
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if err != nil {
				return
			}
			var items []string
			if p.items != nil {
				items = []string{}
			}
			for _, it := range p.items {
				items = append(items, string(it))
			}
			if !reflect.DeepEqual(items, tc.items) || !reflect.DeepEqual(p.nextCursor, tc.cursor) {
				t.Errorf("items %q cursor %v", items, p.nextCursor)
			}
		})
	}
}

func FuzzParseTool(f *testing.F) {
	f.Add([]byte(exoticTool))
	f.Add([]byte(`{"name":"a","annotations":{"readOnlyHint":true}}`))
	f.Add([]byte(`{"name":`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tool, err := parseTool(raw)
		if err == nil && (tool.Name == "" || string(tool.Raw) != string(raw)) {
			t.Fatalf("accepted %q as %+v", raw, tool)
		}
	})
}

func FuzzDecodePage(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"a"}],"nextCursor":"c"}`))
	f.Add([]byte(`{"tools":[1,"x",null],"nextCursor":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := decodePage(raw, "tools")
		if err != nil {
			return
		}
		for _, it := range p.items {
			if !json.Valid(it) {
				t.Fatalf("invalid item %q from %q", it, raw)
			}
		}
	})
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stat string
		want procStat
		ok   bool
	}{
		{"123 (sleep) S 1 456 456 0 -1", procStat{'S', 1, 456}, true},
		{"123 (a b) c)) Z 9 77 77", procStat{'Z', 9, 77}, true},
		{"123 (x) R", procStat{}, false},
		{"123 (x) R y 7", procStat{}, false},
		{"garbage", procStat{}, false},
	} {
		got, ok := parseStat([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStat(%q) = %+v %v", tc.stat, got, ok)
		}
	}
}

// TestNotificationBytes: a notification's params go out byte for byte;
// params that are not one object, or whose _meta is not, are refused.
func TestNotificationBytes(t *testing.T) {
	t.Parallel()
	params := json.RawMessage(`{"progressToken":18446744073709551615,"progress":0.50,"_meta":{"big":123456789012345678901}}`)
	if err := checkNoteParams(params); err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","method":"notifications/progress","params":` + string(params) + `}`
	if got := string(encodeNotification("notifications/progress", params)); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"_meta":3}`, `null`, `{"a":1`} {
		if err := checkNoteParams(json.RawMessage(bad)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("params %s: err %v, want ErrBadRequest", bad, err)
		}
	}
	if got := string(encodeNotification("notifications/initialized", nil)); got != `{"jsonrpc":"2.0","method":"notifications/initialized"}` {
		t.Errorf("no params: %s", got)
	}
}

func TestErrorsAreSanitized(t *testing.T) {
	t.Parallel()
	rpc := &RPCError{Code: -1, Message: "auth failed for Bearer abcdef123456 at https://x.example/p?key=zzz"}
	if msg := rpc.Error(); strings.Contains(msg, "abcdef123456") || strings.Contains(msg, "zzz") {
		t.Errorf("RPCError text %q leaks", msg)
	}
	base := errors.New("dial https://h/mcp?token=tok999: refused")
	err := safe(fmt.Errorf("wrap: %w", base))
	if strings.Contains(err.Error(), "tok999") || !errors.Is(err, base) {
		t.Errorf("safe error %q (is base: %v)", err, errors.Is(err, base))
	}
	if safe(nil) != nil || safe(err) != err || safe(rpc) != error(rpc) {
		t.Error("safe must keep nil, safe and RPC errors")
	}
}

func TestStateString(t *testing.T) {
	t.Parallel()
	want := map[State]string{StateConnecting: "connecting", StateConnected: "connected", StateFailed: "failed", StateClosed: "closed", StateParked: "parked", State(9): "unknown"}
	for s, w := range want {
		if s.String() != w {
			t.Errorf("%d: %q, want %q", s, s.String(), w)
		}
	}
}

func TestConnLifecycleWithoutStart(t *testing.T) {
	t.Parallel()
	var got []*Snapshot
	c := New(&config.Server{Name: "idle", Command: "true"}, Options{OnSnapshot: func(s *Snapshot) { got = append(got, s) }})
	if s := c.Snapshot(); s.State != StateConnecting || s.Server != "idle" || s.Generation != 0 {
		t.Errorf("initial snapshot %+v", s)
	}
	if _, err := c.Request(context.Background(), "tools/list", nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Request before Start: %v", err)
	}
	if err := c.Notify(context.Background(), "notifications/x", nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Notify before Start: %v", err)
	}
	_ = c.Close()
	_ = c.Close()
	c.Start(context.Background()) // after Close: nothing
	select {
	case <-c.Ready():
	default:
		t.Error("Ready not closed by Close")
	}
	if len(got) != 1 || got[0].State != StateClosed || c.Snapshot().State != StateClosed {
		t.Errorf("snapshots %v, current %s", got, c.Snapshot().State)
	}
}

func TestStartContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	c := New(fakeServer(t, "ctx"), Options{})
	c.Start(ctx)
	<-c.Ready()
	mustConnected(t, c)
	cancel()
	waitSnapshot(t, c, 10*time.Second, "closed", func(s *Snapshot) bool { return s.State == StateClosed })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRefresherCoalesces(t *testing.T) {
	t.Parallel()
	r := refresher{wake: make(chan struct{}, 1)}
	for range 100 { // a burst while a re-discovery runs
		r.request(kindTools, true)
	}
	r.request(kindPrompts, false) // a stale cache hint, not an announcement
	if len(r.wake) != 1 {
		t.Fatalf("%d wake-ups pending, want 1", len(r.wake))
	}
	<-r.wake
	if got, announced := r.take(); got != kindTools|kindPrompts || announced != kindTools {
		t.Errorf("pending %b announced %b, want tools|prompts and tools", got, announced)
	}
	if got, announced := r.take(); got != 0 || announced != 0 {
		t.Errorf("pending after take %b %b", got, announced)
	}
	if got := listChangedKinds("notifications/resources/list_changed"); got != kindResources|kindTemplates {
		t.Errorf("resources list_changed -> %b", got)
	}
	if got := listChangedKinds("notifications/message"); got != 0 {
		t.Errorf("message -> %b", got)
	}
}
