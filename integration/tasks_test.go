package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// tasksReport is what tshost/tasks-host.mjs saw.
type tasksReport struct {
	Error           string          `json:"error"`
	TasksCapability json.RawMessage `json:"tasksCapability"`
	TaskSupport     string          `json:"taskSupport"`
	Created         struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	} `json:"created"`
	PlainStatuses []string `json:"plainStatuses"`
	PlainResult   struct {
		Text        string `json:"text"`
		RelatedTask string `json:"relatedTask"`
	} `json:"plainResult"`
	AmbiguousID       string   `json:"ambiguousId"`
	AmbiguousStatuses []string `json:"ambiguousStatuses"`
	AmbiguousText     string   `json:"ambiguousText"`
	Elicitations      []struct {
		RelatedTask string `json:"relatedTask"`
	} `json:"elicitations"`
	DoomedID  string `json:"doomedId"`
	Cancelled struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	} `json:"cancelled"`
	Listed []struct {
		TaskID string `json:"taskId"`
	} `json:"listed"`
	StatusNotices []struct {
		TaskID string `json:"taskId"`
	} `json:"statusNotices"`
	Other *struct {
		Get, Result, Cancel struct {
			Code    *int   `json:"code"`
			Message string `json:"message"`
		}
		List []string `json:"list"`
	} `json:"other"`
}

// The tasks of MCP 2025-11-25 through the proxy (docs/protocol.md#tasks):
// server-everything's simulate-research-query, whose tools/list entry says
// taskSupport "required", reached over stdio and over Streamable HTTP by
// the TypeScript SDK's client over the other transport. The proxy declares
// the server's tasks capability; a task is created (with an id of the
// proxy's, never the server's), polled with tasks/get to completed and its
// result fetched (its related-task metadata naming the proxy's id); an
// ambiguous one goes to input_required, and its tasks/result brings the
// server's elicitation, naming the task by the proxy's id, whose answer
// the result then shows; a third is cancelled; tasks/list has the three.
// Over HTTP a second session of the same agent gets "not found" for every
// one of the first session's ids and an empty tasks/list.
func TestTasksThroughProxy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		upstream func(t *testing.T) string
		client   string
	}{
		{"stdio server, stdio client", func(*testing.T) string { return everythingServer("ev") }, "stdio"},
		{"HTTP server, HTTP client", func(t *testing.T) string { return httpServer("ev", everythingHTTP(t)) }, "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, "", tc.upstream(t))
			args := []string{"tshost/tasks-host.mjs"}
			env := append(proxyEnv(), "TASKS_TOOL=ev__simulate-research-query", fmt.Sprintf("TASKS_WAIT_MS=%d", callTimeout.Milliseconds()))
			if tc.client == "stdio" {
				args = append(args, proxyBin, "serve", "--config", cfg)
			} else {
				url, _ := startHTTPProxy(t, cfg)
				args = append(args, url)
				env = append(env, "TASKS_SECOND=1")
			}
			r := runTasksHost(t, args, env)
			checkTasksReport(t, r, tc.client == "http")
		})
	}
}

// runTasksHost runs tshost/tasks-host.mjs and returns its report.
func runTasksHost(t *testing.T, args, env []string) tasksReport {
	t.Helper()
	cmd := exec.CommandContext(testCtx(t, startTimeout+5*callTimeout), nodeBin, args...)
	cmd.Env = env
	cmd.WaitDelay = exitTimeout
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TypeScript client stderr (tail):\n%s", tail(stderr.String(), 4000))
		}
	})
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, tail(stderr.String(), 4000))
	}
	if race := testproc.RaceReport(stderr.String()); race != "" {
		t.Errorf("the stdio proxy reported a data race:\n%s", race)
	}
	var r tasksReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("the client's report %q: %v", stdout.String(), err)
	}
	if r.Error != "" {
		t.Fatalf("the client failed: %s\nreport: %s", r.Error, stdout.String())
	}
	return r
}

func checkTasksReport(t *testing.T, r tasksReport, other bool) {
	t.Helper()
	if got, want := string(r.TasksCapability), `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`; got != want {
		t.Errorf("the proxy's tasks capability = %s, want %s", got, want)
	}
	if r.TaskSupport != "required" {
		t.Errorf("tools/list: execution.taskSupport = %q, want required", r.TaskSupport)
	}
	ids := []string{r.Created.TaskID, r.AmbiguousID, r.DoomedID}
	for _, id := range ids {
		if !strings.HasPrefix(id, "pxt-") {
			t.Errorf("task id %q is not one of the proxy's (pxt-…)", id)
		}
	}
	if r.Created.Status != "working" {
		t.Errorf("CreateTaskResult status = %q, want working", r.Created.Status)
	}
	if len(r.PlainStatuses) == 0 || r.PlainStatuses[len(r.PlainStatuses)-1] != "completed" {
		t.Errorf("tasks/get statuses = %v, want them to end with completed", r.PlainStatuses)
	}
	if !strings.Contains(r.PlainResult.Text, "Research Report: tides") {
		t.Errorf("tasks/result text = %q, want the report on tides", r.PlainResult.Text)
	}
	if r.PlainResult.RelatedTask != r.Created.TaskID {
		t.Errorf("tasks/result related-task = %q, want the proxy's id %q", r.PlainResult.RelatedTask, r.Created.TaskID)
	}
	if len(r.AmbiguousStatuses) == 0 || r.AmbiguousStatuses[len(r.AmbiguousStatuses)-1] != "input_required" {
		t.Errorf("the ambiguous task's statuses = %v, want them to end with input_required", r.AmbiguousStatuses)
	}
	if len(r.Elicitations) != 1 || r.Elicitations[0].RelatedTask != r.AmbiguousID {
		t.Errorf("elicitations = %+v, want one naming the task %q", r.Elicitations, r.AmbiguousID)
	}
	if !strings.Contains(r.AmbiguousText, "python (snake)") {
		t.Errorf("the ambiguous task's result = %.200q, want the answered interpretation (snake)", r.AmbiguousText)
	}
	if r.Cancelled.TaskID != r.DoomedID || r.Cancelled.Status != "cancelled" {
		t.Errorf("tasks/cancel = %+v, want task %q cancelled", r.Cancelled, r.DoomedID)
	}
	var listed []string
	for _, l := range r.Listed {
		listed = append(listed, l.TaskID)
	}
	slices.Sort(listed)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("tasks/list = %v, want exactly %v", listed, want)
	}
	for _, n := range r.StatusNotices {
		if !slices.Contains(ids, n.TaskID) {
			t.Errorf("notifications/tasks/status names task %q, not one of the proxy's ids %v", n.TaskID, ids)
		}
	}
	if !other {
		return
	}
	if r.Other == nil {
		t.Fatal("the second session reported nothing")
	}
	for name, o := range map[string]struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	}{"tasks/get": r.Other.Get, "tasks/result": r.Other.Result, "tasks/cancel": r.Other.Cancel} {
		if o.Code == nil || *o.Code != -32602 || !strings.Contains(o.Message, "Task not found") {
			t.Errorf("%s of another session's task: code %v, %q; want -32602 Task not found", name, o.Code, o.Message)
		}
	}
	if len(r.Other.List) != 0 {
		t.Errorf("tasks/list of another session = %v, want none", r.Other.List)
	}
}
