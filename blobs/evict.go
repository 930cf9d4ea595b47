package blobs

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"
)

// Bounds of one agent folder (docs/resources.md#blobs), the defaults of Options.MaxStoreBytes and
// Options.MaxAge.
const (
	// DefaultMaxStoreBytes keeps an upstream that returns 10 MiB a call from filling the disk
	// while leaving room for a working day of documents and screenshots.
	DefaultMaxStoreBytes = 1 << 30
	// DefaultMaxAge keeps files long enough for a week of sessions to refer back to them.
	DefaultMaxAge = 168 * time.Hour
)

// folder is the shared state of one agent folder: the lock that makes its eviction and the
// commit of a new file one step, so that two sessions writing at once never overshoot the
// budget or evict each other's file while it is being counted.
type folder struct {
	mu     sync.Mutex
	agent  string
	max    int64
	maxAge time.Duration
	onSize func(agent string, bytes int64) // nil: not reported
}

// folders hands out one folder per agent name.
type folders struct {
	mu     sync.Mutex
	byName map[string]*folder
	max    int64
	maxAge time.Duration
	onSize func(agent string, bytes int64)
}

func (fs *folders) get(agent string) *folder {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.byName[agent]
	if f == nil {
		if fs.byName == nil {
			fs.byName = map[string]*folder{}
		}
		f = &folder{agent: agent, max: fs.max, maxAge: fs.maxAge, onSize: fs.onSize}
		fs.byName[agent] = f
	}
	return f
}

func (f *folder) report(total int64) {
	if f.onSize != nil {
		f.onSize(f.agent, total)
	}
}

// isBlobName reports whether name is one this package writes: 64 lowercase hex digits, then
// optionally '.' and 1 to 16 lowercase letters and digits. Eviction touches nothing else.
func isBlobName(name string) bool {
	if len(name) < 64 {
		return false
	}
	for i := 0; i < 64; i++ {
		if c := name[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	ext := name[64:]
	if ext == "" {
		return true
	}
	if ext[0] != '.' || len(ext) < 2 || len(ext) > 1+maxExtLen {
		return false
	}
	for i := 1; i < len(ext); i++ {
		if c := ext[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// blobFile is one evictable file of the folder.
type blobFile struct {
	name string
	info fs.FileInfo
}

// makeRoom applies the folder's bounds before a file of n bytes is committed under the name
// keep (which a rename will replace, so its current copy is not counted): files older than
// the maximum age go, then the oldest until the folder and the new file fit the budget. It
// returns the folder's total with the new file, or (with the total without it) ErrStoreFull
// when it does not fit: then younger files are evicted only if that makes it fit. Only regular files with blob names are counted or removed; a file
// that is not removed (an error, or it changed since it was listed) still counts. The caller
// holds f.mu.
func (s *store) makeRoom(keep string, n int64) (int64, error) {
	files, err := s.blobFiles(keep)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, b := range files {
		total += b.info.Size()
	}
	cutoff := time.Now().Add(-s.f.maxAge)
	slices.SortFunc(files, func(a, b blobFile) int {
		return cmp.Or(a.info.ModTime().Compare(b.info.ModTime()), cmp.Compare(a.name, b.name))
	})
	fits := n <= s.f.max // else evicting younger files would not help
	for _, b := range files {
		if !b.info.ModTime().Before(cutoff) && (total+n <= s.f.max || !fits) {
			break // sorted by age: every file left is younger, and evicting it is no use
		}
		if s.evict(b) {
			total -= b.info.Size()
		}
	}
	if total+n > s.f.max {
		return total, fmt.Errorf("%d bytes do not fit the %d-byte budget of %s: %w", n, s.f.max, s.path, ErrStoreFull)
	}
	return total + n, nil
}

// blobFiles lists the regular files with blob names, except skip. Symbolic links and anything
// else are left out: they are not this package's.
func (s *store) blobFiles(skip string) ([]blobFile, error) {
	entries, err := fs.ReadDir(s.root.FS(), ".")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s.path, err)
	}
	files := make([]blobFile, 0, len(entries))
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == skip || !isBlobName(e.Name()) {
			continue
		}
		info, err := e.Info() // lstat: never follows a link
		if err != nil || !info.Mode().IsRegular() {
			continue // removed meanwhile, or not a regular file after all
		}
		files = append(files, blobFile{name: e.Name(), info: info})
	}
	return files, nil
}

// evict removes one listed file if it is still the file that was listed; it reports whether
// the file is gone.
func (s *store) evict(b blobFile) bool {
	now, err := s.root.Lstat(b.name)
	if errors.Is(err, fs.ErrNotExist) {
		return true // another process evicted it
	}
	if err != nil || !now.Mode().IsRegular() || !os.SameFile(now, b.info) {
		return false
	}
	err = s.root.Remove(b.name)
	return err == nil || errors.Is(err, fs.ErrNotExist)
}

// Sweep applies the bounds to every agent folder under Dir: files older than MaxAge are
// removed, then the oldest until the folder fits MaxStoreBytes, and each folder's size is
// reported to OnStoreSize. The proxy runs it at startup; writes apply the same bounds as they
// go. It creates nothing (a missing Dir is not an error), skips entries that are not real
// directories with valid agent names, never follows a symbolic link, and removes nothing but
// regular files with the names this package writes. It returns the problems met, joined; the
// folders it could sweep are swept. In ModePassthrough it does nothing.
func (m *Materializer) Sweep() error {
	if m.mode == ModePassthrough {
		return nil
	}
	fi, err := os.Lstat(m.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("blobs: sweep: %w", err)
	}
	if err := checkDir(fi); err != nil {
		return fmt.Errorf("blobs: sweep %s: %w", m.dir, err)
	}
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return fmt.Errorf("blobs: sweep: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || ValidateAgent(e.Name()) != nil {
			continue // symbolic links report no directory type here
		}
		if err := m.sweepAgent(e.Name()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Materializer) sweepAgent(agent string) (err error) {
	st, err := openStore(m.dir, agent)
	if err != nil {
		return fmt.Errorf("blobs: sweep: %w", err)
	}
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("blobs: close %s: %w", st.path, cerr))
		}
	}()
	st.f = m.folders.get(agent)
	st.f.mu.Lock()
	defer st.f.mu.Unlock()
	total, err := st.makeRoom("", 0)
	if err != nil {
		return fmt.Errorf("blobs: sweep: %w", err)
	}
	st.f.report(total)
	return nil
}
