package tracing

import (
	"context"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// handoffBatch is how many ended spans handoff holds before it passes them
// on together: one wake of the batch processor's goroutine per 64 spans
// instead of one per span, and a bound on what waits here.
const handoffBatch = 64

// handoffDelay is the longest an ended span waits in handoff before it is
// passed on when fewer than handoffBatch follow it; the batch processor
// then holds it up to its own schedule delay (OTEL_BSP_SCHEDULE_DELAY,
// 5 s by default), so a quiet proxy's spans still leave within seconds.
const handoffDelay = 200 * time.Millisecond

// handoff is a span processor in front of the SDK's batch span processor.
// The SDK's processor receives every ended span over a channel, and each
// send wakes its goroutine: on a proxy serving one call at a time that is
// a thread woken and put back to sleep twice per call, some 12 µs of CPU
// (docs/performance.md#with-every-feature-on). handoff collects ended spans
// under a mutex and passes them on handoffBatch at a time from the ending
// goroutine, or after handoffDelay from a timer, so the processor's
// goroutine wakes once per batch. Queueing, dropping when full, the
// OTEL_BSP_* settings and the export stay the SDK's. Its methods are safe
// for concurrent use.
type handoff struct {
	next sdktrace.SpanProcessor
	// delay is handoffDelay; tests shorten it.
	delay time.Duration

	mu     sync.Mutex
	spans  []sdktrace.ReadOnlySpan
	timer  *time.Timer // passes on what waits; armed while spans is not empty
	closed bool        // after Shutdown, spans go straight to next
}

var _ sdktrace.SpanProcessor = (*handoff)(nil)

func newHandoff(next sdktrace.SpanProcessor) *handoff {
	h := &handoff{next: next, delay: handoffDelay, spans: make([]sdktrace.ReadOnlySpan, 0, handoffBatch)}
	h.timer = time.AfterFunc(time.Hour, h.flush)
	h.timer.Stop()
	return h
}

// OnStart passes the started span on.
func (h *handoff) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { h.next.OnStart(ctx, s) }

// OnEnd keeps s until handoffBatch spans wait or handoffDelay has passed.
// An unsampled span is dropped here, as the batch processor would.
func (h *handoff) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.next.OnEnd(s)
		return
	}
	h.spans = append(h.spans, s)
	switch len(h.spans) {
	case 1:
		h.timer.Reset(h.delay)
	case handoffBatch:
		h.timer.Stop()
		h.passLocked()
	}
}

// flush passes on every span that waits.
func (h *handoff) flush() {
	h.mu.Lock()
	h.passLocked()
	h.mu.Unlock()
}

// passLocked hands the waiting spans to next, whose OnEnd does not block
// (the batch processor drops when its queue is full). h.mu must be held,
// so that spans reach next in the order they ended.
func (h *handoff) passLocked() {
	for i, s := range h.spans {
		h.next.OnEnd(s)
		h.spans[i] = nil
	}
	h.spans = h.spans[:0]
}

// ForceFlush passes on the waiting spans, then flushes next.
func (h *handoff) ForceFlush(ctx context.Context) error {
	h.flush()
	return h.next.ForceFlush(ctx)
}

// Shutdown passes on the waiting spans and shuts next down; spans that
// end later go straight to next, which drops them.
func (h *handoff) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	h.timer.Stop()
	h.passLocked()
	h.mu.Unlock()
	return h.next.Shutdown(ctx)
}
