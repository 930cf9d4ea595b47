package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// The tasks of MCP 2025-11-25 (basic/utilities/tasks; docs/protocol.md#tasks),
// passed through to the servers that declare them. A task-augmented
// tools/call takes the whole call chain (policy, integrity, pinned
// arguments, rate limits, approval) like any call; its CreateTaskResult
// gets the proxy's task id (tasktable.go). tasks/get, tasks/result and
// tasks/cancel go to the task's server with the server's id, for the
// session that created the task only, while its agent may still call the
// tool; tasks/list merges the session's tasks of every server. The
// server's notifications/tasks/status and its requests that name a task
// (related-task metadata) reach that session with the proxy's id.

// firstTasksVersion is the first protocol version with tasks. The
// 2026-07-28 revision moved them to an extension of another shape
// (SEP-2663), which the proxy does not serve: its clients are not offered
// tasks.
const firstTasksVersion = "2025-11-25"

// relatedTaskKey is the _meta key that ties a message to a task.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// maxTaskListPages bounds the pages of one server's tasks/list that one
// tasks/list of a client reads: a server that pages without end cannot
// hold the client.
const maxTaskListPages = 100

// tasksFor reports whether r's client speaks the tasks the proxy passes.
func tasksFor(r *request) bool {
	return !r.modern && r.version >= firstTasksVersion && taskOwner(r.sess) != ""
}

// taskParam is the task member of a tools/call to forward upstream: the
// client's, when its era has tasks and the tool's server takes
// task-augmented calls; nil otherwise, and the call runs as a plain call,
// as MCP says a receiver without the capability treats it.
func (tc *toolCalls) taskParam(c *toolCall, up Upstream) json.RawMessage {
	if len(c.task) == 0 || c.task[0] != '{' || !tasksFor(c.r) || !up.Snapshot().Capabilities.Tasks.ToolCalls {
		return nil
	}
	return c.task
}

// orphanCancelTimeout bounds the tasks/cancel of a task the proxy could
// not give its client (the session's tasks were full meanwhile).
const orphanCancelTimeout = 5 * time.Second

// createdTask turns up's CreateTaskResult for c into the client's: the
// task gets the proxy's id, bound to c's session. A result with no task
// (the server ran the call at once) is nil, false. A task the session has
// no room for (calls that raced past forwardTask's check) is cancelled at
// its server, best effort, and the call refused.
func (tc *toolCalls) createdTask(ctx context.Context, c *toolCall, up Upstream, result json.RawMessage) (json.RawMessage, *wireError, bool) {
	task, ok, err := rawjson.Get(result, "task")
	if err != nil || !ok || len(task) == 0 || task[0] != '{' {
		return nil, nil, false
	}
	upID, err := stringMember(task, "taskId")
	if err != nil || upID == "" {
		return nil, errorf(codeInternal, "MCP server '%s' created a task without a task id", c.entry.Server), true
	}
	id, err := tc.tasks.add(c.r.sess, c.entry.Server, upID, c.entry.Exposed, taskTTL(task))
	if err != nil {
		if up.Snapshot().Capabilities.Tasks.Cancel {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), orphanCancelTimeout)
			_, _ = up.Request(cctx, "tasks/cancel", []byte(`{"taskId":`+string(rawjson.String(upID))+`}`))
			cancel()
		}
		return nil, tooManyTasks(), true
	}
	task, err = rawjson.Set(task, "taskId", rawjson.String(id))
	if err == nil {
		result, err = rawjson.Set(result, "task", task)
	}
	if err != nil {
		return nil, errorf(codeInternal, "MCP server '%s': invalid CreateTaskResult", c.entry.Server), true
	}
	return retagRelated(result, id), nil, true
}

func tooManyTasks() *wireError {
	return errorf(codeInvalidRequest, "this session already holds %d tasks, none of them ended; let some end (tasks/cancel) before creating more", maxTasksPerSession)
}

