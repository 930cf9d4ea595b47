package downstream

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// A prompt of a server still making its first connection is not unknown:
// prompts/get and completion/complete naming it wait for the connection
// (at most startup_wait, SPEC §3) and reach the server.
func TestPromptRequestsWaitForFirstConnection(t *testing.T) {
	for _, tt := range []struct {
		method, params, upstreamAnswer string
		wantSent                       string // the params the server gets
	}{
		{"prompts/get", `{"name":"fx__greet"}`, `{"messages":[]}`, `{"name":"greet"}`},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"fx__greet"},"argument":{"name":"a","value":""}}`,
			`{"completion":{"values":["x"]}}`, `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"a","value":""}}`},
	} {
		t.Run(tt.method, func(t *testing.T) {
			ready := make(chan struct{})
			fx := &fakeUpstream{ReadyFn: func() <-chan struct{} { return ready }}
			fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnecting, StartupUntil: time.Now().Add(5 * time.Second)})
			fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(tt.upstreamAnswer), nil
			}
			p := newProxy(t, "startup_wait: 5s\nblobs: {mode: passthrough}\nservers:\n  fx: {command: fixture}\n", map[string]*fakeUpstream{"fx": fx})
			connected := time.AfterFunc(300*time.Millisecond, func() {
				fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnected,
					Capabilities: upstream.Capabilities{Prompts: true, Completions: true},
					Prompts:      []json.RawMessage{json.RawMessage(`{"name":"greet"}`)}})
				close(ready)
			})
			defer connected.Stop()
			got := p.answer(context.Background(), reqFor(testState(t, p), tt.method, json.RawMessage(tt.params)))
			if want := `{"jsonrpc":"2.0","id":1,"result":` + tt.upstreamAnswer + `}`; string(got) != want {
				t.Errorf("%s right after start answered\n%s\nwant\n%s", tt.method, got, want)
			}
			if reqs := fx.requests(); len(reqs) != 1 || reqs[0].Method != tt.method || reqs[0].Params != tt.wantSent {
				t.Errorf("the server got %+v; want one %s %s", reqs, tt.method, tt.wantSent)
			}
		})
	}
}
