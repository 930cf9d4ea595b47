//go:build !unix

package upstream

// isNonBlocking reports false: stdioTransport.tryWrite is for unix pipes.
func isNonBlocking(uintptr) bool { return false }
