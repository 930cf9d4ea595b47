package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// Bounds of the queue and the writer; see the package doc.
const (
	// QueueEntries is how many entries wait for the writer at most: about
	// a second of a very busy proxy, a few MB of memory at worst.
	QueueEntries = 4096
	// QueueBytes bounds the copied arguments (full mode) that wait.
	QueueBytes = 16 << 20
	// WriteBatchBytes bounds the lines written in one go.
	WriteBatchBytes = 1 << 20
	// SyncInterval is the longest time written lines stay unsynced.
	SyncInterval = time.Second
	// GatherDelay is how long the writer, woken by an entry that came
	// alone, waits for more before it writes: a busy proxy then makes one
	// write a GatherDelay, not one per call (each write is a system call
	// that also wakes the runtime's monitor thread, whose polling and
	// context switches cost a proxy on one CPU slot more than the write,
	// see docs/performance.md), at the price of lines reaching the file up
	// to GatherDelay later.
	GatherDelay = 100 * time.Millisecond
	// GatherEntries ends the wait early: once this many entries (or
	// WriteBatchBytes of copied arguments) are queued they are written at
	// once, so that a burst never comes near QueueEntries or QueueBytes
	// while the writer waits.
	GatherEntries = 256
	// DropLogInterval is the least time between two drop warnings.
	DropLogInterval = 10 * time.Second
	// CloseBudget bounds Close when its ctx has no earlier deadline.
	CloseBudget = 3 * time.Second
)

// entryCost is what one queued entry counts against QueueBytes besides its
// copied arguments: its strings live on anyway, this covers the record.
const entryCost = 512

// ErrClosed is returned by Close when entries could not be written in time.
var ErrClosed = errors.New("audit: log closed before every entry was written")

// Options are New's dependencies. The zero value is usable.
type Options struct {
	// Logger receives drop and write-error warnings (rate-limited).
	Logger zerolog.Logger
	// Secrets are values never to write (config.Config.Secrets()).
	Secrets []string
	// Registerer, when not nil, gets mcp_proxy_audit_dropped_total.
	Registerer prometheus.Registerer

	// gather, when not nil, replaces the writer's wait for followers
	// (waitGathered; tests).
	gather func()
}

// Log is the audit log. A nil *Log records nothing. Record is safe for
// concurrent use; Close may be called once Record calls have stopped or
// concurrently with them.
type Log struct {
	mode string // config.AuditArguments*
	log  zerolog.Logger
	sink sink
	sc   *sanitize.Scrubber

	mu     sync.RWMutex // Record holds it shared; Close exclusively to close ch
	closed bool
	ch     chan *record

	queuedBytes atomic.Int64
	dropped     atomic.Uint64 // all drops, for tests and the close report
	unlogged    atomic.Uint64 // drops since the last warning
	lastWarn    atomic.Int64  // unix nanos of the last warning
	droppedC    prometheus.Counter

	done chan struct{} // closed when the writer has ended

	// gather is the writer's pause before a batch that began with a lone
	// entry (waitGathered; tests replace it).
	gather func()
	// gathered ends a gather: GatherEntries or WriteBatchBytes are
	// queued, or Close.
	gathered chan struct{}
	// gatherDelay is GatherDelay (tests set it before the first entry).
	gatherDelay time.Duration

	w writeBuffers // the writer goroutine's alone
	// narrow is whether the writer scrubs only a line's values (see
	// write): no configured secret can occur in the rest.
	narrow bool
}

// sink is where lines go: the rotating file, or a test's writer.
type sink interface {
	// WriteLine appends one line (newline included), rotating first if
	// it would not fit.
	WriteLine(line []byte) error
	// Flush hands buffered lines to the kernel.
	Flush() error
	// Sync makes written lines durable.
	Sync() error
	Close() error
}

// New opens the audit log of cfg (defaults applied), or returns nil and no
// error when cfg.Path is empty. It fails when the file cannot be created
// or opened, so a bad path stops the proxy at start.
func New(cfg config.Audit, opts Options) (*Log, error) {
	if cfg.Path == "" {
		return nil, nil
	}
	s, err := openFileSink(cfg.Path, cfg.MaxBytes, cfg.MaxFiles)
	if err != nil {
		return nil, err
	}
	l, err := newLog(s, cfg.Arguments, opts)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return l, nil
}

// newLog starts a Log writing to s.
func newLog(s sink, mode string, opts Options) (*Log, error) {
	if mode == "" {
		mode = config.AuditArgumentsDigest
	}
	sc := sanitize.NewScrubber(opts.Secrets)
	l := &Log{
		mode:        mode,
		log:         opts.Logger,
		sink:        s,
		sc:          sc,
		narrow:      sc.Inert(lineFixed, timeBytes, numberBytes, hexBytes),
		ch:          make(chan *record, QueueEntries),
		done:        make(chan struct{}),
		gather:      opts.gather,
		gathered:    make(chan struct{}, 1),
		gatherDelay: GatherDelay,
		droppedC: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_proxy_audit_dropped_total",
			Help: "Audit log entries not written: the queue was full (slow or stuck disk) or the write failed.",
		}),
	}
	if l.gather == nil {
		l.gather = l.waitGathered
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(l.droppedC); err != nil {
			return nil, fmt.Errorf("audit: metrics: %w", err)
		}
	}
	go l.run()
	return l, nil
}

