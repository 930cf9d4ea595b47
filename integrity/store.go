package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/atomicfile"
	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// pinFileVersion is the format version this code writes and reads.
const pinFileVersion = 1

// maxPinFileBytes bounds one pin file read: a pinned and a pending
// definition per tool, each at most one upstream message (16 MB by
// default), leaves a lot of room below this; anything larger is not a file
// mcp-proxy wrote.
const maxPinFileBytes = 256 << 20

// lockWait bounds how long an update waits for another process's lock on
// a pin file (an approval or another proxy's write takes milliseconds).
const lockWait = 10 * time.Second

// Store is the pin files of one state directory: <state_dir>/pins/<server>.json,
// one per server, each holding every pinned tool's fingerprint and canonical
// definition and every pending (changed or new) tool's current definition.
// A proxy and the CLI share it: reads need no lock (files are replaced
// atomically), each read-modify-write holds an exclusive flock on
// <server>.lock. Directories are created 0700 and files written 0600, by a
// rename of a complete temporary file. A Store is safe for concurrent use.
//
// A Store made by NewSharedStore keeps the same documents in the
// shared-state store instead (see sharedPins), for every replica at once.
type Store struct {
	dir string
	// shared is set for a Store in the shared-state store; dir is "".
	shared *sharedPins
	// lockWait is lockWait; tests shorten it.
	lockWait time.Duration

	// parsed keeps the summary of the last file read or written per
	// server, by its identity on disk, so that a file is parsed and checked
	// once (the start-up check and the first review read the same file).
	mu     sync.Mutex
	parsed map[string]parsedFile
}

// parsedFile is the summary of a pin file as read or written, never
// modified.
type parsedFile struct {
	id fileID
	pf *pinFile
}

// cached returns the file of server read or written as id, if any.
func (s *Store) cached(server string, id fileID) (*pinFile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.parsed[server]
	if !ok || c.id != id {
		return nil, false
	}
	return c.pf, true
}

// remember records the file of server as read or written as id.
func (s *Store) remember(server string, id fileID, pf *pinFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parsed == nil {
		s.parsed = map[string]parsedFile{}
	}
	s.parsed[server] = parsedFile{id: id, pf: pf}
}

// NewStore returns the store under stateDir ("" is allowed: every
// operation then fails with ErrNoStateDir). It creates nothing until the
// first write.
func NewStore(stateDir string) *Store {
	if stateDir == "" {
		return &Store{lockWait: lockWait}
	}
	return &Store{dir: filepath.Join(stateDir, "pins"), lockWait: lockWait}
}

// Dir is the directory of the pin files ("" without a state_dir, or in
// the shared store).
func (s *Store) Dir() string { return s.dir }

// Shared reports whether the pins are kept in the shared-state store.
func (s *Store) Shared() bool { return s.shared != nil }

// Path is the pin file of server; in the shared store, the name of its key.
func (s *Store) Path(server string) string {
	if s.shared != nil {
		return s.shared.key(server)
	}
	return filepath.Join(s.dir, server+".json")
}

// enabled reports whether the Store has somewhere to keep pins.
func (s *Store) enabled() bool { return s.dir != "" || s.shared != nil }

// stat is the identity of server's pin file as it is now (zero: none).
func (s *Store) stat(server string) (fileID, error) {
	if s.shared != nil {
		return s.shared.stat(server)
	}
	return statID(s.Path(server))
}

// pinFile is the JSON document of one server's pins.
type pinFile struct {
	Version int                  `json:"version"`
	Server  string               `json:"server"`
	Tools   map[string]*pinEntry `json:"tools"`
	// summary marks a file whose records lack their definitions (see
	// summarize); it is never written.
	summary bool
}

// pinEntry is one tool: its pin, its pending definition, or both.
type pinEntry struct {
	Pinned  *pinRecord `json:"pinned,omitempty"`
	Pending *pinRecord `json:"pending,omitempty"`
}

