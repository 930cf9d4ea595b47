package tracing

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestSpanNames: a span is named "<method> <target>" or after its method
// alone, whether its name is kept or not: a target longer than a tool
// name may be, is named but not kept; past maxNames the names kept start
// again.
func TestSpanNames(t *testing.T) {
	var c spanNames
	long := strings.Repeat("n", maxNameTarget+1)
	for _, tc := range []struct {
		name, method, target, want string
		kept                       bool
	}{
		{"tool", "tools/call", "fx__echo", "tools/call fx__echo", true},
		{"prompt", "prompts/get", "fx__greet", "prompts/get fx__greet", true},
		{"same target, other method", "prompts/get", "fx__echo", "prompts/get fx__echo", true},
		{"no target", "tools/list", "", "tools/list", false},
		{"longest kept", "tools/call", long[1:], "tools/call " + long[1:], true},
		{"too long", "tools/call", long, "tools/call " + long, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(c.m)
			for range 2 {
				if got := c.name(tc.method, tc.target); got != tc.want {
					t.Fatalf("name(%q, %q) = %q, want %q", tc.method, tc.target, got, tc.want)
				}
			}
			if kept := len(c.m) == before+1; kept != tc.kept {
				t.Errorf("kept = %v, want %v (%d names before, %d after)", kept, tc.kept, before, len(c.m))
			}
		})
	}
	for i := len(c.m); i < maxNames+10; i++ {
		target := "t" + strconv.Itoa(i)
		if got := c.name("tools/call", target); got != "tools/call "+target {
			t.Fatalf("name of %s = %q", target, got)
		}
	}
	if want := 10; len(c.m) != want {
		t.Errorf("%d names kept, want %d (the last ones, started again past %d)", len(c.m), want, maxNames)
	}
}

// TestSpanNameShared: the spans of calls to one tool share their name's
// bytes (built once), server and client spans alike; the target's own
// bytes, from a request, are not what is kept.
func TestSpanNameShared(t *testing.T) {
	tr, exp := memTracer(t)
	target := []byte("fx__echo")
	for range 2 {
		ctx, srv := tr.StartServer(context.Background(), ServerRequest{Method: "tools/call", Target: string(target)})
		_, cli := tr.StartClient(ctx, ClientRequest{Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)})
		cli.End(OutcomeOK, 0)
		srv.End(OutcomeOK, 0)
	}
	spans := ended(t, tr, exp)
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	for i, want := range []string{"tools/call echo", "tools/call fx__echo"} {
		a, b := spans[i].Name, spans[i+2].Name
		if a != want || b != want {
			t.Fatalf("span names %q and %q, want %q", a, b, want)
		}
		if unsafe.StringData(a) != unsafe.StringData(b) {
			t.Errorf("two spans named %q each built their name", want)
		}
	}
}

// TestSpanNamesAfterFlood: a client that calls maxNames made-up tools (each
// refused as unknown, each still a span) does not stop the names of the
// tools called afterwards from being kept: the next call to a real tool
// shares its name with the one before.
func TestSpanNamesAfterFlood(t *testing.T) {
	var c spanNames
	for i := range maxNames {
		c.name("tools/call", "made_up_"+strconv.Itoa(i))
	}
	a, b := c.name("tools/call", "gh__create_issue"), c.name("tools/call", "gh__create_issue")
	if a != "tools/call gh__create_issue" || b != a {
		t.Fatalf("names %q and %q, want %q", a, b, "tools/call gh__create_issue")
	}
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("after a flood of made-up tool names, a real tool's name is built for every span")
	}
	if len(c.m) > maxNames {
		t.Errorf("%d names kept, want at most %d", len(c.m), maxNames)
	}
}