// Record queues e to be written and returns at once. It never blocks: when
// the queue is full the entry is dropped and counted. After Close it does
// nothing.
func (l *Log) Record(e Entry) {
	if l == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	r := records.Get().(*record)
	*r = record{Entry: e, cost: entryCost}
	r.Arguments = nil // read below, never kept
	switch n := len(e.RequestID); {
	case n > maxInlineID:
		r.RequestID = bytes.Clone(e.RequestID)
	case n > 0:
		r.RequestID = append(r.id[:0:maxInlineID], e.RequestID...)
	}
	if l.mode != config.AuditArgumentsNone && len(e.Arguments) > 0 {
		full := l.mode == config.AuditArgumentsFull
		r.digest, r.args, r.hasDigest = digestOf(e.Arguments, full && len(e.Arguments) <= MaxFullArguments)
		switch {
		case !r.hasDigest:
			r.argsOmitted = omittedInvalid
		case !full:
		case len(e.Arguments) > MaxFullArguments:
			r.argsOmitted = omittedTooLarge
		default:
			r.cost += int64(len(r.args))
		}
	}

	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		release(r)
		return
	}
	cost := r.cost // r is the writer's once sent, and may be reused at once
	queued := l.queuedBytes.Add(cost)
	if queued > QueueBytes {
		l.queuedBytes.Add(-cost)
		release(r)
		l.drop(1, "the queue is full (the disk is slow or stuck)")
		return
	}
	select {
	case l.ch <- r:
		// At or past the threshold, not only at it: two Records can both
		// send before either reads the length, and neither would see
		// GatherEntries itself.
		if len(l.ch) >= GatherEntries || queued >= WriteBatchBytes && queued-cost < WriteBatchBytes {
			l.endGather()
		}
	default:
		l.queuedBytes.Add(-cost)
		release(r)
		l.drop(1, "the queue is full (the disk is slow or stuck)")
	}
}

// records holds the records the writer is done with, for the next calls:
// a call's record is some 400 bytes, allocated per call otherwise.
var records = sync.Pool{New: func() any { return new(record) }}

// release hands r back to records, emptied so that it keeps nothing of
// its call. Nothing may use r afterwards.
func release(r *record) {
	*r = record{}
	records.Put(r)
}

// waitGathered is the writer's gather: GatherDelay, or until endGather.
func (l *Log) waitGathered() {
	t := time.NewTimer(l.gatherDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.gathered:
	}
}

// endGather ends the writer's gather, or the next one if it is not
// gathering (the queue filled while it wrote: the next batch is a large
// one anyway).
func (l *Log) endGather() {
	select {
	case l.gathered <- struct{}{}:
	default:
	}
}

// Dropped is the number of entries dropped so far.
func (l *Log) Dropped() uint64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

// drop counts n lost entries and warns at most once per DropLogInterval.
func (l *Log) drop(n int, why string) {
	l.dropped.Add(uint64(n))
	l.droppedC.Add(float64(n))
	pending := l.unlogged.Add(uint64(n))
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if last != 0 && now-last < int64(DropLogInterval) {
		return
	}
	if !l.lastWarn.CompareAndSwap(last, now) {
		return // another caller is warning
	}
	count := l.unlogged.Swap(0)
	if count == 0 {
		count = pending
	}
	l.log.Warn().Uint64("dropped", count).Uint64("dropped_total", l.dropped.Load()).
		Msg("audit log entries dropped: " + why)
}

// run is the writer: it takes queued entries in order, writes them in
// batches, syncs at most once per SyncInterval, and on Close writes what
// is left and closes the sink.
func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(SyncInterval)
	defer tick.Stop()
	dirty := false
	var batch []*record
	for {
		select {
		case r, ok := <-l.ch:
			if !ok {
				l.finish(dirty)
				return
			}
			if len(l.ch) == 0 {
				// A lone entry: let the ones that follow join its write.
				l.gather()
			}
			batch = append(batch[:0], r)
			size := r.cost
			for more := true; more && size < WriteBatchBytes; {
				select {
				case r, ok := <-l.ch:
					if !ok {
						more = false
						break
					}
					batch = append(batch, r)
					size += r.cost
				default:
					more = false
				}
			}
			l.write(batch)
			for _, r := range batch {
				release(r)
			}
			clear(batch)
			dirty = true
		case <-tick.C:
			if dirty {
				l.sync()
				dirty = false
			}
		}
	}
}

// finish ends the writer: the channel is closed and drained.
func (l *Log) finish(dirty bool) {
	if dirty {
		l.sync()
	}
	if err := l.sink.Close(); err != nil {
		l.log.Warn().Err(err).Msg("audit log: close")
	}
}

