//go:build !unix

package upstream

// isNonBlocking reports false: stdioTransport.tryWrite is for unix pipes.
func isNonBlocking(uintptr) bool { return false }

// writeNonBlocking is never called (isNonBlocking is false): it writes
// nothing.
func writeNonBlocking(uintptr, []byte) int { return 0 }
