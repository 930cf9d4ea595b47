package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// tasksProxy is a proxy over ev, a server with the tasks of MCP
// 2025-11-25 and a tool "research" that requires them, and gx, a server
// without tasks. ev answers tasks/* with task objects naming the id it was
// asked about; its tasks/list also has a task no client of the proxy
// created.
func tasksProxy(t *testing.T) (*Proxy, *fakeUpstream, *fakeUpstream) {
	t.Helper()
	ev := connected(`{"name":"research","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`)
	snap := *ev.Snapshot()
	snap.Capabilities = upstream.Capabilities{Tools: true, Tasks: upstream.TaskCapabilities{ToolCalls: true, List: true, Cancel: true}}
	ev.snap.Store(&snap)
	created := 0
	ev.RequestFn = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		id, _ := stringMember(params, "taskId")
		switch method {
		case "tools/call":
			created++
			return json.RawMessage(`{"task":{"taskId":"up-` + string(rune('0'+created)) + `","status":"working","ttl":60000,"pollInterval":100}}`), nil
		case "tasks/get":
			return json.RawMessage(`{"taskId":"` + id + `","status":"completed","ttl":60000}`), nil
		case "tasks/cancel":
			return json.RawMessage(`{"taskId":"` + id + `","status":"cancelled","ttl":60000}`), nil
		case "tasks/result":
			return json.RawMessage(`{"content":[{"type":"text","text":"done"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + id + `"}}}`), nil
		case "tasks/list":
			return json.RawMessage(`{"tasks":[{"taskId":"up-9","status":"working"},{"taskId":"up-1","status":"completed"}]}`), nil
		}
		return nil, &upstream.RPCError{Code: codeMethodNotFound, Message: "no " + method}
	}
	gx := connected(`{"name":"plain","inputSchema":{"type":"object"}}`)
	gx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"ran at once"}]}`), nil
	}
	yaml := "blobs: {mode: passthrough}\nservers:\n  ev: {command: fixture}\n  gx: {command: fixture}\n"
	return newProxy(t, yaml, map[string]*fakeUpstream{"ev": ev, "gx": gx}), ev, gx
}

// clientAt is a session id of the default agent whose client initialized
// at version.
func clientAt(t *testing.T, p *Proxy, id, version string, perCall []string) *session {
	t.Helper()
	a, err := p.views.resolveAgent("")
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(id, transportHTTP, a, perCall)
	s.state.SetClient(clientInfo{version: version})
	t.Cleanup(s.close)
	return s
}

// rpc sends one request of s through the route and returns its response.
func rpc(t *testing.T, p *Proxy, s *session, method, params string) string {
	t.Helper()
	return answerLine(t, p, s, `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":`+params+`}`)
}

// createTask calls ev__research as a task for s and returns the task id
// the client got.
func createTask(t *testing.T, p *Proxy, s *session) string {
	t.Helper()
	got := rpc(t, p, s, "tools/call", `{"name":"ev__research","arguments":{"q":1},"task":{"ttl":60000}}`)
	var res struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(got), &res); err != nil || res.Result.Task.Status != "working" {
		t.Fatalf("task-augmented tools/call = %s", got)
	}
	if !validTaskID(res.Result.Task.TaskID) || strings.Contains(got, "up-") {
		t.Fatalf("the CreateTaskResult names %q, want an id of the proxy's: %s", res.Result.Task.TaskID, got)
	}
	return res.Result.Task.TaskID
}

