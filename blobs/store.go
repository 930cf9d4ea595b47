package blobs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

const (
	// dirPerm and filePerm keep blobs private to the proxy's user: they hold whatever the
	// upstream servers returned.
	dirPerm  fs.FileMode = 0o700
	filePerm fs.FileMode = 0o600
	// copyBufSize is the chunk in which decoded bytes are hashed and written.
	copyBufSize = 64 << 10
	// tmpPrefix starts every temporary file name; final names are hex digests, so they never
	// collide with one.
	tmpPrefix = ".tmp-"
)

// store is the open directory of one agent: <dir>/<agent>. It is opened through os.Root, so no
// operation on it can leave that directory, and neither <dir> nor <dir>/<agent> may be a
// symbolic link.
type store struct {
	root *os.Root
	path string  // absolute path of <dir>/<agent>
	f    *folder // the folder's bounds and lock; nil: unbounded (tests of the store alone)
	buf  []byte
}

// openStore creates (0700) and opens <dir>/<agent>. dir is created with its missing parents;
// agent must already be valid (ValidateAgent).
func openStore(dir, agent string) (*store, error) {
	base, err := openDirNoFollow(dir, func() error { return os.MkdirAll(dir, dirPerm) },
		func() (fs.FileInfo, error) { return os.Lstat(dir) },
		func() (*os.Root, error) { return os.OpenRoot(dir) })
	if err != nil {
		return nil, fmt.Errorf("blobs dir %q: %w", dir, err)
	}
	defer base.Close()
	path := filepath.Join(dir, agent)
	root, err := openDirNoFollow(path, func() error { return base.Mkdir(agent, dirPerm) },
		func() (fs.FileInfo, error) { return base.Lstat(agent) },
		func() (*os.Root, error) { return base.OpenRoot(agent) })
	if err != nil {
		return nil, fmt.Errorf("agent dir %q: %w", path, err)
	}
	return &store{root: root, path: path, buf: make([]byte, copyBufSize)}, nil
}

// openDirNoFollow opens a directory as an os.Root, creating it when it does not exist, and
// refuses it when it is a symbolic link or not a directory. The directory opened is compared
// with the one checked, so a swap between the check and the open is refused too.
func openDirNoFollow(path string, mkdir func() error, lstat func() (fs.FileInfo, error), open func() (*os.Root, error)) (*os.Root, error) {
	fi, err := lstat()
	if errors.Is(err, fs.ErrNotExist) {
		if err := mkdir(); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create: %w", err)
		}
		fi, err = lstat()
	}
	if err != nil {
		return nil, err
	}
	if err := checkDir(fi); err != nil {
		return nil, err
	}
	root, err := open()
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	opened, err := root.Stat(".")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("stat: %w", err), root.Close())
	}
	if !os.SameFile(fi, opened) {
		return nil, errors.Join(fmt.Errorf("%s changed while being opened: %w", path, ErrSymlink), root.Close())
	}
	return root, nil
}

// checkDir accepts a real directory and nothing else.
func checkDir(fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("is a symbolic link: %w", ErrSymlink)
	case !fi.IsDir():
		return fmt.Errorf("is not a directory (%s): %w", fi.Mode().Type(), ErrNotRegular)
	}
	return nil
}

// Close releases the directory.
func (s *store) Close() error { return s.root.Close() }

// putResult is what put did with one blob.
type putResult struct {
	path   string // absolute path of the file
	size   int64  // decoded bytes
	reused bool   // an identical file was already there and was kept; the new copy was removed
}

// put streams src (decoded blob bytes) into <agent dir>/<sha256 hex>[.<ext>]: the bytes go
// through SHA-256 and into a temporary file in the same directory at once; then, if a regular
// file of that name and size exists, it is kept and the temporary file removed ("reused"),
// otherwise the temporary file is synced and renamed over the name. A symbolic link or
// anything but a regular file at the name is refused. More than limit bytes fail with
// ErrTooLarge; a decoding failure comes back as src reported it.
//
// With a folder (s.f), a reused file gets a fresh modification time (it counts as new for
// eviction), and a new file is committed under the folder's lock after makeRoom: when it
// cannot fit the budget, put fails with ErrStoreFull and writes nothing.
func (s *store) put(src io.Reader, ext string, limit int64) (_ putResult, err error) {
	tmp := tmpPrefix + rand.Text()
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return putResult{}, fmt.Errorf("create temporary file: %w", err)
	}
	committed, closed := false, false
	defer func() {
		if !closed {
			err = errors.Join(err, f.Close())
		}
		if !committed {
			if rmErr := s.root.Remove(tmp); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("remove temporary file: %w", rmErr))
			}
		}
	}()

	h := sha256.New()
	lw := &limitWriter{w: io.MultiWriter(h, f), max: limit}
	n, err := io.CopyBuffer(lw, src, s.buf)
	if err != nil {
		return putResult{}, err
	}
	name := hex.EncodeToString(h.Sum(nil))
	if ext != "" {
		name += "." + ext
	}
	res := putResult{path: filepath.Join(s.path, name), size: n}
	if reused, err := s.existing(name, n); err != nil || reused {
		res.reused = reused
		return res, err
	}
	// Missing, or a regular file of another size (a torn copy): write ours in its place.
	if err := f.Sync(); err != nil {
		return putResult{}, fmt.Errorf("sync temporary file: %w", err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return putResult{}, fmt.Errorf("close temporary file: %w", err)
	}
	if s.f == nil {
		return res, s.commit(tmp, name, res.path, &committed)
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	// Another session may have written the same content meanwhile.
	if reused, err := s.existing(name, n); err != nil || reused {
		res.reused = reused
		return res, err
	}
	total, err := s.makeRoom(name, n)
	if err != nil {
		s.f.report(total)
		return putResult{}, err
	}
	if err := s.commit(tmp, name, res.path, &committed); err != nil {
		return putResult{}, err
	}
	s.f.report(total)
	return res, nil
}

// existing reports whether a regular file of n bytes already holds name (then it is kept, and
// with a folder its modification time is renewed); a symbolic link or another kind of file
// there is refused.
func (s *store) existing(name string, n int64) (bool, error) {
	path := filepath.Join(s.path, name)
	fi, err := s.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("stat %s: %w", path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return false, fmt.Errorf("%s is a symbolic link: %w", path, ErrSymlink)
	case !fi.Mode().IsRegular():
		return false, fmt.Errorf("%s is not a regular file (%s): %w", path, fi.Mode().Type(), ErrNotRegular)
	case fi.Size() != n:
		return false, nil
	}
	if s.f != nil {
		// Root.Chtimes may act on a link swapped in meanwhile, never outside the root; an
		// error only leaves the file older than it is.
		now := time.Now()
		_ = s.root.Chtimes(name, now, now)
	}
	return true, nil
}

// commit renames the temporary file over name; rename replaces a directory entry and never
// follows a link placed there meanwhile.
func (s *store) commit(tmp, name, path string, committed *bool) error {
	if err := s.root.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename to %s: %w", path, err)
	}
	*committed = true
	return nil
}

// limitWriter fails with ErrTooLarge once more than max bytes have been written.
type limitWriter struct {
	w   io.Writer
	n   int64
	max int64
}

// Write implements io.Writer.
func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n+int64(len(p)) > l.max {
		return 0, fmt.Errorf("more than %d bytes decoded: %w", l.max, ErrTooLarge)
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}
