package downstream

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// The tasks the clients created through the proxy (MCP 2025-11-25,
// basic/utilities/tasks; docs/protocol.md#tasks). An upstream's task id
// belongs to the proxy's one connection to that server, which every client
// shares, so a client never sees it: the CreateTaskResult it gets names a
// task id of the proxy's own, random and opaque, which this table maps to
// the server and the upstream's id, and binds to the session that created
// it. Another session, of the same agent or not, cannot reach it: for it
// the id does not exist.

// Limits of the task table.
const (
	// maxTasksPerSession bounds the live tasks of one session: a client
	// that creates tasks and never lets them end cannot grow the table
	// without end. A full session's oldest ended task makes room for a
	// new one. A tasks/list answers them all in one page.
	maxTasksPerSession = 256
	// maxTaskKeep bounds how long the proxy keeps a task's route: its ttl
	// when the server gave one and it is shorter (the server may delete
	// the task after it), else this.
	maxTaskKeep = 24 * time.Hour
	// taskIDPrefix begins every task id the proxy issues.
	taskIDPrefix = "pxt-"
	// taskIDRandom is the random bytes of a task id: 128 bits, so that an
	// id is never guessed (MCP 2025-11-25 asks receivers that cannot bind
	// tasks to a requestor for as much; the proxy does both).
	taskIDRandom = 16
)

// errTooManyTasks refuses a task-augmented call of a session that holds
// maxTasksPerSession live tasks, none of them known to have ended.
var errTooManyTasks = errors.New("too many tasks")

// taskRoute is one task a client created through the proxy: its values
// never change once it is in the table, but for ended.
type taskRoute struct {
	id      string   // the proxy's id, the one the client knows
	server  string   // the server that runs it
	upID    string   // the server's own id of it
	tool    string   // the tool the client called, as the client named it
	owner   string   // taskOwner of the session that created it
	sess    *session // that session, for the server's messages about the task
	expires time.Time
	seq     uint64 // the order of creation
	// ended is set once the proxy saw the task in a terminal status
	// (completed, failed, cancelled): it is kept for its ttl all the
	// same, until its session needs the room.
	ended bool
}

// upTask names a task as its server knows it.
type upTask struct{ server, id string }

// taskTable maps the proxy's task ids to their servers' and back. Its
// methods are safe for concurrent use; the zero value is not ready (use
// newTaskTable).
type taskTable struct {
	mu    sync.Mutex
	byID  map[string]*taskRoute
	byUp  map[upTask]*taskRoute
	count map[string]int // live routes per owner
	seq   uint64
	now   func() time.Time
	// newID makes a task id; tests replace it.
	newID func() string
}

func newTaskTable(now func() time.Time) *taskTable {
	if now == nil {
		now = time.Now
	}
	return &taskTable{byID: map[string]*taskRoute{}, byUp: map[upTask]*taskRoute{}, count: map[string]int{}, now: now, newID: newTaskID}
}

// taskOwner is the key tasks are bound to: the session's agent and id. A
// session without an id (a stateless request, the call verb) owns no
// tasks: "" is never an owner.
func taskOwner(s *session) string {
	if s == nil || s.id == "" {
		return ""
	}
	return s.agent.Name + "\x00" + s.id
}

