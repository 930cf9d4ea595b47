// Package atomicfile writes files that readers see whole or not at all,
// takes the exclusive lock files that processes sharing a folder serialize
// their read-modify-write cycles on, and reads files with a bound on their
// size. The token store, the pin files, the config and private keys use
// it.
package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// ErrTimeout is returned by Lock when another holder kept the lock for
// longer than the wait allowed.
var ErrTimeout = errors.New("lock held by another process")

// WriteFile replaces path with data: a new file next to it (named
// .<base>.*.tmp) gets perm, data and a sync, and is renamed over path; the
// folder is synced too, so the rename survives a crash. A reader sees the
// old file or the new one, never part of one. On error the temporary file is
// removed and path is as it was.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// ReadAtMost reads the file at path, at most limit+1 bytes of it: a caller
// tells a file larger than limit by the length of data, and a wrong path (a
// log, a disk image) costs neither memory nor time. opened is false when
// the file could not be opened, for callers that word that failure apart
// from one reading it; err is the *fs.PathError of the step that failed.
func ReadAtMost(path string, limit int64) (data []byte, opened bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, limit+1))
	return data, true, err
}
