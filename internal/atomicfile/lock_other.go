//go:build !unix

package atomicfile

import (
	"errors"
	"io/fs"
	"time"
)

// Lock would take an exclusive lock on the file at path; this platform
// lacks flock, which processes sharing a folder rely on.
func Lock(path string, wait time.Duration) (unlock func(), err error) {
	return nil, errors.New("file locking is not supported on this platform")
}

// Inode is 0, 0: this platform's file information has no inode.
func Inode(fs.FileInfo) (dev, ino uint64) { return 0, 0 }
