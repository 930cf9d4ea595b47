//go:build redis

package store

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

// msgWait bounds how long a test waits for a message: far above the
// milliseconds it takes, so that only one that never comes fails.
const msgWait = 15 * time.Second

func receive(t *testing.T, got <-chan Message) Message {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(msgWait):
		t.Fatal("no message arrived")
	}
	return Message{}
}

// TestInboxSurvivesARestart: a message sent to a replica while its
// connection to Redis is down (Redis killed and started again) is read
// once it reconnects, because the inbox is a stream read on from the last
// entry seen, not pub/sub; what was read is trimmed off.
func TestInboxSurvivesARestart(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := openRedis(t, srv)
	b, _ := openRedis(t, srv)
	got := make(chan Message, 4)
	recv := a.Messages(func(m Message) { got <- m })
	sender := b.Messages(func(Message) {})
	ctx := context.Background()
	if err := sender.Send(ctx, recv.Self(), Message{Kind: "k", Target: "t", Corr: "c", Body: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, got); string(m.Body) != "before" || m.From != sender.Self() || m.Kind != "k" || m.Target != "t" || m.Corr != "c" {
		t.Fatalf("got %+v", m)
	}
	srv.Kill()
	srv.Start()
	if err := sender.Send(ctx, recv.Self(), Message{Kind: "k", Body: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, got); string(m.Body) != "after" {
		t.Errorf("got %q after the restart, want %q", m.Body, "after")
	}
	if err := sender.Send(ctx, recv.Self(), Message{Kind: "k", Body: []byte("third")}); err != nil {
		t.Fatal(err)
	}
	receive(t, got)
	// The trim follows the read: wait for the reader's next round.
	deadline := time.Now().Add(msgWait)
	for {
		n, err := a.redis.Client().XLen(ctx, recv.inbox(recv.Self())).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the inbox keeps %d entries after they were read; want at most the last", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicaLivenessAndHolders: a running replica is alive and a closed
// one is not; a holder record names the replica that holds, and a release
// by a replica that no longer holds leaves the newer holder alone.
func TestReplicaLivenessAndHolders(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := openRedis(t, srv)
	b, _ := openRedis(t, srv)
	ma, mb := a.Messages(func(Message) {}), b.Messages(func(Message) {})
	ctx := context.Background()
	if ok, err := mb.Alive(ctx, ma.Self()); err != nil || !ok {
		t.Errorf("Alive(running) = %v, %v", ok, err)
	}
	if err := ma.Hold(ctx, "stream", "d1"); err != nil {
		t.Fatal(err)
	}
	if err := mb.Hold(ctx, "stream", "d1"); err != nil {
		t.Fatal(err)
	}
	if err := ma.Release(ctx, "stream", "d1"); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := ma.Holder(ctx, "stream", "d1"); err != nil || !ok || h != mb.Self() {
		t.Errorf("Holder = %q, %v, %v; want the newer holder %q", h, ok, err, mb.Self())
	}
	if err := mb.Release(ctx, "stream", "d1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ma.Holder(ctx, "stream", "d1"); err != nil || ok {
		t.Errorf("Holder after release: ok=%v, %v", ok, err)
	}
	ma.Close()
	if ok, err := mb.Alive(ctx, ma.Self()); err != nil || ok {
		t.Errorf("Alive(closed) = %v, %v", ok, err)
	}
}
