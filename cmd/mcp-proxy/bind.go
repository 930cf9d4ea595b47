package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// listeners are the sockets serve binds before it starts any server, so
// that a port already taken ends the start before a server is spawned
// (and before its npx download), with one message that says what to do.
type listeners struct {
	mcp net.Listener // the Streamable HTTP endpoint; nil over stdio
	// metrics is the metrics and status page listener: nil when
	// metrics.listen is unset or could not be bound (metricsErr says why:
	// that is a warning, the proxy serves without it).
	metrics    net.Listener
	metricsErr error
}

// bindListeners binds the MCP endpoint (when cfg serves HTTP) and the
// metrics listener (when metrics.listen is set). An MCP endpoint that
// cannot be bound is an error; a metrics listener that cannot be bound is
// only recorded, for serve to warn about.
func bindListeners(cfg *config.Config) (*listeners, error) {
	l := &listeners{}
	if cfg.Listen.Transport == config.TransportHTTP {
		ln, err := net.Listen("tcp", cfg.Listen.Addr)
		if err != nil {
			return nil, bindErr("serve MCP", cfg.Listen.Addr, "--listen HOST:PORT or listen.addr in the config", err)
		}
		l.mcp = ln
	}
	if cfg.Metrics.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			l.metricsErr = bindErr("serve metrics", cfg.Metrics.Listen, "--metrics-listen HOST:PORT or metrics.listen in the config", err)
		} else {
			l.metrics = ln
		}
	}
	return l, nil
}

// close closes the listeners serve has not handed to a server.
func (l *listeners) close() {
	for _, ln := range []net.Listener{l.mcp, l.metrics} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// bindErr says which address could not be bound, why (once: net's own
// text repeats the address) and, when the port is taken, what to do.
func bindErr(what, addr, where string, err error) error {
	var sysErr *os.SyscallError
	if errors.As(err, &sysErr) {
		err = sysErr.Err // "bind: address already in use" without the address again
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("cannot %s on %s: %w; is another mcp-proxy (or another program) already using it? Stop it, or choose another address with %s",
			what, addr, err, where)
	}
	return fmt.Errorf("cannot %s on %s: %w; choose another address with %s", what, addr, err, where)
}