// A task-augmented call goes to its server with the client's task member;
// tasks/get, tasks/result and tasks/cancel reach the server with its own
// id and answer with the proxy's; tasks/list keeps the session's tasks of
// the server's list, under the proxy's ids.
func TestTaskRoutes(t *testing.T) {
	p, ev, _ := tasksProxy(t)
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	id := createTask(t, p, s)
	call := ev.requests()[0]
	if call.Params != `{"name":"research","arguments":{"q":1},"task":{"ttl":60000}}` {
		t.Errorf("upstream tools/call params = %s", call.Params)
	}
	for _, tc := range []struct {
		method, want string
	}{
		{"tasks/get", `{"taskId":"` + id + `","status":"completed","ttl":60000}`},
		{"tasks/cancel", `{"taskId":"` + id + `","status":"cancelled","ttl":60000}`},
		{"tasks/result", `{"content":[{"type":"text","text":"done"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + id + `"}}}`},
		{"tasks/list", `{"tasks":[{"taskId":"` + id + `","status":"completed"}]}`},
	} {
		params := `{"taskId":"` + id + `"}`
		if tc.method == "tasks/list" {
			params = `{}`
		}
		got := rpc(t, p, s, tc.method, params)
		if want := `{"jsonrpc":"2.0","id":7,"result":` + tc.want + `}`; got != want {
			t.Errorf("%s =\n%s\nwant\n%s", tc.method, got, want)
		}
		reqs := ev.requests()
		last := reqs[len(reqs)-1]
		wantUp := `{"taskId":"up-1"}`
		if tc.method == "tasks/list" {
			wantUp = `{}`
		}
		if last.Method != tc.method || last.Params != wantUp {
			t.Errorf("%s went upstream as %s %s, want %s", tc.method, last.Method, last.Params, wantUp)
		}
	}
	if got := rpc(t, p, s, "tasks/list", `{"cursor":"abc"}`); !strings.Contains(got, `"code":-32602`) {
		t.Errorf("tasks/list with a cursor the proxy did not issue = %s, want -32602", got)
	}
}

// Another session, of the same agent, reaches none of a session's tasks:
// every method answers "not found" without asking the server, and its
// tasks/list is empty. Nor does a session whose per-call list no longer
// allows the tool (the policy of the call holds for its task).
func TestTaskIsolation(t *testing.T) {
	p, ev, _ := tasksProxy(t)
	owner := clientAt(t, p, "s1", "2025-11-25", nil)
	id := createTask(t, p, owner)
	sent := len(ev.requests())
	other := clientAt(t, p, "s2", "2025-11-25", nil)
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		got := rpc(t, p, other, method, `{"taskId":"`+id+`"}`)
		if want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Failed to retrieve task: Task not found"}}`; got != want {
			t.Errorf("%s from another session = %s, want %s", method, got, want)
		}
	}
	if got := rpc(t, p, other, "tasks/list", `{}`); got != `{"jsonrpc":"2.0","id":7,"result":{"tasks":[]}}` {
		t.Errorf("tasks/list of another session = %s", got)
	}
	narrowed := clientAt(t, p, "s1", "2025-11-25", []string{"gx__plain"})
	if got := rpc(t, p, narrowed, "tasks/get", `{"taskId":"`+id+`"}`); !strings.Contains(got, "denied by policy (per_call_allowed_tools)") {
		t.Errorf("tasks/get of a tool the per-call list does not allow = %s", got)
	}
	if got := rpc(t, p, narrowed, "tasks/list", `{}`); got != `{"jsonrpc":"2.0","id":7,"result":{"tasks":[]}}` {
		t.Errorf("tasks/list of a session whose per-call list does not allow the task's tool = %s", got)
	}
	if n := len(ev.requests()); n != sent {
		t.Errorf("the server was asked %d times for tasks it must not be asked about", n-sent)
	}
}

// A task member goes upstream only where the server takes task-augmented
// calls and the client's era has tasks; otherwise the call runs as a plain
// call, and the tasks methods do not exist for that client.
func TestTaskMemberDropped(t *testing.T) {
	p, ev, gx := tasksProxy(t)
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	got := rpc(t, p, s, "tools/call", `{"name":"gx__plain","task":{"ttl":1000}}`)
	if !strings.Contains(got, "ran at once") || gx.requests()[0].Params != `{"name":"plain"}` {
		t.Errorf("a task-augmented call to a server without tasks: sent %s, answered %s", gx.requests()[0].Params, got)
	}
	old := clientAt(t, p, "s2", "2025-06-18", nil)
	rpc(t, p, old, "tools/call", `{"name":"ev__research","task":{}}`)
	if sent := ev.requests()[0].Params; sent != `{"name":"research"}` {
		t.Errorf("a 2025-06-18 client's task member went upstream: %s", sent)
	}
	if got := rpc(t, p, old, "tasks/list", `{}`); !strings.Contains(got, `"code":-32601`) {
		t.Errorf("tasks/list from a 2025-06-18 client = %s, want -32601", got)
	}
	if got := rpc(t, p, s, "tools/call", `{"name":"ev__research","task":7}`); !strings.Contains(got, "task must be an object") {
		t.Errorf("a task member that is not an object = %s", got)
	}
}

