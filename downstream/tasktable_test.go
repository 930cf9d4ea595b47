package downstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/filter"
)

// taskSession is a session of agent with id, for the task table's tests.
func taskSession(agent, id string) *session {
	return newSession(id, transportHTTP, &filter.Agent{Name: agent}, nil)
}

// The task table gives each task an id of the proxy's and finds it for
// the session that created it only: another session of the same agent,
// the same session id under another agent, and a session with no id get
// nothing; the server's id maps back to the task.
func TestTaskTableOwnership(t *testing.T) {
	tt := newTaskTable(nil)
	a := taskSession("dev", "s1")
	id, err := tt.add(a, "ev", "up-1", "ev__research", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !validTaskID(id) || strings.Contains(id, "up-1") {
		t.Fatalf("task id %q: want the proxy's own form, not naming the server's id", id)
	}
	for _, tc := range []struct {
		name string
		s    *session
		want bool
	}{
		{"the creating session", a, true},
		{"the same session object again", taskSession("dev", "s1"), true},
		{"another session of the agent", taskSession("dev", "s2"), false},
		{"the same session id under another agent", taskSession("ops", "s1"), false},
		{"a session without an id", taskSession("dev", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, ok := tt.lookup(tc.s, id)
			if ok != tc.want {
				t.Fatalf("lookup = %v, want %v", ok, tc.want)
			}
			if ok && (rt.server != "ev" || rt.upID != "up-1" || rt.tool != "ev__research") {
				t.Errorf("route = %+v", rt)
			}
		})
	}
	if rt, ok := tt.upstream("ev", "up-1"); !ok || rt.id != id {
		t.Errorf("upstream(ev, up-1) = %+v, %v; want task %s", rt, ok, id)
	}
	if _, ok := tt.upstream("other", "up-1"); ok {
		t.Error("another server's task of the same id was found")
	}
	if _, ok := tt.lookup(a, id+"x"); ok {
		t.Error("a changed id was found")
	}
}

// A task's route lasts its ttl (at most maxTaskKeep); a session that ends
// loses its tasks; a server that reuses an id replaces the old route.
func TestTaskTableLifetime(t *testing.T) {
	now := time.Unix(1000, 0)
	tt := newTaskTable(func() time.Time { return now })
	a := taskSession("dev", "s1")
	short, _ := tt.add(a, "ev", "up-1", "t", 10*time.Second)
	long, _ := tt.add(a, "ev", "up-2", "t", 0)
	now = now.Add(10 * time.Second)
	if _, ok := tt.lookup(a, short); ok {
		t.Error("a task past its ttl was found")
	}
	if _, ok := tt.upstream("ev", "up-1"); ok {
		t.Error("a task past its ttl was found by the server's id")
	}
	if _, ok := tt.lookup(a, long); !ok {
		t.Error("a task with no ttl was lost after 10 s")
	}
	now = now.Add(maxTaskKeep)
	if _, ok := tt.lookup(a, long); ok {
		t.Errorf("a task with no ttl outlived %s", maxTaskKeep)
	}

	first, _ := tt.add(a, "ev", "up-3", "t", 0)
	again, _ := tt.add(a, "ev", "up-3", "t", 0)
	if _, ok := tt.lookup(a, first); ok {
		t.Error("the route of a server id the server gave again was kept")
	}
	if rt, ok := tt.upstream("ev", "up-3"); !ok || rt.id != again {
		t.Errorf("upstream(ev, up-3) = %+v, want the newer task %s", rt, again)
	}
	tt.forget(a)
	if _, ok := tt.lookup(a, again); ok {
		t.Error("a task of an ended session was found")
	}
	if got := tt.owned(a); len(got) != 0 {
		t.Errorf("an ended session owns %d tasks", len(got))
	}
}

// A session holds at most maxTasksPerSession live tasks; others are not
// held back by it, and a task that ends makes room. owned lists a
// session's tasks in the order they were created.
func TestTaskTableLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	tt := newTaskTable(func() time.Time { return now })
	a, b := taskSession("dev", "s1"), taskSession("dev", "s2")
	var ids []string
	for i := range maxTasksPerSession {
		ttl := time.Hour
		if i == 0 {
			ttl = time.Minute
		}
		id, err := tt.add(a, "ev", fmt.Sprint("up-", i), "t", ttl)
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	if tt.room(a) {
		t.Error("room reports room in a full session")
	}
	if _, err := tt.add(a, "ev", "one-more", "t", 0); err != errTooManyTasks {
		t.Errorf("task %d: err = %v, want errTooManyTasks", maxTasksPerSession+1, err)
	}
	if _, err := tt.add(b, "ev", "b-1", "t", 0); err != nil {
		t.Errorf("another session's first task: %v", err)
	}
	owned := tt.owned(a)
	if len(owned) != maxTasksPerSession || owned[0].id != ids[0] || owned[len(owned)-1].id != ids[len(ids)-1] {
		t.Errorf("owned: %d tasks, want %d in the order created", len(owned), maxTasksPerSession)
	}
	now = now.Add(time.Minute)
	if !tt.room(a) {
		t.Error("no room after a task expired")
	}
	if _, err := tt.add(a, "ev", "refill", "t", time.Hour); err != nil {
		t.Fatal(err)
	}

	// Full again: a task that ended makes room, the oldest of those first;
	// a status that is not terminal does not.
	tt.noteStatus(ids[5], json.RawMessage(`{"taskId":"up-5","status":"input_required"}`))
	if tt.room(a) {
		t.Error("room in a full session none of whose tasks ended")
	}
	tt.noteStatus(ids[9], json.RawMessage(`{"taskId":"up-9","status":"cancelled"}`))
	tt.end(ids[7])
	for _, gone := range []string{ids[7], ids[9]} {
		if !tt.room(a) {
			t.Fatal("no room in a full session with an ended task")
		}
		if _, err := tt.add(a, "ev", "after-"+gone, "t", time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, ok := tt.lookup(a, gone); ok {
			t.Errorf("task %s, the oldest that ended, was kept", gone)
		}
	}
	if _, ok := tt.lookup(a, ids[5]); !ok {
		t.Error("a task that did not end was dropped")
	}
	if _, err := tt.add(a, "ev", "one-more-again", "t", 0); err != errTooManyTasks {
		t.Errorf("once the ended tasks are gone: err = %v, want errTooManyTasks", err)
	}
}

// validTaskID accepts the ids the proxy makes and nothing else.
func TestValidTaskID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{newTaskID(), true},
		{"pxt-AAAAAAAAAAAAAAAAAAAAAA", true},
		{"pxt-AAAAAAAAAAAAAAAAAAAAA", false},   // short
		{"pxt-AAAAAAAAAAAAAAAAAAAAAAA", false}, // long
		{"pxt-AAAAAAAAAAAAAAAAAAAAA=", false},  // padded
		{"pxt-AAAAAAAAAAAAAAAAAAAA+A", false},  // not URL-safe
		{"xyz-AAAAAAAAAAAAAAAAAAAAAA", false},
		{"786512e2-9e0d-44bd-8f29-789f320fe840", false},
		{"", false},
	} {
		if got := validTaskID(tc.id); got != tc.want {
			t.Errorf("validTaskID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

// FuzzTaskParams reads a client's tasks/* params as the handlers do: the
// taskId is read or refused, never panics, and an id the table did not
// issue is never found.
func FuzzTaskParams(f *testing.F) {
	tt := newTaskTable(nil)
	s := taskSession("dev", "s1")
	issued, _ := tt.add(s, "ev", "up-1", "t", 0)
	for _, seed := range []string{
		`{"taskId":"` + issued + `"}`, `{"taskId":"pxt-AAAAAAAAAAAAAAAAAAAAAA"}`, `{"taskId":1}`, `{}`, `[]`, ``,
		`{"taskId":"\u0070xt-AAAAAAAAAAAAAAAAAAAAAA"}`, `{"taskId":null,"taskId":"x"}`, `{"taskId":"pxt-\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		id, werr := taskID(json.RawMessage(params))
		if werr != nil {
			if werr.Code != codeInvalidParams {
				t.Fatalf("code %d for %q", werr.Code, params)
			}
			return
		}
		rt, ok := tt.lookup(s, id)
		if ok != (id == issued) || (ok && rt.upID != "up-1") {
			t.Fatalf("lookup(%q) = %+v, %v", id, rt, ok)
		}
		if validTaskID(id) && !strings.HasPrefix(id, taskIDPrefix) {
			t.Fatalf("validTaskID accepted %q", id)
		}
	})
}
