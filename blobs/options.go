package blobs

import (
	"cmp"
	"fmt"
	"path/filepath"
	"time"
)

// Mode selects what Rewrite does with blobs.
type Mode string

const (
	// ModeFile writes blobs to files under Options.Dir and replaces them with text (and a
	// resource_link where the client has it). It is the default: the zero Mode means ModeFile.
	ModeFile Mode = "file"
	// ModePassthrough leaves results untouched.
	ModePassthrough Mode = "passthrough"
)

// Limits on one tools/call result. The result comes from an untrusted server, so they are
// checked before any blob is decoded (docs/resources.md#blobs, seed 003).
const (
	// MaxBlobsPerResult bounds per-item work: a result with more blob items than this has every
	// one of them replaced by an "attachment unavailable" text and nothing is written.
	MaxBlobsPerResult = 64
	// MaxBytesPerResult bounds the estimated decoded total of all blobs of one result.
	MaxBytesPerResult = 10 << 20
	// MaxBytesPerBlob bounds one decoded blob, the seed's per-file limit.
	MaxBytesPerBlob = 10 << 20
)

// maxAgentLen is the longest agent name accepted as a directory name.
const maxAgentLen = 32

// Options configure a Materializer. The zero value is not usable: Dir is required in ModeFile.
type Options struct {
	// Dir is the absolute base directory; files go to <Dir>/<agent>/<sha256hex>[.<ext>].
	// Dir itself may not be a symbolic link; it is created (0700) on first use, not by New.
	// Ignored in ModePassthrough.
	Dir string
	// Mode is ModeFile (also the zero value) or ModePassthrough.
	Mode Mode
	// MaterializeMedia also writes image and audio content items to files.
	MaterializeMedia bool
	// MaxStoreBytes bounds the blob files of one agent folder; 0 means DefaultMaxStoreBytes.
	// Writing a new file first evicts the oldest until it fits; a blob that cannot fit becomes
	// "[attachment unavailable: blob store full]".
	MaxStoreBytes int64
	// MaxAge is how long a blob file is kept after it was last written or reused; 0 means
	// DefaultMaxAge. Older files go at the next write to their folder and at Sweep.
	MaxAge time.Duration
	// OnStoreSize, if set, gets an agent folder's total blob bytes after every write that
	// added a file and every Sweep (the gauge mcp_proxy_blob_store_bytes). It is called with
	// the folder's lock held, so calls for one agent never overlap, and must not block.
	OnStoreSize func(agent string, bytes int64)
}

// limits are the bounds a Materializer enforces; New sets them to the package constants and
// tests lower them.
type limits struct {
	maxBlobs   int
	maxTotal   int64
	maxPerBlob int64
}

// Materializer rewrites tools/call results. One Materializer may be used by any number of
// goroutines at once: its only mutable state is one lock per agent folder, which orders
// evictions and new files.
type Materializer struct {
	dir     string
	mode    Mode
	media   bool
	limits  limits
	folders folders
}

// New validates opts and returns a Materializer. It touches no file: Dir and the agent
// directories are created by Rewrite when a blob is first written.
func New(opts Options) (*Materializer, error) {
	m := &Materializer{
		mode:  opts.Mode,
		media: opts.MaterializeMedia,
		limits: limits{
			maxBlobs:   MaxBlobsPerResult,
			maxTotal:   MaxBytesPerResult,
			maxPerBlob: MaxBytesPerBlob,
		},
	}
	switch opts.Mode {
	case "", ModeFile:
		m.mode = ModeFile
	case ModePassthrough:
		return m, nil
	default:
		return nil, fmt.Errorf("blobs: mode %q (want %q or %q): %w", opts.Mode, ModeFile, ModePassthrough, ErrInvalidOptions)
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("blobs: dir is empty: %w", ErrInvalidOptions)
	}
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("blobs: dir %q is not absolute: %w", opts.Dir, ErrInvalidOptions)
	}
	if opts.MaxStoreBytes < 0 || opts.MaxAge < 0 {
		return nil, fmt.Errorf("blobs: negative store bound: %w", ErrInvalidOptions)
	}
	m.dir = filepath.Clean(opts.Dir)
	m.folders = folders{max: cmp.Or(opts.MaxStoreBytes, DefaultMaxStoreBytes), maxAge: cmp.Or(opts.MaxAge, DefaultMaxAge), onSize: opts.OnStoreSize}
	return m, nil
}

// ValidateAgent reports whether name can be used as the agent directory under Dir: 1 to 32
// characters from [A-Za-z0-9_-]. The error wraps ErrInvalidAgent. Config loading can call it to
// reject such names before any tool call.
func ValidateAgent(name string) error {
	if len(name) == 0 || len(name) > maxAgentLen {
		return fmt.Errorf("blobs: agent name of %d bytes (want 1 to %d): %w", len(name), maxAgentLen, ErrInvalidAgent)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && c != '_' && c != '-' {
			return fmt.Errorf("blobs: agent name %q has a character outside [A-Za-z0-9_-]: %w", name, ErrInvalidAgent)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
