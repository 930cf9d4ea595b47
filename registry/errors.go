package registry

import "errors"

// Sentinels matched with errors.Is by the CLI to choose its words and exit
// code.
var (
	// ErrNotFound: the registry has no server of that name.
	ErrNotFound = errors.New("not found")
	// ErrNoVersion: the server (or package) exists, the version does not.
	ErrNoVersion = errors.New("no such version")
	// ErrUnreachable: no answer came from the registry (DNS, TCP, TLS,
	// timeout) or it answered with a status other than 200 or 404.
	ErrUnreachable = errors.New("registry unreachable")
	// ErrBadResponse: the registry answered 200 with a document this
	// package does not accept (not JSON, too large, missing fields).
	ErrBadResponse = errors.New("registry sent an invalid response")
	// ErrNotRunnable: the server offers no package or remote that
	// mcp-proxy can run or reach.
	ErrNotRunnable = errors.New("no package of a runnable type")
)