// write encodes, scrubs and writes a batch, in order. The batch's lines
// are encoded into one buffer and copied once into one string, which the
// scrubber reads line by line; the buffers are the writer's own and kept
// for the next batch.
//
// Only the values of a line that came from a client, an upstream or the
// config are scrubbed (sanitize.Scrubber.LogValue), each alone, and the
// rest is copied: the member names, numbers, the time, digests and the
// values this package chooses cannot hold a secret shape, and the
// configured secrets were found unable to occur in them (narrow). The
// bytes are those of scrubbing the whole line (FuzzNarrowScrub).
func (l *Log) write(batch []*record) {
	w := &l.w
	lines, vals, ends := w.lines[:0], w.vals[:0], w.ends[:0]
	if vals == nil {
		vals = make([]int, 0, 32) // appendLine records value bounds in a slice that is not nil
	}
	lost := 0
	for _, r := range batch {
		l.queuedBytes.Add(-r.cost)
		var err error
		if lines, vals, err = r.appendLine(lines, vals); err != nil {
			lost++
			continue
		}
		ends = append(ends, lineEnd{line: len(lines), vals: len(vals)})
	}
	// The scrubber reads the lines as a string. It is the buffer itself,
	// not a copy (a line's worth of garbage a call): nothing keeps the
	// string or its pieces past scrubLine, whose results are appended to
	// w.out at once, and the buffer is not written again before the next
	// batch.
	var text string
	if len(lines) > 0 {
		text = unsafe.String(&lines[0], len(lines))
	}
	var werr error
	start, v := 0, 0
	for _, end := range ends {
		if werr == nil {
			w.out = l.scrubLine(w.out[:0], text, start, end.line, vals[v:end.vals])
			werr = l.sink.WriteLine(w.out)
		}
		if werr != nil {
			lost++
		}
		start, v = end.line, end.vals
	}
	if werr == nil {
		werr = l.sink.Flush()
	}
	w.keep(lines, vals, ends)
	if werr != nil {
		l.drop(lost, "writing failed: "+sanitize.Error(werr.Error()))
	} else if lost > 0 {
		l.drop(lost, "an entry could not be encoded")
	}
}

// scrubLine appends the scrubbed line text[start:end] to out; vals are the
// bounds in text of the line's values to scrub (appendLine's).
func (l *Log) scrubLine(out []byte, text string, start, end int, vals []int) []byte {
	if l.narrow {
		last := start
		for i := 0; i < len(vals); i += 2 {
			out = append(append(out, text[last:vals[i]]...), l.sc.LogValue(text[vals[i]:vals[i+1]])...)
			last = vals[i+1]
		}
		return append(out, text[last:end]...)
	}
	return append(out, l.sc.LogLine(text[start:end])...) // one line: scrubbed whole
}

// lineEnd is where a line of a batch ends in the batch's lines and in its
// value bounds.
type lineEnd struct{ line, vals int }

// maxKeptBuffer bounds each buffer the writer keeps between batches: the
// lines of a busy proxy's batch (a few hundred to a couple of thousand
// calls' lines of some 450 bytes; a batch stops growing at
// WriteBatchBytes, which counts at least entryCost an entry) and their
// value bounds fit, so that a steady load reuses them; larger ones (a
// batch of full arguments) are let go after their batch.
const maxKeptBuffer = WriteBatchBytes

// writeBuffers are the writer goroutine's buffers, reused from batch to
// batch: the batch's encoded lines, the bounds of their values to scrub,
// where each line ends, and one scrubbed line.
type writeBuffers struct {
	lines []byte
	vals  []int
	ends  []lineEnd
	out   []byte
}

// keep holds the buffers for the next batch, unless they grew past
// maxKeptBuffer.
func (w *writeBuffers) keep(lines []byte, vals []int, ends []lineEnd) {
	w.lines, w.vals, w.ends = lines, vals, ends
	if cap(lines) > maxKeptBuffer || cap(vals)*8 > maxKeptBuffer/2 || cap(ends)*16 > maxKeptBuffer/8 {
		w.lines, w.vals, w.ends = nil, nil, nil
	}
	if cap(w.out) > maxKeptBuffer {
		w.out = nil
	}
}

func (l *Log) sync() {
	if err := l.sink.Sync(); err != nil {
		l.log.Warn().Str("error", sanitize.Error(err.Error())).Msg("audit log: fsync")
	}
}

// Close stops recording, writes the queued entries, fsyncs and closes the
// file. It waits for that until ctx ends or CloseBudget passes, whichever
// is first; if the writer is still busy then (a stuck disk), it returns
// ErrClosed and the writer ends on its own when its write returns. Later
// calls wait the same way. A nil Log returns nil.
func (l *Log) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.ch)
		l.endGather()
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, CloseBudget)
	defer cancel()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w (%d still queued)", ErrClosed, len(l.ch))
	}
}