// pinRecord is one definition and when it was recorded. Records are never
// modified once made; an update replaces them.
type pinRecord struct {
	Fingerprint string    `json:"fingerprint"`
	Since       time.Time `json:"since"`
	// Reason is set on pending records only: changed or new.
	Reason     Reason          `json:"reason,omitempty"`
	Definition json.RawMessage `json:"definition"`
}

// clone copies f's map and entries so that an update can change them while
// readers keep the old file. Records are shared.
func (f *pinFile) clone() *pinFile {
	c := &pinFile{Version: f.Version, Server: f.Server, Tools: make(map[string]*pinEntry, len(f.Tools)), summary: f.summary}
	for name, e := range f.Tools {
		cp := *e
		c.Tools[name] = &cp
	}
	return c
}

// summarize is f without the definitions of its records: what the store and
// a guard keep between reviews, since a review decides by fingerprints
// alone. The definitions are most of a file (about 0.8 KB a tool); a write
// and a diff read the file again (loadFull). nil stays nil.
func (f *pinFile) summarize() *pinFile {
	if f == nil {
		return nil
	}
	c := &pinFile{Version: f.Version, Server: f.Server, Tools: make(map[string]*pinEntry, len(f.Tools)), summary: true}
	for name, e := range f.Tools {
		c.Tools[name] = &pinEntry{Pinned: e.Pinned.withoutDefinition(), Pending: e.Pending.withoutDefinition()}
	}
	return c
}

func (r *pinRecord) withoutDefinition() *pinRecord {
	if r == nil {
		return nil
	}
	cp := *r
	cp.Definition = nil
	return &cp
}

// fileID identifies one version of a file on disk: a rename gives a new
// inode, a rewrite a new size or time.
type fileID struct {
	exists   bool
	dev, ino uint64
	size     int64
	mtime    int64
	// rev is the revision of a document in the shared store.
	rev int64
}

func statID(path string) (fileID, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileID{}, nil
	}
	if err != nil {
		return fileID{}, err
	}
	return idOf(fi), nil
}

