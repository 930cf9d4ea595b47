package main

import "fmt"

// Exit codes (docs/cli.md#verbs).
const (
	exitRuntime = 1
	exitUsage   = 2
)

// exitError carries the process exit code of an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

func configErr(err error) error { return &exitError{code: exitUsage, err: err} }
