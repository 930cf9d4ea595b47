package upstream

import (
	"context"
	"log/slog"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/rs/zerolog"
)

// slogBridge is the slog.Handler given to mcp-go's HTTP and SSE transports, so
// their internal log lines land in the server's zerolog logger, sanitized.
// mcp-go logs routine events ("listening to server forever") at Info and
// recoverable trouble at Error; both are one level quieter here, because the
// Conn reports what matters to the user itself.
type slogBridge struct {
	log   zerolog.Logger
	attrs []slog.Attr
	group string
}

func newSlogger(log zerolog.Logger) *slog.Logger {
	return slog.New(&slogBridge{log: log.With().Str("component", "mcp-go").Logger()})
}

func bridgeLevel(l slog.Level) zerolog.Level {
	switch {
	case l >= slog.LevelError:
		return zerolog.WarnLevel
	case l >= slog.LevelWarn:
		return zerolog.InfoLevel
	case l >= slog.LevelInfo:
		return zerolog.DebugLevel
	default:
		return zerolog.TraceLevel
	}
}

func (h *slogBridge) Enabled(_ context.Context, l slog.Level) bool {
	lvl := bridgeLevel(l)
	return lvl >= h.log.GetLevel() && lvl >= zerolog.GlobalLevel()
}

func (h *slogBridge) Handle(_ context.Context, r slog.Record) error {
	ev := h.log.WithLevel(bridgeLevel(r.Level))
	if ev == nil {
		return nil
	}
	for _, a := range h.attrs {
		ev.Str(a.Key, sanitize.Text(a.Value.Resolve().String()))
	}
	r.Attrs(func(a slog.Attr) bool {
		ev.Str(h.key(a.Key), sanitize.Text(a.Value.Resolve().String()))
		return true
	})
	ev.Msg(sanitize.Text(r.Message))
	return nil
}

// key prefixes an attribute key with the open groups.
func (h *slogBridge) key(k string) string {
	if h.group == "" {
		return k
	}
	return h.group + "." + k
}

func (h *slogBridge) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range attrs {
		n.attrs = append(n.attrs, slog.Attr{Key: h.key(a.Key), Value: a.Value})
	}
	return &n
}

func (h *slogBridge) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	if n.group != "" {
		n.group += "." + name
	} else {
		n.group = name
	}
	return &n
}
