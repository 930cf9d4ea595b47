package upstream

import (
	"strconv"
	"testing"
)

func testNote(i int) note {
	return note{method: "m" + strconv.Itoa(i)}
}

func TestNoteQueueIsABoundedFIFO(t *testing.T) {
	q := newNoteQueue()
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
			if !q.push(testNote(next)) {
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
		if !q.push(testNote(next)) {
			t.Fatalf("push refused with %d waiting, below the limit", next-want)
		}
		next++
	}
	if q.push(testNote(next)) {
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

func TestNoteQueuePushWakes(t *testing.T) {
	q := newNoteQueue()
	q.push(testNote(1))
	q.push(testNote(2)) // the wake signal does not block when already set
	select {
	case <-q.wake:
	default:
		t.Fatal("push did not signal wake")
	}
	if n, ok := q.pop(); !ok || n.method != "m1" {
		t.Fatalf("pop = %q, %v", n.method, ok)
	}
	// A short queue keeps its small storage for the next burst.
	q.pop()
	if q.items == nil || cap(q.items) > keepNotes {
		t.Errorf("storage after a small burst: cap %d", cap(q.items))
	}
}