func idOf(fi os.FileInfo) fileID {
	dev, ino := atomicfile.Inode(fi)
	return fileID{exists: true, dev: dev, ino: ino, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

// checkServer refuses a server name that could leave the pins directory.
func (s *Store) checkServer(server string) error {
	if !s.enabled() {
		return ErrNoStateDir
	}
	if !namespace.ValidName(server) {
		return fmt.Errorf("integrity: invalid server name %q", server)
	}
	return nil
}

// load reads the summary of server's pin file (see summarize), parsing
// the file only when it changed on disk since it was last read or
// written. A missing file is (nil, zero id, nil).
func (s *Store) load(server string) (*pinFile, fileID, error) {
	return s.read(server, false)
}

// loadFull reads server's pin file with its definitions. It reads and
// checks the file on disk every time: the store keeps no definitions, and
// its callers (an update, a listing of pending changes) are rare.
func (s *Store) loadFull(server string) (*pinFile, fileID, error) {
	return s.read(server, true)
}

// read reads server's pin file: with full, the file with its definitions,
// from disk; else its summary, from the cache when the file is unchanged
// on disk (and remembered for the next read when it is not).
func (s *Store) read(server string, full bool) (*pinFile, fileID, error) {
	if err := s.checkServer(server); err != nil {
		return nil, fileID{}, err
	}
	if s.shared != nil {
		return s.readShared(server, full)
	}
	path := s.Path(server)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fileID{}, nil
	}
	if err != nil {
		return nil, fileID{}, corrupt(path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileID{}, corrupt(path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fileID{}, corrupt(path, errors.New("not a regular file"))
	}
	if fi.Size() > maxPinFileBytes {
		return nil, fileID{}, corrupt(path, fmt.Errorf("larger than %d bytes", maxPinFileBytes))
	}
	id := idOf(fi)
	if sum, ok := s.cached(server, id); ok && !full {
		return sum, id, nil
	}
	buf := readBufs.Get().(*bytes.Buffer)
	defer putReadBuf(buf)
	data, err := readAtMost(buf, f, fi.Size(), maxPinFileBytes)
	if err != nil {
		return nil, fileID{}, corrupt(path, err)
	}
	pf, err := parsePinFile(data, server, full)
	if err != nil {
		return nil, fileID{}, corrupt(path, err)
	}
	if full {
		return pf, id, nil
	}
	return s.keepSummary(server, id, pf)
}

// readAtMost reads r to its end into b, grown to size bytes (what a stat
// said; the file may have changed since), and fails when it holds more
// than limit bytes. The bytes returned are b's.
func readAtMost(b *bytes.Buffer, r io.Reader, size, limit int64) ([]byte, error) {
	b.Reset()
	b.Grow(int(min(max(size, 0), limit)) + bytes.MinRead) // ReadFrom keeps MinRead free: one allocation when the size holds
	if _, err := b.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, err
	}
	if int64(b.Len()) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b.Bytes(), nil
}

// readBufs are the buffers pin files are read into. A read keeps nothing
// of its buffer (parsePinFile's records copy what they keep, and a summary
// drops the definitions), and a start reads every server's file, about
// 100 KB each for 100 tools: reusing the buffers took 2 MB off the memory
// a start of 20 such servers allocates.
var readBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledReadBuf bounds the buffers kept for the next read: an unusually
// large pin file does not pin its size in the pool.
const maxPooledReadBuf = 1 << 20

func putReadBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledReadBuf {
		readBufs.Put(b)
	}
}

func corrupt(path string, err error) error {
	return fmt.Errorf("%w: %s: %v (repair it, or delete it to pin the server's tools again on next sight)", ErrCorruptPins, path, err)
}

// parsePinFile decodes and checks one pin file: the version, the server
// name, and that every record's fingerprint is that of its definition
// (which catches a hand-edited or truncated definition). With keep, each
// record's definition is its canonical bytes; else it is left as read, a
// slice of data, for a summary that drops it.
func parsePinFile(data []byte, server string, keep bool) (*pinFile, error) {
	pf, err := decodePinFile(data)
	if err != nil {
		return nil, err
	}
	switch {
	case pf.Version == 0:
		return nil, errors.New("no version")
	case pf.Version > pinFileVersion:
		return nil, fmt.Errorf("version %d is newer than this mcp-proxy reads (%d)", pf.Version, pinFileVersion)
	case pf.Version != pinFileVersion:
		return nil, fmt.Errorf("unknown version %d", pf.Version)
	case pf.Server != server:
		return nil, fmt.Errorf("it is the pin file of server %q, not %q", pf.Server, server)
	}
	if pf.Tools == nil {
		pf.Tools = map[string]*pinEntry{}
	}
	for name, e := range pf.Tools {
		if e == nil || e.Pinned == nil && e.Pending == nil {
			return nil, fmt.Errorf("tool %q: neither pinned nor pending", name)
		}
		for _, r := range []struct {
			rec     *pinRecord
			pending bool
		}{{e.Pinned, false}, {e.Pending, true}} {
			if r.rec == nil {
				continue
			}
			if err := checkRecord(name, r.rec, r.pending, keep); err != nil {
				return nil, err
			}
		}
	}
	return pf, nil
}

func checkRecord(name string, r *pinRecord, pending, keep bool) error {
	// A file this proxy wrote holds the canonical bytes indented: without
	// the indentation they hash to the fingerprint (hashed as they are
	// unindented; the unindented copy is made only when kept). Anything
	// else (an older or hand-edited file) is canonicalized first.
	def := r.Definition
	if unindentedFingerprint(def, r.Fingerprint) == r.Fingerprint {
		if keep {
			def = unindent(def)
		}
	} else {
		c, err := canonicalJSON(def)
		if err != nil {
			return fmt.Errorf("tool %q: definition is not valid JSON", name)
		}
		if fingerprintOf(c, r.Fingerprint) != r.Fingerprint {
			return fmt.Errorf("tool %q: fingerprint %s is not that of its definition (the file was edited or damaged)", name, ShortFingerprint(r.Fingerprint))
		}
		def = c
	}
	if defName, ok := nameOf(def); !ok || defName != name {
		return fmt.Errorf("tool %q: definition is not an object named %q", name, name)
	}
	if keep {
		r.Definition = def
	}
	switch {
	case pending && r.Reason != ReasonChanged && r.Reason != ReasonNew:
		return fmt.Errorf("tool %q: pending reason %q is not changed or new", name, r.Reason)
	case !pending && r.Reason != "":
		return fmt.Errorf("tool %q: a pinned record has a reason", name)
	}
	return nil
}

// update runs fn on server's pin file as it is on disk, definitions
// included (nil when it does not exist), while holding the file's lock. fn
// must not modify the file it is given; it returns the file to write, or
// nil to write nothing. update returns the summary of the file as it is on
// disk afterwards and its identity.
func (s *Store) update(server string, fn func(cur *pinFile) (*pinFile, error)) (*pinFile, fileID, error) {
	if err := s.checkServer(server); err != nil {
		return nil, fileID{}, err
	}
	if s.shared != nil {
		return s.updateShared(server, fn)
	}
	unlock, err := s.lock(server)
	if err != nil {
		return nil, fileID{}, err
	}
	defer unlock()
	cur, next, id, err := s.loadApply(server, fn)
	if err != nil {
		return nil, fileID{}, err
	}
	if next == nil {
		next = cur // nothing to write: the file as it is
	} else {
		next.Version, next.Server = pinFileVersion, server
		if id, err = s.write(server, next); err != nil {
			return nil, fileID{}, err
		}
	}
	return s.keepSummary(server, id, next)
}

// loadApply reads server's pin file with its definitions (nil when it does
// not exist) and runs fn on it: cur is the file as read, next what fn
// returns (nil: nothing to write).
func (s *Store) loadApply(server string, fn func(cur *pinFile) (*pinFile, error)) (cur, next *pinFile, id fileID, err error) {
	if cur, id, err = s.loadFull(server); err != nil {
		return nil, nil, fileID{}, err
	}
	if next, err = fn(cur); err != nil {
		return nil, nil, fileID{}, err
	}
	return cur, next, id, nil
}

// keepSummary remembers the summary of pf, the file whose identity is id,
// for the next read of server (unless pf is nil: no file), and returns it
// as update and read do.
func (s *Store) keepSummary(server string, id fileID, pf *pinFile) (*pinFile, fileID, error) {
	sum := pf.summarize()
	if sum != nil {
		s.remember(server, id, sum)
	}
	return sum, id, nil
}

// lock takes server's exclusive lock, waiting at most lockWait.
func (s *Store) lock(server string) (unlock func(), err error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("integrity: create %s: %w", s.dir, err)
	}
	path := filepath.Join(s.dir, server+".lock")
	unlock, err = atomicfile.Lock(path, s.lockWait)
	if errors.Is(err, atomicfile.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %s)", ErrLocked, path, s.lockWait)
	}
	if err != nil {
		return nil, fmt.Errorf("integrity: lock %s: %w", path, err)
	}
	return unlock, nil
}

