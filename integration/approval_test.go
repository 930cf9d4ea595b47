package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// polApprovalConfig: agent sup (the default) is supervised, with fx__sleep
// auto-approved and fx__env always asked; agent boss has autonomy full.
// Both reach the recorded fixture fx.
func polApprovalConfig(t testing.TB) (cfg, record string) {
	t.Helper()
	fx, record := rsRecordedFixture(t, "fx", []string{"-no-weird"})
	top := `default_agent: sup
bundles:
  all: {servers: [fx]}
agents:
  sup:
    mcp_bundles: [all]
    autonomy: supervised
    auto_approve: [fx__sleep]
    always_ask: [fx__env]
  boss:
    mcp_bundles: [all]
    autonomy: full
`
	return writeConfig(t, top, fx), record
}

// polApprover answers approval questions from a queue and keeps what it
// was asked.
type polApprover struct {
	mu         sync.Mutex
	answers    []*mcp.ElicitResult
	messages   []string
	schemas    []string
	unexpected int
}

func (a *polApprover) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.messages = append(a.messages, req.Params.Message)
	b, _ := json.Marshal(req.Params.RequestedSchema)
	a.schemas = append(a.schemas, string(b))
	if len(a.answers) == 0 {
		a.unexpected++
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	ans := a.answers[0]
	a.answers = a.answers[1:]
	return ans, nil
}

// next queues the answer to the next question.
func (a *polApprover) next(r *mcp.ElicitResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answers = append(a.answers, r)
}

func (a *polApprover) asked() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.messages)
}

func (a *polApprover) last() (message, schema string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.messages) == 0 {
		return "", ""
	}
	return a.messages[len(a.messages)-1], a.schemas[len(a.schemas)-1]
}

func polAccept(decision string) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": decision}}
}

// polRecordArgs returns the arguments of the record calls the fixture got
// whose step is step.
func polRecordArgs(t testing.TB, record, step string) []string {
	t.Helper()
	var out []string
	for _, line := range rsRecordLines(t, record, `"tool":"record"`, step) {
		var r struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record line %q: %v", line, err)
		}
		out = append(out, string(r.Arguments))
	}
	return out
}

// polRefused checks an approval refusal: an isError result holding want,
// and no call of that step at the fixture.
func polRefused(t testing.TB, cs *mcp.ClientSession, record, step, want string) {
	t.Helper()
	res, err := rsCall(cs, "fx__record", map[string]any{"step": step}, callTimeout)
	if err != nil {
		t.Errorf("%s: JSON-RPC error %v, want an isError refusal", step, err)
		return
	}
	if !res.IsError || !strings.Contains(contentText(res), want) {
		t.Errorf("%s: isError %v text %q, want isError with %q", step, res.IsError, contentText(res), want)
	}
	if got := polRecordArgs(t, record, step); len(got) != 0 {
		t.Errorf("%s: the refused call reached the upstream: %q", step, got)
	}
}

