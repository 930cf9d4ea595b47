package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Permissions of the audit log: it names who did what, so only the
// proxy's user reads it.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// reopenInterval is the least time between two attempts to reopen the
// file after a failed write, so a full disk is not hammered.
const reopenInterval = time.Second

// bufferBytes is the write buffer: a batch of this size is one write(2).
const bufferBytes = 64 << 10

// fileSink appends lines to path, rotating by size (see the package doc).
// It is used by the writer goroutine only.
//
// It is ours rather than gopkg.in/natefinch/lumberjack.v2's Logger, which
// does not keep what docs/operations.md#audit-log documents: lumberjack
// names a rotated file by its time (audit-2026-11-30T08-15-02.123.log),
// not audit.log.1 … audit.log.<max_files-1>; its size limit is in whole
// megabytes where max_bytes is bytes (from 1024); it refuses a line
// longer than the limit where we write it to a file of its own; it
// deletes old files from a goroutine of its own after the rotation; and it
// neither fsyncs at a rotation nor buffers writes into one write(2) per
// batch.
type fileSink struct {
	path     string
	maxBytes int64
	maxFiles int

	f    *os.File // nil after a failed write, until reopened
	w    *bufio.Writer
	size int64 // bytes in the live file, buffered ones included

	failedAt time.Time // of the last failed write or reopen
}

// openFileSink opens (creating if needed) the live file.
func openFileSink(path string, maxBytes int64, maxFiles int) (*fileSink, error) {
	if maxFiles < 1 {
		maxFiles = 1
	}
	s := &fileSink{path: path, maxBytes: maxBytes, maxFiles: maxFiles}
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := s.open(false); err != nil {
		return nil, err
	}
	return s, nil
}

// open opens the live file for appending (truncate: start it empty).
func (s *fileSink) open(truncate bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if truncate {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(s.path, flags, fileMode)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", s.path)
	}
	if err == nil && st.Mode().Perm() != fileMode {
		err = f.Chmod(fileMode) // an existing file others could read
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: %w", err)
	}
	s.f, s.size = f, st.Size()
	if s.w == nil {
		s.w = bufio.NewWriterSize(f, bufferBytes)
	} else {
		s.w.Reset(f)
	}
	return nil
}

// WriteLine appends line, rotating first when the live file has lines
// and line would take it past maxBytes.
func (s *fileSink) WriteLine(line []byte) error {
	if s.f == nil {
		if time.Since(s.failedAt) < reopenInterval {
			return errors.New("audit: the file is not open after a failed write")
		}
		if err := s.open(false); err != nil {
			s.failedAt = time.Now()
			return err
		}
	}
	if s.size > 0 && s.size+int64(len(line)) > s.maxBytes {
		if err := s.rotate(); err != nil {
			return s.fail(err)
		}
	}
	n, err := s.w.Write(line)
	s.size += int64(n)
	if err != nil {
		return s.fail(err)
	}
	return nil
}

// Flush writes the buffered lines.
func (s *fileSink) Flush() error {
	if s.f == nil {
		return nil
	}
	if err := s.w.Flush(); err != nil {
		return s.fail(err)
	}
	return nil
}

// Sync flushes and fsyncs the live file.
func (s *fileSink) Sync() error {
	if s.f == nil {
		return nil
	}
	if err := s.Flush(); err != nil {
		return err
	}
	return s.f.Sync()
}

// fail closes the file after a failed write; the next WriteLine reopens it
// (after reopenInterval). Lines still buffered are lost with it.
func (s *fileSink) fail(err error) error {
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
	s.failedAt = time.Now()
	return err
}

// rotate closes the live file and shifts the names: <path>.<n> becomes
// <path>.<n+1> (the oldest, <path>.<maxFiles-1>, is removed), <path>
// becomes <path>.1, and a new live file is opened.
func (s *fileSink) rotate() error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	if err := s.f.Close(); err != nil {
		return err
	}
	s.f = nil
	if s.maxFiles == 1 {
		return s.open(true)
	}
	oldest := s.name(s.maxFiles - 1)
	if err := os.Remove(oldest); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for n := s.maxFiles - 2; n >= 0; n-- {
		if err := os.Rename(s.name(n), s.name(n+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return s.open(false)
}

// name is the n-th file: the live one for 0, else <path>.<n>.
func (s *fileSink) name(n int) string {
	if n == 0 {
		return s.path
	}
	return s.path + "." + strconv.Itoa(n)
}

// Close flushes, fsyncs and closes the live file.
func (s *fileSink) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.Sync()
	if s.f != nil { // a failed Sync has closed it already
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
		s.f = nil
	}
	return err
}
