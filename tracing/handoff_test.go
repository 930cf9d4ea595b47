package tracing

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// countingProcessor counts the spans handed to it and whether it was shut
// down.
type countingProcessor struct {
	mu       sync.Mutex
	names    []string
	flushes  int
	shutdown bool
}

func (p *countingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p *countingProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	p.mu.Lock()
	p.names = append(p.names, s.Name())
	p.mu.Unlock()
}
func (p *countingProcessor) ForceFlush(context.Context) error {
	p.mu.Lock()
	p.flushes++
	p.mu.Unlock()
	return nil
}
func (p *countingProcessor) Shutdown(context.Context) error {
	p.mu.Lock()
	p.shutdown = true
	p.mu.Unlock()
	return nil
}
func (p *countingProcessor) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.names...)
}

// TestTracerHandsSpansOnInBatches: the batch processor behind a Tracer
// receives ended spans handoffBatch at a time, in the order they ended,
// not one by one (each would wake its goroutine); ForceFlush and Shutdown
// pass on the rest.
func TestTracerHandsSpansOnInBatches(t *testing.T) {
	next := &countingProcessor{}
	h := newHandoff(next)
	h.delay = 1 << 62 // only size, ForceFlush and Shutdown pass spans on here
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h), sdktrace.WithResource(resource.Empty()))
	tr := &Tracer{tp: tp, tracer: tp.Tracer(instrumentationName)}
	ctx := context.Background()
	end := func(n int, method string) {
		for range n {
			_, sp := tr.StartServer(ctx, ServerRequest{Method: method})
			sp.End(OutcomeOK, 0)
		}
	}

	end(handoffBatch-1, "ping")
	if got := next.got(); len(got) != 0 {
		t.Fatalf("after %d spans the batch processor has %d, want 0", handoffBatch-1, len(got))
	}
	end(1, "tools/list")
	got := next.got()
	if len(got) != handoffBatch || got[0] != "ping" || got[handoffBatch-1] != "tools/list" {
		t.Fatalf("after %d spans the batch processor has %d (%v), want them all in order", handoffBatch, len(got), got)
	}

	end(2, "tools/call")
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := next.got(); len(got) != handoffBatch+2 || next.flushes != 1 {
		t.Fatalf("after ForceFlush: %d spans, %d flushes; want %d and 1", len(got), next.flushes, handoffBatch+2)
	}

	end(3, "prompts/get")
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := next.got(); len(got) != handoffBatch+5 || !next.shutdown {
		t.Fatalf("after Shutdown: %d spans, shut down %v; want %d and true", len(got), next.shutdown, handoffBatch+5)
	}
}

// TestTracerHandsLoneSpanOnAfterDelay: a span no other follows still
// reaches the batch processor, once handoff's delay has passed.
func TestTracerHandsLoneSpanOnAfterDelay(t *testing.T) {
	next := &countingProcessor{}
	h := newHandoff(next)
	h.delay = 1
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h), sdktrace.WithResource(resource.Empty()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := &Tracer{tp: tp, tracer: tp.Tracer(instrumentationName)}
	_, sp := tr.StartServer(context.Background(), ServerRequest{Method: "ping"})
	sp.End(OutcomeOK, 0)
	for len(next.got()) == 0 { // the timer passes it on; the test's deadline bounds the wait
		time.Sleep(time.Millisecond)
	}
	if next.flushes != 0 {
		t.Errorf("the span was passed on by ForceFlush, not by the timer")
	}
}