// write replaces server's pin file atomically: a complete 0600 temporary
// file in the same directory, synced, then renamed over the old one.
func (s *Store) write(server string, pf *pinFile) (fileID, error) {
	if pf.summary {
		return fileID{}, fmt.Errorf("integrity: the pins of %s without their definitions cannot be written", server)
	}
	data, err := encodePinFile(pf)
	if err != nil {
		return fileID{}, fmt.Errorf("integrity: encode pins of %s: %w", server, err)
	}
	path := s.Path(server)
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fileID{}, fmt.Errorf("integrity: write %s: %w", path, err)
	}
	return statID(path)
}

// encodePinFile is the JSON of a pin file as Store.write writes it. Without
// HTML escaping a definition is written as its canonical bytes indented,
// so reading it back is a json.Compact (see checkRecord).
func encodePinFile(pf *pinFile) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(pf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Servers returns the servers that have a pin file, sorted.
func (s *Store) Servers() ([]string, error) {
	if s.shared != nil {
		return s.shared.servers()
	}
	if s.dir == "" {
		return nil, ErrNoStateDir
	}
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("integrity: read %s: %w", s.dir, err)
	}
	var out []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if ok && !strings.HasPrefix(name, ".") && s.checkServer(name) == nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// unindentedFingerprint is fingerprintOf(unindent(src), known), hashed run
// by run without the copy (short runs gathered in a buffer first).
func unindentedFingerprint(src []byte, known string) string {
	h := sha256.New()
	var buf [4096]byte
	out := buf[:0]
	_ = compactRuns(src, func(run []byte) {
		if len(out)+len(run) > cap(out) {
			h.Write(out)
			out = out[:0]
		}
		if len(run) > cap(out) {
			h.Write(run)
		} else {
			out = append(out, run...)
		}
	})
	h.Write(out)
	return fingerprintText(h.Sum(buf[:0]), known)
}

// unindent returns the JSON text src without the white space between its
// tokens: json.Compact's output. Bytes that are not JSON come out cut at
// their first fault, which checkRecord's fingerprint comparison rejects.
func unindent(src []byte) []byte {
	out := make([]byte, 0, len(src))
	_ = compactRuns(src, func(run []byte) { out = append(out, run...) })
	return out
}

// punctuation holds the bytes compactRuns passes between tokens.
var punctuation = []byte("{}[]:,")

// compactRuns reads the JSON text src with a lax rawjson.Reader (a pin
// file's definitions were validated as it was read) and passes emit its
// tokens and punctuation, without the white space between them, in order.
// It stops at the first fault, which it returns.
func compactRuns(src []byte, emit func([]byte)) error {
	r := rawjson.NewLaxReader(src)
	end, err := compactValue(r, rawjson.SkipSpace(src, 0), emit)
	if err != nil {
		return err
	}
	return r.End(end)
}

// compactValue is compactRuns of the value at offset i of r's document; it
// returns the offset after it.
func compactValue(r *rawjson.Reader, i int, emit func([]byte)) (int, error) {
	b := r.Bytes()
	if i < len(b) && (b[i] == '{' || b[i] == '[') {
		obj := b[i] == '{'
		open, close := punctuation[2:3], punctuation[3:4]
		if obj {
			open, close = punctuation[0:1], punctuation[1:2]
		}
		emit(open)
		n := 0
		sep := func() {
			if n > 0 {
				emit(punctuation[5:6])
			}
			n++
		}
		var end int
		var err error
		if obj {
			end, err = r.Fields(i, func(name []byte, vs int) (int, error) {
				sep()
				emit(name)
				emit(punctuation[4:5])
				return compactValue(r, vs, emit)
			})
		} else {
			end, err = r.Array(i, func(vs int) (int, error) {
				sep()
				return compactValue(r, vs, emit)
			})
		}
		if err == nil {
			emit(close)
		}
		return end, err
	}
	end, err := r.Skip(i)
	if err == nil {
		emit(b[i:end])
	}
	return end, err
}

// nameOf returns the string member "name" of a tool definition.
func nameOf(def []byte) (string, bool) {
	raw, ok, err := rawjson.Get(def, "name")
	if err != nil || !ok {
		return "", false
	}
	name, err := rawjson.Unquote(raw)
	return name, err == nil
}

// maxCheckers bounds how many pin files Check reads at once.
const maxCheckers = 4

// Check reads the pin files of servers and returns the problems of every
// one that exists but cannot be read, joined; nil when all are readable.
// A proxy calls it before it starts serving.
func (s *Store) Check(servers []string) error {
	// The files are independent: read them on every core (at most
	// maxCheckers, each holding one file), since a proxy with many pinned
	// servers does nothing else until this returns.
	errs := make([]error, len(servers))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), maxCheckers, len(servers)) {
		wg.Go(func() {
			for i := range next {
				_, _, errs[i] = s.load(servers[i])
			}
		})
	}
	for i := range servers {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}