// TestApproval: a supervised agent's calls are put to the client as an
// elicitation: approve runs the call (without the model's own `approved`
// argument), deny / decline / cancel refuse it without calling the
// upstream, always runs it and asks no more in the session, auto_approve
// asks nothing, always_ask asks every time even after always. A client
// without elicitation is refused with how to allow the tool, and under
// autonomy full an `approved` argument is still removed. Over stdio and
// HTTP, with protocol 2025-11-25 and the SDK's default. (The 300 s approval
// timeout is not waited for here.)
func TestApproval(t *testing.T) {
	t.Parallel()
	cfg, record := polApprovalConfig(t)
	httpURL, _ := startHTTPProxy(t, cfg)
	base := strings.TrimSuffix(httpURL, "/mcp")

	connect := func(t *testing.T, tr, agent string, opts *mcp.ClientOptions, proto string) *mcp.ClientSession {
		var sopts *mcp.ClientSessionOptions
		if proto != "" {
			sopts = &mcp.ClientSessionOptions{ProtocolVersion: proto}
		}
		if tr == "stdio" {
			cs, _, _ := sdkStdioProxyCmd(t, cfg, opts, sopts, "--agent", agent)
			return cs
		}
		return sdkHTTP(t, base+"/agents/"+agent+"/mcp", opts, sopts)
	}

	for _, tr := range []string{"stdio", "http"} {
		for _, proto := range []string{"2025-11-25", ""} {
			cell := tr + "-" + proto
			if proto == "" {
				cell = tr + "-sdkdefault"
			}
			t.Run("supervised/"+cell, func(t *testing.T) {
				t.Parallel()
				ap := &polApprover{}
				cs := connect(t, tr, "sup", &mcp.ClientOptions{ElicitationHandler: ap.handle}, proto)
				rsWaitListed(t, cs, callTimeout, "fx__record")

				// approve
				step := cell + "-approve"
				ap.next(polAccept("approve"))
				res, err := rsCall(cs, "fx__record", map[string]any{"step": step, "approved": true}, callTimeout)
				if err != nil || res.IsError || contentText(res) != "recorded" {
					t.Fatalf("approved call: err %v result %s", err, rsJSON(res))
				}
				if ap.asked() != 1 {
					t.Fatalf("approved call: %d questions, want 1", ap.asked())
				}
				msg, schema := ap.last()
				t.Logf("question: %q schema %s", msg, schema)
				for _, want := range []string{"fx__record", `"fx"`, step} {
					if !strings.Contains(msg, want) {
						t.Errorf("the question %q does not name %s", msg, want)
					}
				}
				if strings.Contains(msg, "approved") {
					t.Errorf("the question %q shows the model's own `approved` argument", msg)
				}
				for _, want := range []string{`"decision"`, `"approve"`, `"deny"`, `"always"`} {
					if !strings.Contains(schema, want) {
						t.Errorf("the requested schema %s lacks %s", schema, want)
					}
				}
				if got := polRecordArgs(t, record, step); len(got) != 1 || got[0] != fmt.Sprintf(`{"step":%q}`, step) {
					t.Errorf("the upstream got the approved call with arguments %q, want exactly [{\"step\":%q}] (no `approved`)", got, step)
				}

				// deny, decline, cancel
				ap.next(polAccept("deny"))
				polRefused(t, cs, record, cell+"-deny", "(deny)")
				ap.next(&mcp.ElicitResult{Action: "decline"})
				polRefused(t, cs, record, cell+"-decline", "(decline)")
				ap.next(&mcp.ElicitResult{Action: "cancel"})
				polRefused(t, cs, record, cell+"-cancel", "(cancel)")
				if ap.asked() != 4 {
					t.Errorf("after deny, decline and cancel: %d questions in all, want 4", ap.asked())
				}

				// always: asked once for the session. A client of the
				// stateless 2026-07-28 protocol over HTTP has no session, so
				// there "always" approves the call it answers and every call
				// is asked (docs/agents.md#approval).
				stateless := cell == "http-sdkdefault"
				ap.next(polAccept("always"))
				if stateless {
					ap.next(polAccept("always"))
					ap.next(polAccept("always"))
				}
				for i := range 3 {
					text := fmt.Sprintf("%s-always-%d", cell, i)
					if got := contentText(callTool(t, cs, "fx__echo", map[string]any{"text": text})); got != text {
						t.Errorf("fx__echo after always: %q", got)
					}
				}
				if want := map[bool]int{false: 5, true: 7}[stateless]; ap.asked() != want {
					t.Errorf("three fx__echo calls after answering always: %d questions in all, want %d", ap.asked(), want)
				}
				afterAlways := ap.asked()

				// auto_approve asks nothing
				if got := contentText(callTool(t, cs, "fx__sleep", map[string]any{"ms": 1})); got != "slept" {
					t.Errorf("fx__sleep (auto_approve): %q", got)
				}
				if ap.asked() != afterAlways {
					t.Errorf("fx__sleep is in auto_approve but a question was asked (%d in all)", ap.asked())
				}

				// always_ask wins over an earlier always
				ap.next(polAccept("always"))
				ap.next(polAccept("approve"))
				for range 2 {
					if got := contentText(callTool(t, cs, "fx__env", map[string]any{"names": []string{"HOME"}})); got != "HOME=set" {
						t.Errorf("fx__env: %q", got)
					}
				}
				if ap.asked() != afterAlways+2 {
					t.Errorf("two fx__env calls (always_ask) after answering always: %d questions in all, want %d", ap.asked(), afterAlways+2)
				}
				ap.mu.Lock()
				unexpected := ap.unexpected
				ap.mu.Unlock()
				if unexpected != 0 {
					t.Errorf("%d questions came that no step expected", unexpected)
				}
			})
		}

		t.Run("no elicitation/"+tr, func(t *testing.T) {
			t.Parallel()
			cs := connect(t, tr, "sup", nil, "")
			rsWaitListed(t, cs, callTimeout, "fx__record")
			step := tr + "-noelicit"
			res, err := rsCall(cs, "fx__record", map[string]any{"step": step}, callTimeout)
			if err != nil {
				t.Fatalf("call without elicitation: JSON-RPC error %v, want an isError refusal", err)
			}
			text := contentText(res)
			t.Logf("refusal: %q", text)
			if !res.IsError {
				t.Errorf("call from a client without elicitation ran: %q", text)
			}
			for _, want := range []string{"fx__record", "auto_approve", "autonomy", "full"} {
				if !strings.Contains(text, want) {
					t.Errorf("the refusal %q does not say %q (how to allow the tool)", text, want)
				}
			}
			if got := polRecordArgs(t, record, step); len(got) != 0 {
				t.Errorf("the refused call reached the upstream: %q", got)
			}
			// auto_approve needs no question, so it runs for this client too.
			if got := contentText(callTool(t, cs, "fx__sleep", map[string]any{"ms": 1})); got != "slept" {
				t.Errorf("fx__sleep (auto_approve) from a client without elicitation: %q", got)
			}
		})

		t.Run("autonomy full/"+tr, func(t *testing.T) {
			t.Parallel()
			cs := connect(t, tr, "boss", nil, "")
			rsWaitListed(t, cs, callTimeout, "fx__record")
			for _, approved := range []any{true, "yes"} {
				step := fmt.Sprintf("%s-boss-%v", tr, approved)
				res, err := rsCall(cs, "fx__record", map[string]any{"approved": approved, "step": step}, callTimeout)
				if err != nil || res.IsError || contentText(res) != "recorded" {
					t.Fatalf("boss fx__record: err %v result %s", err, rsJSON(res))
				}
				if got := polRecordArgs(t, record, step); len(got) != 1 || got[0] != fmt.Sprintf(`{"step":%q}`, step) {
					t.Errorf("the upstream got %q, want exactly [{\"step\":%q}]: `approved` must never reach it", got, step)
				}
			}
		})
	}
}
