//go:build unix

package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// lockPoll is the interval between tries for a held lock.
const lockPoll = 20 * time.Millisecond

// Lock takes an exclusive flock on the file at path, created 0600 when
// missing (a symbolic link there is refused). A wait above zero bounds how
// long it waits for another holder (then the error is ErrTimeout); zero or
// less waits as long as it takes. unlock releases the lock and closes the
// file.
func Lock(path string, wait time.Duration) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	how := syscall.LOCK_EX
	var deadline time.Time
	if wait > 0 {
		how |= syscall.LOCK_NB
		deadline = time.Now().Add(wait)
	}
	for {
		err := syscall.Flock(fd, how)
		if err == nil {
			return func() {
				_ = syscall.Flock(fd, syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, err
		case time.Now().After(deadline):
			f.Close()
			return nil, ErrTimeout
		}
		time.Sleep(lockPoll)
	}
}

// Inode returns the device and inode number of the file fi describes,
// which a rename over it changes.
func Inode(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
