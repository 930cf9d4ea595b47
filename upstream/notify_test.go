package upstream

import (
	"strconv"
	"strings"
	"testing"
)

func testNote(i int) note {
	return note{method: "m" + strconv.Itoa(i)}
}

func TestNoteQueueIsABoundedFIFO(t *testing.T) {
	q := &noteQueue{}
	if _, ok := q.pop(); ok {
		t.Fatal("pop on an empty queue returned a notification")
	}
	next, want := 0, 0
	// Interleave pushes and pops so that the waiting entries wrap around
	// the front of the storage several times.
	for round := 0; round < 6; round++ {
		pushes := 600
		if round == 0 {
			pushes = 900 // 300 stay waiting throughout
		}
		for range pushes {
			if ok, _, _ := q.push(testNote(next)); !ok {
				t.Fatalf("push %d refused with %d waiting", next, next-want)
			}
			next++
		}
		for range 600 {
			n, ok := q.pop()
			if !ok || n.method != "m"+strconv.Itoa(want) {
				t.Fatalf("pop = %q, %v; want m%d", n.method, ok, want)
			}
			want++
		}
	}
	for next-want < notificationQueue {
		if ok, _, _ := q.push(testNote(next)); !ok {
			t.Fatalf("push refused with %d waiting, below the limit", next-want)
		}
		next++
	}
	if ok, _, _ := q.push(testNote(next)); ok {
		t.Fatalf("push accepted with %d waiting", notificationQueue)
	}
	for ; want < next; want++ {
		if n, ok := q.pop(); !ok || n.method != "m"+strconv.Itoa(want) {
			t.Fatalf("pop = %q, %v; want m%d", n.method, ok, want)
		}
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop after draining returned a notification")
	}
	if q.items != nil {
		t.Errorf("drained queue keeps storage for %d entries, want it let go", cap(q.items))
	}
}

// TestNoteQueueStartsOneDeliverer: the push onto a queue with no delivery
// running asks for one, later pushes do not while it runs, and its pop of
// an empty queue ends it, so the next push asks again.
func TestNoteQueueStartsOneDeliverer(t *testing.T) {
	q := &noteQueue{}
	if _, _, start := q.push(testNote(1)); !start {
		t.Fatal("the first push did not ask for a delivery goroutine")
	}
	if _, _, start := q.push(testNote(2)); start {
		t.Fatal("a push while one delivers asked for another")
	}
	if n, ok := q.pop(); !ok || n.method != "m1" {
		t.Fatalf("pop = %q, %v", n.method, ok)
	}
	if _, _, start := q.push(testNote(3)); start {
		t.Fatal("a push before the delivery found the queue empty asked for another")
	}
	q.pop()
	q.pop()
	if _, ok := q.pop(); ok {
		t.Fatal("pop of an empty queue returned a notification")
	}
	// A short queue keeps its small storage for the next burst.
	if q.items == nil || cap(q.items) > keepNotes {
		t.Errorf("storage after a small burst: cap %d", cap(q.items))
	}
	if _, _, start := q.push(testNote(4)); !start {
		t.Fatal("the push after the delivery ended did not ask for a new one")
	}
	// A refused push asks for nothing: a full queue has its delivery.
	for i := 5; len(q.items)-q.head < notificationQueue; i++ {
		q.push(testNote(i))
	}
	if ok, _, start := q.push(testNote(0)); ok || start {
		t.Fatalf("push onto a full queue = %v, start %v", ok, start)
	}
}

func progressNote(token string, progress int) note {
	return note{method: progressMethod, params: []byte(`{"progressToken":` + token + `,"progress":` + strconv.Itoa(progress) + `}`)}
}

// A full queue takes a progress notification in place of the oldest one
// waiting with the same token, so a call's last progress is never the one
// lost; other notifications, and progress for a token with nothing
// waiting, are still refused.
func TestNoteQueueFullKeepsNewestProgress(t *testing.T) {
	q := &noteQueue{}
	q.push(progressNote(`"a"`, 1))
	q.push(progressNote(`"b"`, 1))
	q.push(progressNote(`"a"`, 2))
	for i := 3; len(q.items)-q.head < notificationQueue; i++ {
		q.push(testNote(i))
	}
	if ok, _, _ := q.push(testNote(0)); ok {
		t.Fatal("a full queue took a notification that is no progress")
	}
	if ok, _, _ := q.push(progressNote(`"c"`, 1)); ok {
		t.Fatal("a full queue took progress for a token with nothing waiting")
	}
	ok, displaced, _ := q.push(progressNote(`"a"`, 3))
	if !ok || !displaced {
		t.Fatalf("push of the newest progress of a = %v, %v; want it taken in place of an older one", ok, displaced)
	}
	var got []string
	for {
		n, ok := q.pop()
		if !ok {
			break
		}
		if n.method == progressMethod {
			got = append(got, string(n.params))
		}
	}
	want := []string{`{"progressToken":"b","progress":1}`, `{"progressToken":"a","progress":2}`, `{"progressToken":"a","progress":3}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("progress delivered = %v, want %v (the oldest of a dropped)", got, want)
	}
}
