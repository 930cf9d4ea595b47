//go:build !unix

// Package fdmode reads and uses the blocking mode of file descriptors; off
// unix it reports every descriptor as blocking.
package fdmode

import (
	"io"
	"os"
)

// IsNonBlocking reports false.
func IsNonBlocking(uintptr) bool { return false }

// WriteNonBlocking is never called (IsNonBlocking is false): it writes
// nothing.
func WriteNonBlocking(uintptr, []byte) int { return 0 }

// Reader returns f.
func Reader(f *os.File) io.Reader { return f }