// taskTTL is a task's ttl (milliseconds), 0 when it has none or null.
func taskTTL(task json.RawMessage) time.Duration {
	v, ok, err := rawjson.Get(task, "ttl")
	if err != nil || !ok {
		return 0
	}
	var ms float64
	if json.Unmarshal(v, &ms) != nil || ms <= 0 || math.IsInf(ms, 0) || ms > float64(maxTaskKeep/time.Millisecond) {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// taskID reads a tasks/* request's taskId.
func taskID(params json.RawMessage) (string, *wireError) {
	if len(params) == 0 || params[0] != '{' {
		return "", errorf(codeInvalidParams, "invalid params: a params object with a taskId is required")
	}
	v, ok, err := rawjson.Get(params, "taskId")
	if err != nil || !ok {
		return "", errorf(codeInvalidParams, "invalid params: taskId is required")
	}
	id, err := rawjson.Unquote(v)
	if err != nil {
		return "", errorf(codeInvalidParams, "invalid params: taskId must be a string")
	}
	return id, nil
}

// taskNotFound answers a task id the session does not own: unknown,
// expired and another session's alike.
func taskNotFound() *wireError {
	return errorf(codeInvalidParams, "Failed to retrieve task: Task not found")
}

// ownTask finds the task a tasks/get, tasks/result or tasks/cancel names,
// for r's session, and checks that its agent may still call the task's
// tool: the same policy as the call that created it (approval is not asked
// again). A tool the policy now hides makes the task not found.
func (tc *toolCalls) ownTask(ctx context.Context, r *request) (taskRoute, *wireError) {
	if !tasksFor(r) {
		return taskRoute{}, errorf(codeMethodNotFound, "Method not found: %s (tasks need protocol version %s)", r.method, firstTasksVersion)
	}
	id, werr := taskID(r.params)
	if werr != nil {
		return taskRoute{}, werr
	}
	t, ok := tc.tasks.lookup(r.sess, id)
	if !ok {
		return taskRoute{}, taskNotFound()
	}
	tc.catalogs.awaitTool(ctx, t.tool)
	switch rule := tc.taskRule(r.sess, t); {
	case rule == filter.RuleNone:
		return t, nil
	case rule.Hidden():
		return taskRoute{}, taskNotFound()
	default:
		tc.opts.Metrics.PolicyDenial(r.sess.agent.Name, string(rule))
		return taskRoute{}, errorf(codeInvalidRequest, "the task's tool '%s' is denied by policy (%s)", t.tool, rule)
	}
}

// taskRule is the policy rule that keeps s from task t's tool now
// (filter.RuleNone when none): its server must still be granted, and the
// tool, while the catalog has it, allowed.
func (tc *toolCalls) taskRule(s *session, t taskRoute) filter.Rule {
	if !s.agent.Granted(t.server) {
		return filter.RuleNotGranted
	}
	if e, ok := tc.catalogs.Catalog().Lookup(t.tool); ok && e.Server == t.server {
		return s.agent.Decide(e.policyTool(), s.perCall)
	}
	return filter.RuleNone
}

// taskRequest sends method for task t to its server with the server's id,
// within the server's timeout, as a request of r in flight to it (a server
// request during it finds r's client).
func (tc *toolCalls) taskRequest(ctx context.Context, r *request, t taskRoute, method string) (json.RawMessage, *wireError) {
	if werr := tc.serverUp(t.server); werr != nil {
		return nil, werr
	}
	g := tc.gen()
	up, cfg := g.ups[t.server], g.cfg.Servers[t.server]
	if up == nil || cfg == nil {
		return nil, notConnected(t.server)
	}
	timeout := cfg.Timeout.D()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	end := tc.relay.begin(cctx, t.server, r)
	defer end()
	params := []byte(`{"taskId":` + string(rawjson.String(t.upID)) + `}`)
	res, err := up.Request(withRequest(cctx, r), method, params)
	if err != nil {
		_, werr := tc.classify(&ToolEntry{Server: t.server, Exposed: t.tool}, nil, err, ctx, cctx, timeout)
		return nil, werr
	}
	return res, nil
}

// getTask answers tasks/get: the server's task, with the proxy's id.
func (tc *toolCalls) getTask(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	return tc.taskStatus(ctx, r, "tasks/get")
}

// cancelTask answers tasks/cancel: the server's task after it, with the
// proxy's id.
func (tc *toolCalls) cancelTask(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	return tc.taskStatus(ctx, r, "tasks/cancel")
}

func (tc *toolCalls) taskStatus(ctx context.Context, r *request, method string) (json.RawMessage, *wireError) {
	t, werr := tc.ownTask(ctx, r)
	if werr != nil {
		return nil, werr
	}
	res, werr := tc.taskRequest(ctx, r, t, method)
	if werr != nil {
		return nil, werr
	}
	tc.tasks.noteStatus(t.id, res)
	return retagTask(res, t.id), nil
}

// taskResult answers tasks/result: what the tool call would have
// answered, rewritten as a call's result is (blobs, TAG characters), its
// related-task metadata naming the proxy's id.
func (tc *toolCalls) taskResult(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	t, werr := tc.ownTask(ctx, r)
	if werr != nil {
		return nil, werr
	}
	res, werr := tc.taskRequest(ctx, r, t, "tasks/result")
	if werr != nil {
		return nil, werr
	}
	tc.tasks.end(t.id) // a task's result comes once it is over
	return retagTask(tc.rewriteResult(r.sess.agent.Name, t.server, res, r.linkOK()), t.id), nil
}

// listTasks answers tasks/list: the session's tasks whose tools its
// policy still allows (ownTask), in the order the servers are configured and each
// server lists them, in one page. A server that declares tasks/list is
// asked for its list (every page, at most maxTaskListPages); the others
// are asked tasks/get for each task. A task its server no longer knows is
// left out; a server that cannot be asked leaves its tasks out.
func (tc *toolCalls) listTasks(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	if !tasksFor(r) {
		return nil, errorf(codeMethodNotFound, "Method not found: %s (tasks need protocol version %s)", r.method, firstTasksVersion)
	}
	if cur, _ := stringMember(r.params, "cursor"); cur != "" {
		return nil, errorf(codeInvalidParams, "invalid params: invalid cursor (the proxy lists tasks in one page)")
	}
	byServer := map[string][]taskRoute{}
	for _, t := range tc.tasks.owned(r.sess) {
		if tc.taskRule(r.sess, t) == filter.RuleNone {
			byServer[t.server] = append(byServer[t.server], t)
		}
	}
	out := []byte(`{"tasks":[`)
	first := true
	add := func(task json.RawMessage) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, task...)
	}
	g := tc.gen()
	for _, srv := range g.cfg.ServersInOrder() {
		mine, up, cfg := byServer[srv], g.ups[srv], g.cfg.Servers[srv]
		if len(mine) == 0 || up == nil || cfg == nil || tc.serverUp(srv) != nil {
			continue
		}
		if up.Snapshot().Capabilities.Tasks.List {
			for _, task := range tc.serverTasks(ctx, r, srv, up, cfg.Timeout.D(), mine) {
				add(task)
			}
			continue
		}
		for _, t := range mine {
			if res, werr := tc.taskRequest(ctx, r, t, "tasks/get"); werr == nil {
				tc.tasks.noteStatus(t.id, res)
				add(retagTask(res, t.id))
			}
		}
	}
	return append(out, "]}"...), nil
}