// A server's notifications/tasks/status reaches the session that created
// the task, under the proxy's id; one about a task no client of the proxy
// created reaches nobody.
func TestTaskStatusRelayed(t *testing.T) {
	p, _, _ := tasksProxy(t)
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	other := clientAt(t, p, "s2", "2025-11-25", nil)
	var mine, theirs recordStream
	s.notify.attach(&mine)
	other.notify.attach(&theirs)
	id := createTask(t, p, s)
	p.OnUpstreamNotification("ev", "notifications/tasks/status", json.RawMessage(`{"taskId":"up-1","status":"completed"}`))
	p.OnUpstreamNotification("ev", "notifications/tasks/status", json.RawMessage(`{"taskId":"up-9","status":"completed"}`))
	want := `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"` + id + `","status":"completed"}}`
	if got := mine.messages(); len(got) != 1 || got[0] != want {
		t.Errorf("the owner got %q, want [%s]", got, want)
	}
	if got := theirs.messages(); len(got) != 0 {
		t.Errorf("another session got %q", got)
	}
}

// A server's request that names a task (related-task metadata) goes to
// the session that created it, naming the task by the proxy's id.
func TestTaskRequestRouted(t *testing.T) {
	p, _, _ := tasksProxy(t)
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	s.state.SetClient(clientInfo{version: "2025-11-25", caps: clientCaps{elicitation: true}})
	s.markInitialized()
	out := &answeringStream{s: s, result: `{"action":"accept","content":{"x":"y"}}`}
	s.notify.attach(out)
	id := createTask(t, p, s)
	res, err := p.OnUpstreamRequest(context.Background(), "ev", "elicitation/create",
		json.RawMessage(`{"message":"which?","requestedSchema":{"type":"object"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}`))
	if err != nil || string(res) != `{"action":"accept","content":{"x":"y"}}` {
		t.Fatalf("the elicitation's answer = %s, %v", res, err)
	}
	if len(out.asked) != 1 || !strings.Contains(out.asked[0], `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
		t.Errorf("the client was asked %q, want the elicitation naming task %s", out.asked, id)
	}
}

// answeringStream answers every request the proxy sends on it with result.
type answeringStream struct {
	s      *session
	result string
	asked  []string
}

func (a *answeringStream) send(msg []byte) error {
	a.asked = append(a.asked, string(msg))
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || len(m.ID) == 0 {
		return nil
	}
	reply, err := rawjson.ParseMessage([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + a.result + `}`))
	if err != nil {
		return err
	}
	go a.s.asks.deliver(reply)
	return nil
}

// retagTask puts the proxy's id wherever a server's answer about a task
// names one, whatever id the server wrote, and changes nothing else.
func TestRetagTask(t *testing.T) {
	const rel = `"io.modelcontextprotocol/related-task"`
	for _, tc := range []struct{ name, in, want string }{
		{"task object", `{"taskId":"up-1","status":"working"}`, `{"taskId":"pxt-X","status":"working"}`},
		{"another id", `{"taskId":"up-2","status":"working"}`, `{"taskId":"pxt-X","status":"working"}`},
		{"result", `{"content":[],"_meta":{` + rel + `:{"taskId":"up-1"},"k":1}}`, `{"content":[],"_meta":{` + rel + `:{"taskId":"pxt-X"},"k":1}}`},
		{"both", `{"taskId":"up-1","_meta":{` + rel + `:{"taskId":"up-1"}}}`, `{"taskId":"pxt-X","_meta":{` + rel + `:{"taskId":"pxt-X"}}}`},
		{"neither", `{"content":[],"_meta":{"k":1}}`, `{"content":[],"_meta":{"k":1}}`},
		{"related-task not an object", `{"_meta":{` + rel + `:"up-1"}}`, `{"_meta":{` + rel + `:"up-1"}}`},
		{"not an object", `[1]`, `[1]`},
	} {
		if got := string(retagTask(json.RawMessage(tc.in), "pxt-X")); got != tc.want {
			t.Errorf("%s: retagTask(%s) = %s, want %s", tc.name, tc.in, got, tc.want)
		}
	}
}

// A session holds at most maxTasksPerSession tasks: one more
// task-augmented call is refused before it runs; and a task created while
// other calls filled the session meanwhile is cancelled at its server and
// the call refused, so that no task is left that no client can reach.
func TestTaskLimit(t *testing.T) {
	p, ev, _ := tasksProxy(t)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	p.opts.Metrics = m
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	answer := ev.RequestFn
	ev.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if method == "tools/call" {
			// Calls that ran alongside this one took the session's room.
			for i := range maxTasksPerSession {
				if _, err := p.calls.tasks.add(s, "ev", fmt.Sprint("other-", i), "ev__research", 0); err != nil {
					break
				}
			}
		}
		return answer(ctx, method, params)
	}
	refused := `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"this session already holds 256 tasks, none of them ended; let some end (tasks/cancel) before creating more"}}`
	if got := rpc(t, p, s, "tools/call", `{"name":"ev__research","task":{}}`); got != refused {
		t.Errorf("a task created once the session was full = %s, want %s", got, refused)
	}
	if got := counterValue(t, reg, "mcp_proxy_tool_calls_total", map[string]string{"server": "ev", "tool": "research", "outcome": "error"}); got != 1 {
		t.Errorf("tool calls counted as errors: %v, want 1", got)
	}
	reqs := ev.requests()
	if last := reqs[len(reqs)-1]; last.Method != "tasks/cancel" || last.Params != `{"taskId":"up-1"}` {
		t.Errorf("the server's last request = %+v, want tasks/cancel of up-1", last)
	}
	sent := len(reqs)
	if got := rpc(t, p, s, "tools/call", `{"name":"ev__research","task":{}}`); got != refused {
		t.Errorf("a task-augmented call of a full session = %s, want %s", got, refused)
	}
	if n := len(ev.requests()); n != sent {
		t.Errorf("a full session's task-augmented call reached the server (%d requests)", n-sent)
	}
}

// The client's answer to a server's request about a task names the task by
// the proxy's id, the only one it knows: the server gets it back under its
// own id, on the session's own stream and on the stream of the session's
// request in flight to the server alike.
func TestTaskRequestAnswerRetagged(t *testing.T) {
	p, ev, _ := tasksProxy(t)
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	s.state.SetClient(clientInfo{version: "2025-11-25", caps: clientCaps{elicitation: true}})
	s.markInitialized()
	out := &answeringStream{s: s}
	s.notify.attach(out)
	id := createTask(t, p, s)
	const rel = `"io.modelcontextprotocol/related-task"`
	out.result = `{"action":"accept","content":{"x":"y"},"_meta":{` + rel + `:{"taskId":"` + id + `"}}}`
	ask := `{"message":"which?","requestedSchema":{"type":"object"},"_meta":{` + rel + `:{"taskId":"up-1"}}}`
	want := `{"action":"accept","content":{"x":"y"},"_meta":{` + rel + `:{"taskId":"up-1"}}}`

	res, err := p.OnUpstreamRequest(context.Background(), "ev", "elicitation/create", json.RawMessage(ask))
	if err != nil || string(res) != want {
		t.Errorf("on the session's stream: the server got %s, %v; want %s", res, err, want)
	}

	// During the client's tasks/result, the server asks on its stream.
	answer := ev.RequestFn
	got := make(chan string, 1)
	ev.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if method == "tasks/result" {
			res, err := p.OnUpstreamRequest(ctx, "ev", "elicitation/create", json.RawMessage(ask))
			got <- fmt.Sprint(string(res), err)
		}
		return answer(ctx, method, params)
	}
	onRequest := &answeringStream{s: s, result: out.result}
	refusal, _, run := p.route.receive(context.Background(), s, []byte(`{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{"taskId":"`+id+`"}}`), onRequest)
	if refusal != nil || run == nil {
		t.Fatalf("tasks/result refused: %s", refusal)
	}
	if reply, _ := run(); !strings.Contains(string(reply.bytes()), `"result"`) {
		t.Fatalf("tasks/result = %s", reply.bytes())
	}
	if len(onRequest.asked) != 1 {
		t.Errorf("the request's stream carried %q, want the elicitation", onRequest.asked)
	}
	if g := <-got; g != want+"<nil>" {
		t.Errorf("on the request's stream: the server got %s; want %s", g, want)
	}
}

// tasks/list gives the servers' tasks in config order, not by name: one
// server's with tasks/list, the other's with tasks/get.
func TestTaskListConfigOrder(t *testing.T) {
	taskServer := func(prefix string, list bool) *fakeUpstream {
		u := connected(`{"name":"job","inputSchema":{"type":"object"}}`)
		snap := *u.Snapshot()
		snap.Capabilities = upstream.Capabilities{Tools: true, Tasks: upstream.TaskCapabilities{ToolCalls: true, List: list}}
		u.snap.Store(&snap)
		u.RequestFn = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			switch method {
			case "tools/call":
				return json.RawMessage(`{"task":{"taskId":"` + prefix + `","status":"working"}}`), nil
			case "tasks/get":
				return json.RawMessage(`{"taskId":"` + prefix + `","status":"working","n":"` + prefix + `"}`), nil
			case "tasks/list":
				return json.RawMessage(`{"tasks":[{"taskId":"` + prefix + `","status":"working","n":"` + prefix + `"}]}`), nil
			}
			return nil, &upstream.RPCError{Code: codeMethodNotFound, Message: "no " + method}
		}
		return u
	}
	yaml := "servers:\n  zz: {command: fixture}\n  aa: {command: fixture}\n"
	p := newProxy(t, yaml, map[string]*fakeUpstream{"zz": taskServer("z", true), "aa": taskServer("a", false)})
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	var ids []string
	for _, tool := range []string{"aa__job", "zz__job"} {
		got := rpc(t, p, s, "tools/call", `{"name":"`+tool+`","task":{}}`)
		id, _, _ := strings.Cut(strings.TrimPrefix(got, `{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"`), `"`)
		if !validTaskID(id) {
			t.Fatalf("tools/call %s = %s", tool, got)
		}
		ids = append(ids, id)
	}
	want := `{"jsonrpc":"2.0","id":7,"result":{"tasks":[{"taskId":"` + ids[1] + `","status":"working","n":"z"},{"taskId":"` + ids[0] + `","status":"working","n":"a"}]}}`
	if got := rpc(t, p, s, "tasks/list", `{}`); got != want {
		t.Errorf("tasks/list =\n%s\nwant zz's task before aa's:\n%s", got, want)
	}
}

// A CreateTaskResult whose related-task metadata names the server's id
// reaches the client with the proxy's id there too.
func TestCreatedTaskRelatedRetagged(t *testing.T) {
	p, ev, _ := tasksProxy(t)
	ev.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"task":{"taskId":"up-1","status":"working"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}`), nil
	}
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	got := rpc(t, p, s, "tools/call", `{"name":"ev__research","task":{}}`)
	id, _, _ := strings.Cut(strings.TrimPrefix(got, `{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"`), `"`)
	want := `{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"` + id + `","status":"working"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + id + `"}}}}`
	if !validTaskID(id) || got != want {
		t.Errorf("CreateTaskResult =\n%s\nwant\n%s", got, want)
	}
}

