package tracing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The proxy records its spans itself and hands them to the OTLP clients
// of the OpenTelemetry SDK as encoded bytes (export.go). The SDK's span
// type did the same job at about five times the cost on a call's path:
// every span was allocated with its own copy of its attributes, copied
// again into a snapshot as it ended, deduplicated through a new map, and
// each ended span woke the batch processor's goroutine through a channel
// (docs/performance.md#with-every-feature-on has the figures). What the
// SDK offered and the proxy uses is kept from it: the samplers, the
// resource and its detection, the propagator and the exporters' clients.
// What the recorder writes itself is what the SDK's span and batch
// processor did for the proxy's two kinds of span, with the same
// variables: OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_* and the span attribute
// limits.

// batchConfig is the batch processor's: OTel's OTEL_BSP_* variables, with
// their defaults.
type batchConfig struct {
	delay    time.Duration // OTEL_BSP_SCHEDULE_DELAY: the longest a span waits
	timeout  time.Duration // OTEL_BSP_EXPORT_TIMEOUT: one export's
	maxQueue int           // OTEL_BSP_MAX_QUEUE_SIZE: spans waiting, beyond which they are dropped
	maxBatch int           // OTEL_BSP_MAX_EXPORT_BATCH_SIZE: spans per export
	limits   attrLimits
}

// attrLimits are the span attribute limits of OTel's variables, applied
// as the spans are encoded.
type attrLimits struct {
	count    int // OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, else OTEL_ATTRIBUTE_COUNT_LIMIT; -1 none
	valueLen int // OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, else OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, in characters; -1 none
}

// The SDK's defaults.
const (
	defaultDelay      = 5 * time.Second
	defaultTimeout    = 30 * time.Second
	defaultMaxQueue   = 2048
	defaultMaxBatch   = 512
	defaultCountLimit = 128
)

