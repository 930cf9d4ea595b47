package oauthclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/atomicfile"
)

// Permissions of the store: tokens and client secrets are the user's alone.
const (
	storeDirMode  = 0o700
	storeFileMode = 0o600
	// storeVersion is the format of a server's file.
	storeVersion = 1
	// maxStoreFile bounds what is read of a server's file (a few entries of
	// a few KiB each).
	maxStoreFile = 1 << 20
)

// storeNameOK is the server name rule of the config (docs/configuration.md#servers), checked
// again here because the name becomes a file name.
var storeNameOK = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Entry is what the store keeps for one server URL and issuer: the
// authorization server's endpoints, the client identity used there, and the
// last tokens. AccessToken, RefreshToken and ClientSecret are secrets.
type Entry struct {
	ServerURL string `json:"server_url"` // canonical
	Issuer    string `json:"issuer"`
	// Resource is the RFC 8707 resource indicator the tokens were asked
	// for, sent again with every refresh; "" (entries of older versions)
	// means ServerURL.
	Resource string `json:"resource,omitempty"`

	AuthorizationEndpoint string `json:"authorization_endpoint,omitempty"`
	TokenEndpoint         string `json:"token_endpoint"`

	// ClientID, ClientSecret and TokenEndpointAuth identify the proxy at
	// the token endpoint; ClientKind is "configured", "metadata_document" or
	// "registered" (RFC 7591, then RedirectURI is the registered one).
	ClientID          string    `json:"client_id,omitempty"`
	ClientSecret      string    `json:"client_secret,omitempty"`
	TokenEndpointAuth string    `json:"token_endpoint_auth,omitempty"`
	ClientKind        string    `json:"client_kind,omitempty"`
	RedirectURI       string    `json:"redirect_uri,omitempty"`
	SecretExpiresAt   time.Time `json:"client_secret_expires_at,omitzero"`

	AccessToken  string    `json:"access_token,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"` // zero: unknown
	// Scopes are the scopes granted (the token response's scope, else the
	// ones requested).
	Scopes []string `json:"scopes,omitempty"`

	Updated time.Time `json:"updated"`
}

// resource is the RFC 8707 resource indicator of e's grants.
func (e *Entry) resource() string {
	if e.Resource != "" {
		return e.Resource
	}
	return e.ServerURL
}

// hasToken reports whether the entry holds an access token.
func (e *Entry) hasToken() bool { return e != nil && e.AccessToken != "" }

// storeFile is the JSON document of one server.
type storeFile struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

// Store keeps tokens and registrations in a folder, one file per server
// name. A nil *Store keeps nothing: every Client then holds its tokens in
// memory only. Its methods are safe for concurrent use, also by several
// processes sharing the folder (they serialize on an exclusive lock file
// per server).
type Store struct {
	files tokenFiles
	// shared is set for a store kept in the shared-state store (Redis):
	// then files is empty and unused.
	shared *sharedTokens
}

// tokenBackend is where a Store keeps its entries: a folder (tokenFiles)
// or the shared-state store (sharedTokens).
type tokenBackend interface {
	load(server string) ([]Entry, error)
	update(server string, fn func([]Entry) ([]Entry, error)) (stamp string, err error)
	stamp(server string) (string, error)
}

// backend is the store's tokenBackend.
func (s *Store) backend() tokenBackend {
	if s.shared != nil {
		return s.shared
	}
	return &s.files
}

// tokenFiles keeps the entries in a folder, one file per server name.
type tokenFiles struct {
	dir   string
	mu    sync.Mutex             // guards locks
	locks map[string]*sync.Mutex // per server, within this process
}

// OpenStore returns the store in dir (usually <state_dir>/auth). The folder
// is created, 0700, on first write; an existing folder that others may
// read or write is refused then.
func OpenStore(dir string) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("token store: %q is not an absolute path", dir)
	}
	return &Store{files: tokenFiles{dir: filepath.Clean(dir), locks: map[string]*sync.Mutex{}}}, nil
}