// A full session makes room as the refusal says: a task it cancelled (or
// saw end otherwise) is forgotten, the oldest first, when one more task
// needs room; while none has ended, one more is refused.
func TestTaskLimitCancelMakesRoom(t *testing.T) {
	p, ev, _ := tasksProxy(t)
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	first := createTask(t, p, s) // the server's up-1
	for i := 1; i < maxTasksPerSession; i++ {
		if _, err := p.calls.tasks.add(s, "ev", fmt.Sprint("other-", i), "ev__research", 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := rpc(t, p, s, "tools/call", `{"name":"ev__research","task":{}}`); !strings.Contains(got, `"code":-32600`) {
		t.Fatalf("a task-augmented call of a full session = %s, want it refused", got)
	}
	if got := rpc(t, p, s, "tasks/cancel", `{"taskId":"`+first+`"}`); !strings.Contains(got, `"status":"cancelled"`) {
		t.Fatalf("tasks/cancel = %s", got)
	}
	sent := len(ev.requests())
	if got := rpc(t, p, s, "tools/call", `{"name":"ev__research","task":{}}`); !strings.Contains(got, `"taskId":"pxt-`) {
		t.Fatalf("a task-augmented call once a task of the session ended = %s, want a task", got)
	}
	if reqs := ev.requests(); len(reqs) != sent+1 || reqs[sent].Method != "tools/call" {
		t.Errorf("the server got %+v, want the one tools/call (no task cancelled)", reqs[sent:])
	}
	if got := rpc(t, p, s, "tasks/get", `{"taskId":"`+first+`"}`); !strings.Contains(got, "Task not found") {
		t.Errorf("the ended task that made room = %s, want it forgotten", got)
	}
}

// A full session's task-augmented call of a tool whose server takes no
// tasks runs as a plain call, as it would with room: no task is made.
func TestTaskLimitPlainCallRuns(t *testing.T) {
	p, _, gx := tasksProxy(t)
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	for i := range maxTasksPerSession {
		if _, err := p.calls.tasks.add(s, "ev", fmt.Sprint("up-", i), "ev__research", 0); err != nil {
			t.Fatal(err)
		}
	}
	got := rpc(t, p, s, "tools/call", `{"name":"gx__plain","task":{"ttl":1000}}`)
	if !strings.Contains(got, "ran at once") || len(gx.requests()) != 1 {
		t.Errorf("a full session's task-augmented call to a server without tasks = %s, want it run as a plain call", got)
	}
}

// A server's log message about a task (related-task metadata) goes to the
// session that created the task only, naming the proxy's id; one about no
// task goes to every session that takes the server's logs.
func TestTaskLogRelayed(t *testing.T) {
	p, _, _ := tasksProxy(t)
	s := clientAt(t, p, "s1", "2025-11-25", nil)
	other := clientAt(t, p, "s2", "2025-11-25", nil)
	var mine, theirs recordStream
	for _, x := range []struct {
		s   *session
		out *recordStream
	}{{s, &mine}, {other, &theirs}} {
		x.s.open.Store(true)
		x.s.notify.attach(x.out)
		p.sessions.add(x.s)
	}
	id := createTask(t, p, s)
	const rel = `"io.modelcontextprotocol/related-task"`
	p.OnUpstreamNotification("ev", "notifications/message", json.RawMessage(`{"level":"info","data":"step 2","_meta":{`+rel+`:{"taskId":"up-1"}}}`))
	p.OnUpstreamNotification("ev", "notifications/message", json.RawMessage(`{"level":"info","data":"for all"}`))
	forAll := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"for all","logger":"ev"}}`
	want := []string{`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"step 2","_meta":{` + rel + `:{"taskId":"` + id + `"}},"logger":"ev"}}`, forAll}
	if got := mine.messages(); !slices.Equal(got, want) {
		t.Errorf("the task's session got\n%q\nwant\n%q", got, want)
	}
	if got := theirs.messages(); !slices.Equal(got, []string{forAll}) {
		t.Errorf("another session got\n%q\nwant only\n%q", got, forAll)
	}
}