// serverTasks reads the tasks/list of srv (up, each page within timeout)
// and keeps the tasks of mine, with the proxy's ids.
func (tc *toolCalls) serverTasks(ctx context.Context, r *request, srv string, up Upstream, timeout time.Duration, mine []taskRoute) []json.RawMessage {
	ids := make(map[string]string, len(mine))
	for _, t := range mine {
		ids[t.upID] = t.id
	}
	var out []json.RawMessage
	cursor := ""
	for range maxTaskListPages {
		params := []byte(`{}`)
		if cursor != "" {
			params = []byte(`{"cursor":` + string(rawjson.String(cursor)) + `}`)
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		res, err := up.Request(withRequest(cctx, r), "tasks/list", params)
		cancel()
		var page struct {
			Tasks      []json.RawMessage `json:"tasks"`
			NextCursor string            `json:"nextCursor"`
		}
		if err != nil || json.Unmarshal(res, &page) != nil {
			tc.log.Debug().Str("server", srv).Str("error", fmt.Sprint(err)).Msg("tasks/list failed; its tasks are left out")
			return out
		}
		for _, task := range page.Tasks {
			upID, err := stringMember(task, "taskId")
			if id, ok := ids[upID]; err == nil && ok {
				tc.tasks.noteStatus(id, task)
				out = append(out, retagTask(task, id))
				delete(ids, upID)
			}
		}
		if page.NextCursor == "" || len(ids) == 0 {
			return out
		}
		cursor = page.NextCursor
	}
	return out
}

// retagTask gives a server's answer about one task (a task object, or a
// result tied to the task by related-task metadata) the proxy's id id in
// place of the server's: its taskId member and its related-task
// metadata's, whatever they said (a server's id never reaches a client).
func retagTask(obj json.RawMessage, id string) json.RawMessage {
	if len(obj) == 0 || obj[0] != '{' {
		return obj
	}
	if _, ok, err := rawjson.Get(obj, "taskId"); err == nil && ok {
		if out, err := rawjson.Set(obj, "taskId", rawjson.String(id)); err == nil {
			obj = out
		}
	}
	return retagRelated(obj, id)
}

// retagRelated sets the taskId of obj's related-task metadata (obj is a
// result, or a request's or notification's params) to id; obj is returned
// as it is when it has none.
func retagRelated(obj json.RawMessage, id string) json.RawMessage {
	meta, ok, err := rawjson.Get(obj, "_meta")
	if err != nil || !ok || len(meta) == 0 || meta[0] != '{' {
		return obj
	}
	related, ok, err := rawjson.Get(meta, relatedTaskKey)
	if err != nil || !ok || len(related) == 0 || related[0] != '{' {
		return obj
	}
	related, err = rawjson.Set(related, "taskId", rawjson.String(id))
	if err != nil {
		return obj
	}
	if meta, err = rawjson.Set(meta, relatedTaskKey, related); err != nil {
		return obj
	}
	if out, err := rawjson.Set(obj, "_meta", meta); err == nil {
		return out
	}
	return obj
}

// relatedTask is the task of srv that params' related-task metadata names,
// when it is one a client created through the proxy.
func (rl *relay) relatedTask(srv string, params json.RawMessage) (taskRoute, bool) {
	meta := metaOf(params)
	if len(meta) == 0 {
		return taskRoute{}, false
	}
	related, ok, err := rawjson.Get(meta, relatedTaskKey)
	if err != nil || !ok || len(related) == 0 || related[0] != '{' {
		return taskRoute{}, false
	}
	upID, err := stringMember(related, "taskId")
	if err != nil || upID == "" {
		return taskRoute{}, false
	}
	return rl.tasks.upstream(srv, upID)
}

// taskStatusChanged relays a server's notifications/tasks/status to the
// session that created the task, with the proxy's id; a task the proxy
// does not know (another client's outside the proxy, or expired) is
// dropped.
func (rl *relay) taskStatusChanged(srv string, params json.RawMessage) {
	upID, err := stringMember(params, "taskId")
	if err != nil || upID == "" {
		return
	}
	t, ok := rl.tasks.upstream(srv, upID)
	if !ok || t.sess == nil || !t.sess.agent.Granted(srv) {
		return
	}
	rl.tasks.noteStatus(t.id, params)
	t.sess.sendUnowned(notification("notifications/tasks/status", retagTask(params, t.id)))
}
