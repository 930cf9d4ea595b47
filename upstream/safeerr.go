package upstream

import "github.com/mcp-proxy/mcp-proxy/sanitize"

// safeError carries an error whose text has been sanitized (docs/protocol.md#errors) while
// errors.Is and errors.As still see the original chain.
type safeError struct {
	msg string
	err error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.err }

// safe returns err with a sanitized text; nil stays nil and an error that is
// already safe is returned as is.
func safe(err error) error {
	switch err.(type) {
	case nil:
		return nil
	case *safeError, *RPCError, *InvalidResultError:
		return err
	}
	return &safeError{msg: sanitize.Error(err.Error()), err: err}
}