// Dir returns the store's folder, "" for a shared store.
func (s *Store) Dir() string { return s.files.dir }

// Shared reports whether the store is kept in the shared-state store.
func (s *Store) Shared() bool { return s != nil && s.shared != nil }

func (s *tokenFiles) path(server, ext string) (string, error) {
	if !storeNameOK.MatchString(server) {
		return "", fmt.Errorf("token store: invalid server name %q", server)
	}
	return filepath.Join(s.dir, server+ext), nil
}

// ensureDir creates the folder 0700 and refuses one that group or others
// can use.
func (s *tokenFiles) ensureDir() error {
	if err := os.MkdirAll(s.dir, storeDirMode); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	fi, err := os.Stat(s.dir)
	if err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("token store: %s is not a directory", s.dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("token store: %s is accessible to other users (mode %04o); run `chmod 700 %s`", s.dir, fi.Mode().Perm(), s.dir)
	}
	return nil
}

// Load returns the entries of server, nil when it has none.
func (s *Store) Load(server string) ([]Entry, error) {
	if s == nil {
		return nil, nil
	}
	return s.backend().load(server)
}

func (s *tokenFiles) load(server string) ([]Entry, error) {
	p, err := s.path(server, ".json")
	if err != nil {
		return nil, err
	}
	return readEntries(p)
}

func readEntries(p string) ([]Entry, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxStoreFile {
		return nil, fmt.Errorf("token store: %s is not a regular file of at most %d bytes", p, maxStoreFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStoreFile))
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	return decodeEntries(data, p)
}

// Update runs fn on the entries of server under the server's exclusive
// lock (shared with other processes) and writes what fn returns: a new file
// written whole, 0600, then renamed over the old one, so a reader never
// sees half a file. An empty result removes the file. fn must not block
// long: other processes wait for the lock.
//
// In a shared store the lock is a lease in the store (see sharedTokens),
// so that one replica at a time runs fn: a token refresh runs inside fn,
// and the replicas that wait for the lock then find the refreshed token.
func (s *Store) Update(server string, fn func([]Entry) ([]Entry, error)) error {
	_, err := s.update(server, fn)
	return err
}

// update is Update, returning the stamp of what it leaves stored.
func (s *Store) update(server string, fn func([]Entry) ([]Entry, error)) (string, error) {
	if s == nil {
		return "", errors.New("token store: none configured")
	}
	return s.backend().update(server, fn)
}

func (s *tokenFiles) update(server string, fn func([]Entry) ([]Entry, error)) (string, error) {
	p, err := s.path(server, ".json")
	if err != nil {
		return "", err
	}
	unlock, err := s.lock(server)
	if err != nil {
		return "", err
	}
	defer unlock()
	old, err := readEntries(p)
	if err != nil {
		return "", err
	}
	next, err := fn(old)
	if err != nil {
		return "", err
	}
	if len(next) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("token store: %w", err)
		}
		return "", nil
	}
	data, err := encodeEntries(next)
	if err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(p, data, storeFileMode); err != nil {
		return "", fmt.Errorf("token store: %w", err)
	}
	return fileStamp(p), nil
}

// encodeEntries is the document of entries, newest first, as a file holds
// it (and, sealed, the shared store).
func encodeEntries(entries []Entry) ([]byte, error) {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Updated.After(entries[j].Updated) })
	data, err := json.MarshalIndent(storeFile{Version: storeVersion, Entries: entries}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	return append(data, '\n'), nil
}

// decodeEntries reads a document encodeEntries wrote; where names it in
// errors.
func decodeEntries(data []byte, where string) ([]Entry, error) {
	var doc storeFile
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("token store: %s is corrupt (%v); run `mcp-proxy auth logout` for this server and log in again", where, err)
	}
	if doc.Version != storeVersion {
		return nil, fmt.Errorf("token store: %s has format version %d, this proxy reads %d", where, doc.Version, storeVersion)
	}
	return doc.Entries, nil
}