// newTaskID is a fresh random task id.
func newTaskID() string {
	var b [taskIDRandom]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return taskIDPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// validTaskID reports whether id has the form of an id the proxy issues:
// a client's id is checked before anything else is done with it.
func validTaskID(id string) bool {
	rest, ok := strings.CutPrefix(id, taskIDPrefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(taskIDRandom) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// add records a task server created for s's call of tool under the
// server's id upID, kept for ttl (0: maxTaskKeep), and returns the
// proxy's id of it. A session that holds maxTasksPerSession live tasks
// forgets the oldest that ended to make room, and gets errTooManyTasks
// when none has; so does one that owns no tasks (no id).
func (t *taskTable) add(s *session, server, upID, tool string, ttl time.Duration) (string, error) {
	owner := taskOwner(s)
	if owner == "" {
		return "", errTooManyTasks
	}
	if ttl <= 0 || ttl > maxTaskKeep {
		ttl = maxTaskKeep
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked(now)
	if t.count[owner] >= maxTasksPerSession {
		ended := t.oldestEndedLocked(owner)
		if ended == nil {
			return "", errTooManyTasks
		}
		t.dropLocked(ended)
	}
	if old := t.byUp[upTask{server, upID}]; old != nil {
		// The server reused an id (it restarted and forgot its tasks):
		// the old route names a task that is gone.
		t.dropLocked(old)
	}
	t.seq++
	rt := &taskRoute{id: t.newID(), server: server, upID: upID, tool: tool, owner: owner, sess: s, expires: now.Add(ttl), seq: t.seq}
	for t.byID[rt.id] != nil {
		rt.id = t.newID()
	}
	t.byID[rt.id] = rt
	t.byUp[upTask{server, upID}] = rt
	t.count[owner]++
	return rt.id, nil
}

// room reports whether s may create one more task.
func (t *taskTable) room(s *session) bool {
	owner := taskOwner(s)
	if owner == "" {
		return false
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked(now)
	return t.count[owner] < maxTasksPerSession || t.oldestEndedLocked(owner) != nil
}

// oldestEndedLocked is owner's oldest task that ended, nil when none has.
func (t *taskTable) oldestEndedLocked(owner string) *taskRoute {
	var oldest *taskRoute
	for _, rt := range t.byID {
		if rt.owner == owner && rt.ended && (oldest == nil || rt.seq < oldest.seq) {
			oldest = rt
		}
	}
	return oldest
}

// noteStatus records what a server's task object (a tasks/get or
// tasks/cancel answer, an entry of tasks/list, the params of
// notifications/tasks/status) says of the task the proxy knows as id: a
// terminal status marks the task ended.
func (t *taskTable) noteStatus(id string, task json.RawMessage) {
	switch status, _ := stringMember(task, "status"); status {
	case "completed", "failed", "cancelled":
		t.end(id)
	}
}

// end marks the task the proxy knows as id ended: its tasks/result was
// answered, or the server gave it a terminal status.
func (t *taskTable) end(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rt := t.byID[id]; rt != nil {
		rt.ended = true
	}
}

// lookup returns the live task id of s's session: a task of another
// session, an expired one and an unknown one are all not found alike.
func (t *taskTable) lookup(s *session, id string) (taskRoute, bool) {
	owner := taskOwner(s)
	if owner == "" || !validTaskID(id) {
		return taskRoute{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rt := t.byID[id]
	if rt == nil || rt.owner != owner || !t.now().Before(rt.expires) {
		return taskRoute{}, false
	}
	return *rt, true
}

// upstream returns the live task server knows as upID.
func (t *taskTable) upstream(server, upID string) (taskRoute, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rt := t.byUp[upTask{server, upID}]
	if rt == nil || !t.now().Before(rt.expires) {
		return taskRoute{}, false
	}
	return *rt, true
}

// owned returns s's live tasks, oldest first.
func (t *taskTable) owned(s *session) []taskRoute {
	owner := taskOwner(s)
	if owner == "" {
		return nil
	}
	now := t.now()
	t.mu.Lock()
	var out []taskRoute
	for _, rt := range t.byID {
		if rt.owner == owner && now.Before(rt.expires) {
			out = append(out, *rt)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b taskRoute) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// forget drops the tasks of a session that ended: nothing can reach them
// any more (the server keeps them until their ttl).
func (t *taskTable) forget(s *session) {
	owner := taskOwner(s)
	if owner == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, rt := range t.byID {
		if rt.owner == owner {
			t.dropLocked(rt)
		}
	}
}

// sweepLocked drops the expired routes.
func (t *taskTable) sweepLocked(now time.Time) {
	for _, rt := range t.byID {
		if !now.Before(rt.expires) {
			t.dropLocked(rt)
		}
	}
}

func (t *taskTable) dropLocked(rt *taskRoute) {
	delete(t.byID, rt.id)
	if t.byUp[upTask{rt.server, rt.upID}] == rt {
		delete(t.byUp, upTask{rt.server, rt.upID})
	}
	if t.count[rt.owner]--; t.count[rt.owner] <= 0 {
		delete(t.count, rt.owner)
	}
}
