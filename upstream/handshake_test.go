package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// hangingWire answers nothing: every call waits for its context. It
// records the notifications sent.
type hangingWire struct {
	mu    sync.Mutex
	notes []string
}

func (w *hangingWire) call(ctx context.Context, _, _ string, _ json.RawMessage, _ http.Header) (json.RawMessage, *mcp.JSONRPCErrorDetails, error) {
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

func (w *hangingWire) notify(_ context.Context, method string, params json.RawMessage) error {
	w.mu.Lock()
	w.notes = append(w.notes, method+" "+string(params))
	w.mu.Unlock()
	return nil
}

func (w *hangingWire) sessionID() string     { return "" }
func (w *hangingWire) sendsHeaders() bool    { return false }
func (w *hangingWire) setProtocol(string)    {}
func (w *hangingWire) ctxWrites() bool       { return true }
func (w *hangingWire) endsWithSession() bool { return false }
func (w *hangingWire) Close() error          { return nil }

// TestHandshakeNotCancelled: a request the server does not answer in time
// is followed by notifications/cancelled, except initialize and the
// server/discover probe (nothing may precede initialize).
func TestHandshakeNotCancelled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method string
		cancel bool
	}{{"initialize", false}, {"server/discover", false}, {"ping", true}, {"tools/list", true}} {
		w := &hangingWire{}
		s := newSession(New(httpServer("hang", "http://127.0.0.1:1/"), Options{}), context.Background())
		s.tr = w
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := s.exchange(ctx, tc.method, nil)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want a deadline error", tc.method, err)
		}
		s.close() // waits for the cancellation's goroutine, if any
		w.mu.Lock()
		cancelled := len(w.notes) == 1 && strings.HasPrefix(w.notes[0], "notifications/cancelled {")
		if cancelled != tc.cancel || !tc.cancel && len(w.notes) > 0 {
			t.Errorf("%s: notifications %q, want a cancellation: %v", tc.method, w.notes, tc.cancel)
		}
		w.mu.Unlock()
	}
}