// batchConfigFrom reads the variables as the SDK does: a value that is not
// a whole number keeps the default (and is returned as an error to log),
// and a batch larger than the queue is cut to it.
func batchConfigFrom(env func(string) (string, bool)) (batchConfig, error) {
	var errs []error
	num := func(def int, keys ...string) int {
		for _, k := range keys {
			v, ok := env(k)
			if v = strings.TrimSpace(v); !ok || v == "" {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q is not a whole number: the default %d is used", k, v, def))
				return def
			}
			return n
		}
		return def
	}
	c := batchConfig{
		delay:    time.Duration(num(int(defaultDelay/time.Millisecond), "OTEL_BSP_SCHEDULE_DELAY")) * time.Millisecond,
		timeout:  time.Duration(num(int(defaultTimeout/time.Millisecond), "OTEL_BSP_EXPORT_TIMEOUT")) * time.Millisecond,
		maxQueue: num(defaultMaxQueue, "OTEL_BSP_MAX_QUEUE_SIZE"),
		maxBatch: num(defaultMaxBatch, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
		limits: attrLimits{
			count:    num(defaultCountLimit, "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
			valueLen: num(-1, "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
		},
	}
	// Values the SDK's processor could not run with either: it would
	// export every span at once or never; these are its defaults again.
	if c.delay <= 0 {
		c.delay = defaultDelay
	}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	if c.maxQueue <= 0 {
		c.maxQueue = defaultMaxQueue
	}
	if c.maxBatch <= 0 {
		c.maxBatch = defaultMaxBatch
	}
	if c.maxBatch > c.maxQueue {
		c.maxBatch = min(defaultMaxBatch, c.maxQueue)
	}
	c.limits.count = max(c.limits.count, -1)
	c.limits.valueLen = max(c.limits.valueLen, -1)
	return c, errors.Join(errs...)
}

// samplerFrom is the sampler of OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG, the SDK's default (parentbased_always_on) when
// the first is unset. A sampler the SDK does not offer, or a ratio that is
// not one from 0 to 1, is an error: the proxy would not be sampling as
// asked.
func samplerFrom(env func(string) (string, bool)) (sdktrace.Sampler, error) {
	name, _ := env("OTEL_TRACES_SAMPLER")
	name = strings.ToLower(strings.TrimSpace(name))
	arg, _ := env("OTEL_TRACES_SAMPLER_ARG")
	arg = strings.TrimSpace(arg)
	ratio := func() (sdktrace.Sampler, error) {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1), nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(r >= 0 && r <= 1) { // NaN too: it would sample every trace
			return nil, fmt.Errorf("%w: OTEL_TRACES_SAMPLER_ARG=%s (a ratio from 0 to 1)", ErrUnsupported, arg)
		}
		return sdktrace.TraceIDRatioBased(r), nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		return ratio()
	case "parentbased_traceidratio":
		s, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(s), nil
	}
	return nil, fmt.Errorf("%w: OTEL_TRACES_SAMPLER=%s (always_on, always_off, traceidratio or their parentbased_ forms)", ErrUnsupported, name)
}

// newIDs returns the ids of a span whose parent is parent: its trace id,
// or a new one for a root, and a new span id. Both come from math/rand/v2's
// generator, as the SDK's do.
func newIDs(parent trace.SpanContext) (trace.TraceID, trace.SpanID) {
	tid := parent.TraceID()
	if !parent.IsValid() {
		for !tid.IsValid() {
			hi, lo := rand.Uint64(), rand.Uint64()
			for i := range 8 {
				tid[i] = byte(hi >> (56 - 8*i))
				tid[8+i] = byte(lo >> (56 - 8*i))
			}
		}
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		v := rand.Uint64()
		for i := range 8 {
			sid[i] = byte(v >> (56 - 8*i))
		}
	}
	return tid, sid
}

// spanExporter sends one batch of ended spans; the batcher calls it from
// one goroutine at a time.
type spanExporter interface {
	export(ctx context.Context, spans []*spanState) error
	shutdown(ctx context.Context) error
}

// batcher queues ended spans and exports them from one goroutine: a batch
// once maxBatch are waiting, else whatever waits every delay. A span ended
// while maxQueue wait is dropped, and counted: a slow collector never holds
// up a request. Ending a span takes the queue's lock and, once a batch is
// full, wakes the goroutine; nothing else happens on the request's path.
type batcher struct {
	cfg    batchConfig
	exp    spanExporter
	report func(error) // export errors and drops, from the goroutine

	mu      sync.Mutex
	queue   []*spanState
	dropped int // since the last report
	stopped bool
	shutCtx context.Context // shutdown's, once it has begun

	wake chan struct{} // a full batch waits; capacity 1
	stop chan struct{} // closed by shutdown
	done chan struct{} // closed when the goroutine has sent what was queued

	shutOnce sync.Once
	shutErr  error

	// droppedTotal is every span dropped until the last report, the
	// goroutine's own: each report carries it, so that the reports the
	// error log holds back (one a minute) lose no count.
	droppedTotal int
}

func newBatcher(cfg batchConfig, exp spanExporter, report func(error)) *batcher {
	b := &batcher{
		cfg:    cfg,
		exp:    exp,
		report: report,
		queue:  make([]*spanState, 0, cfg.maxBatch),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go b.run()
	return b
}

// enqueue hands an ended span to the exporter.
func (b *batcher) enqueue(st *spanState) {
	b.mu.Lock()
	if b.stopped || len(b.queue) >= b.cfg.maxQueue {
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, st)
	full := len(b.queue) == b.cfg.maxBatch
	b.mu.Unlock()
	if full {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// run exports until shutdown, then sends what is still queued. A full
// batch goes when it fills; the rest waits for the timer, at most delay.
func (b *batcher) run() {
	defer close(b.done)
	timer := time.NewTimer(b.cfg.delay)
	defer timer.Stop()
	var batch []*spanState
	for {
		all := false
		select {
		case <-b.wake:
		case <-timer.C:
			all = true
		case <-b.stop: // everything is sent below
		}
		for {
			if batch = b.take(batch, !all); len(batch) == 0 {
				break
			}
			b.send(batch)
		}
		select {
		case <-b.stop:
			// Within shutdown's ctx (send).
			for {
				if batch = b.take(batch, false); len(batch) == 0 {
					return
				}
				b.send(batch)
			}
		default:
		}
		if all {
			timer.Reset(b.cfg.delay)
		}
	}
}

// take moves up to maxBatch queued spans into batch; with full, only a
// full batch.
func (b *batcher) take(batch []*spanState, full bool) []*spanState {
	clear(batch)
	batch = batch[:0]
	b.mu.Lock()
	n := min(len(b.queue), b.cfg.maxBatch)
	if full && n < b.cfg.maxBatch {
		n = 0
	}
	batch = append(batch, b.queue[:n]...)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	dropped := b.dropped
	b.dropped = 0
	b.mu.Unlock()
	if dropped > 0 {
		b.droppedTotal += dropped
		b.report(fmt.Errorf("%d spans dropped (%d since the start): the export queue (OTEL_BSP_MAX_QUEUE_SIZE %d) was full",
			dropped, b.droppedTotal, b.cfg.maxQueue))
	}
	return batch
}

// send exports one batch within the export timeout, or the shutdown's
// budget once shutdown has begun.
func (b *batcher) send(batch []*spanState) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
	defer cancel()
	stop := context.AfterFunc(b.shutdownCtx(), cancel)
	defer stop()
	if err := b.exp.export(ctx, batch); err != nil {
		b.report(err)
	}
}

// shutdownCtx is done when shutdown's ctx is; Background before shutdown.
func (b *batcher) shutdownCtx() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shutCtx == nil {
		return context.Background()
	}
	return b.shutCtx
}

// shutdown stops taking spans, exports what is queued and stops the
// exporter, all within ctx. Later calls return the first one's result.
func (b *batcher) shutdown(ctx context.Context) error {
	b.shutOnce.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.shutCtx = ctx
		b.mu.Unlock()
		close(b.stop)
		select {
		case <-b.done:
		case <-ctx.Done():
			b.shutErr = fmt.Errorf("spans still queued: %w", ctx.Err())
		}
		if err := b.exp.shutdown(ctx); err != nil {
			b.shutErr = errors.Join(b.shutErr, err)
		}
	})
	return b.shutErr
}