// lock takes the per-server lock of this process, then the lock file that
// other processes share.
func (s *tokenFiles) lock(server string) (func(), error) {
	s.mu.Lock()
	m := s.locks[server]
	if m == nil {
		m = &sync.Mutex{}
		s.locks[server] = m
	}
	s.mu.Unlock()
	m.Lock()
	if err := s.ensureDir(); err != nil {
		m.Unlock()
		return nil, err
	}
	lp, _ := s.path(server, ".lock")
	unlockFile, err := atomicfile.Lock(lp, 0)
	if err != nil {
		m.Unlock()
		return nil, fmt.Errorf("token store: lock %s: %w", lp, err)
	}
	return func() {
		unlockFile()
		m.Unlock()
	}, nil
}

// Remove forgets everything stored for server.
func (s *Store) Remove(server string) error {
	return s.Update(server, func([]Entry) ([]Entry, error) { return nil, nil })
}

// stamp identifies the current version of server's entries: it changes on
// every write by any process (each write is a new file, or a new revision
// in the shared store). "" means none. Only a shared store that does not
// answer is an error.
func (s *Store) stamp(server string) (string, error) {
	if s == nil {
		return "", nil
	}
	return s.backend().stamp(server)
}

func (s *tokenFiles) stamp(server string) (string, error) {
	p, err := s.path(server, ".json")
	if err != nil {
		return "", nil // a name no file can have: no entries
	}
	return fileStamp(p), nil
}

// fileStamp identifies the version of the file at p, "" when there is
// none: each write is a new file, renamed over the old one.
func fileStamp(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return ""
	}
	dev, ino := atomicfile.Inode(fi) // a rename changes it
	return fmt.Sprintf("%d/%d/%d:%d", fi.ModTime().UnixNano(), fi.Size(), dev, ino)
}

// find returns the newest entry for serverURL (and issuer, when not "").
func find(entries []Entry, serverURL, issuer string) *Entry {
	for i := range entries {
		e := &entries[i]
		if e.ServerURL == serverURL && (issuer == "" || SameIssuer(e.Issuer, issuer)) {
			return e
		}
	}
	return nil
}

// replace returns entries with e in place of the entry for its server URL
// and issuer (or added).
func replace(entries []Entry, e Entry) []Entry {
	out := make([]Entry, 0, len(entries)+1)
	out = append(out, e)
	for _, x := range entries {
		if x.ServerURL == e.ServerURL && SameIssuer(x.Issuer, e.Issuer) {
			continue
		}
		out = append(out, x)
	}
	return out
}

// Servers returns the server names that have a file in the folder, sorted
// (none for a shared store, which is never a source of an import).
func (s *Store) Servers() ([]string, error) {
	if s == nil || s.shared != nil {
		return nil, nil
	}
	des, err := os.ReadDir(s.files.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	var out []string
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".json")
		if ok && de.Type().IsRegular() && storeNameOK.MatchString(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Import copies into s the entries of server in src that s lacks or holds
// older (by Updated), and returns how many it copied (with dryRun, would
// copy, writing nothing). Running it again copies nothing.
func (s *Store) Import(src *Store, server string, dryRun bool) (int, error) {
	from, err := src.Load(server)
	if err != nil || len(from) == 0 {
		return 0, err
	}
	count := func(have []Entry) (int, []Entry) {
		n, out := 0, have
		for _, e := range from {
			cur := find(out, e.ServerURL, e.Issuer)
			if cur != nil && !cur.Updated.Before(e.Updated) {
				continue
			}
			out = replace(out, e)
			n++
		}
		return n, out
	}
	if dryRun {
		have, err := s.Load(server)
		if err != nil {
			return 0, err
		}
		n, _ := count(have)
		return n, nil
	}
	copied := 0
	err = s.Update(server, func(have []Entry) ([]Entry, error) {
		var out []Entry
		copied, out = count(have)
		return out, nil
	})
	return copied, err
}
