package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// The retry policy of HTTP upstreams (docs/operations.md#reconnection).
const (
	// retryMax: at most 2 retries (3 attempts) per request.
	retryMax = 2
	// retryWaitMin is the first wait after a dial error; it doubles.
	retryWaitMin = 250 * time.Millisecond
	// retryWaitMax caps every wait. A Retry-After longer than this is not
	// waited for at all: the 429/503 goes back to the caller at once rather
	// than holding a host's request that long.
	retryWaitMax = 5 * time.Second
	// methodToolsCall is never re-sent once it may have reached the server.
	methodToolsCall = "tools/call"
)

// methodKey is the context key of the JSON-RPC method a request carries.
type methodKey struct{}

// withMethod marks ctx with the JSON-RPC method of the request it will
// carry, for checkRetry. Without a mark a request is treated like tools/call:
// only a failure to connect is retried.
func withMethod(ctx context.Context, method string) context.Context {
	return context.WithValue(ctx, methodKey{}, method)
}

func methodFrom(ctx context.Context) string {
	m, _ := ctx.Value(methodKey{}).(string)
	return m
}

// newHTTPClient returns the HTTP client of an http or sse upstream:
//
//	http.Client (redirects: CheckRedirect, default refuses https→http)
//	  └ retryablehttp (checkRetry, retryBackoff, at most 2 retries)
//	      └ limitResponses(limit)
//	          └ base (nil: a clone of http.DefaultTransport)
//
// Each request is retried as a whole, so a retried request is a fresh
// round trip with its body re-read. Redirects are followed by the returned
// client only (the inner one hands 3xx back), so setting CheckRedirect on
// it, to noDowngradeRedirect for instance, governs every hop. retryablehttp
// logs through logger at debug level, its texts sanitized; a logger below
// debug gets no retry logging at all.
func newHTTPClient(base *http.Transport, limit int64, logger zerolog.Logger) *http.Client {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	rc := &retryablehttp.Client{
		HTTPClient: &http.Client{
			Transport: limitResponses(base, limit),
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		RetryWaitMin: retryWaitMin,
		RetryWaitMax: retryWaitMax,
		RetryMax:     retryMax,
		CheckRetry:   checkRetry,
		Backoff:      retryBackoff,
		ErrorHandler: lastResult,
	}
	if logger.GetLevel() <= zerolog.DebugLevel {
		rc.Logger = retryLogger{log: logger}
	}
	return &http.Client{
		Transport:     &retryablehttp.RoundTripper{Client: rc},
		CheckRedirect: noDowngrade,
	}
}

// checkRetry is the retry policy. It retries:
//   - a request that failed before it was sent: a dial error (connection
//     refused, unreachable, DNS), for every method, tools/call included;
//   - a 429 or 503 response with a usable Retry-After of at most
//     retryWaitMax, for a request marked (withMethod) with a method other
//     than tools/call.
//
// Nothing else is retried: no other status, no timeout, no reset or EOF
// after the request was written. When ctx has ended it stops with ctx's
// error.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, ctxErr
	}
	if err != nil {
		return isDialError(err), nil
	}
	if resp == nil {
		return false, nil
	}
	if m := methodFrom(ctx); m == "" || m == methodToolsCall {
		return false, nil
	}
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return false, nil
	}
	wait, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return ok && wait <= retryWaitMax, nil
}

// isDialError reports an error that happened while connecting, before any
// byte of the request was written.
func isDialError(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// retryBackoff returns the wait before retry number attempt+1: the response's
// Retry-After (delta seconds or an HTTP date) when it has one, else min
// doubled per attempt; never more than max, never negative.
func retryBackoff(min, max time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if wait, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return clampWait(wait, max)
		}
	}
	wait := min
	for i := 0; i < attempt && wait < max; i++ {
		wait *= 2
	}
	return clampWait(wait, max)
}

func clampWait(wait, max time.Duration) time.Duration {
	if wait < 0 {
		return 0
	}
	if wait > max {
		return max
	}
	return wait
}

// retryAfter parses a Retry-After value: non-negative delta seconds or an
// HTTP date (a date in the past means now).
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(24*time.Hour/time.Second) {
			return 24 * time.Hour, true // anything this long is "too long"
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// lastResult is the retryablehttp ErrorHandler, called when retries stop on
// a failure: it returns the last error as it is, or, when the last attempt
// got a response (a 429/503 still), that response, so the caller sees the
// real status. It never returns both (net/http would log that).
func lastResult(resp *http.Response, err error, _ int) (*http.Response, error) {
	if err != nil {
		if resp != nil {
			drainClose(resp.Body)
		}
		return nil, err
	}
	return resp, nil
}

// drainClose reads a little of body, so the connection can be reused, and
// closes it.
func drainClose(body io.ReadCloser) {
	if body == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}

// retryLogger adapts zerolog to retryablehttp.LeveledLogger. Everything is
// logged at debug: the outcome of a request is logged once, by its caller.
type retryLogger struct {
	log zerolog.Logger
}

func (l retryLogger) Error(msg string, kv ...any) { l.emit(msg, kv) }
func (l retryLogger) Info(msg string, kv ...any)  { l.emit(msg, kv) }
func (l retryLogger) Debug(msg string, kv ...any) { l.emit(msg, kv) }
func (l retryLogger) Warn(msg string, kv ...any)  { l.emit(msg, kv) }

func (l retryLogger) emit(msg string, kv []any) {
	ev := l.log.Debug()
	if !ev.Enabled() {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		ev = ev.Str(fmt.Sprint(kv[i]), sanitize.Text(fmt.Sprint(kv[i+1])))
	}
	ev.Msg("retryablehttp: " + sanitize.Text(msg))
}
