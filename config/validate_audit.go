package config

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Audit log defaults and bounds (docs/operations.md#audit-log).
const (
	// DefaultAuditMaxBytes rotates the file at 100 MiB: large enough for
	// about a million lines, small enough to open in an editor.
	DefaultAuditMaxBytes = 104857600
	// DefaultAuditMaxFiles keeps the live file and 9 rotated ones.
	DefaultAuditMaxFiles = 10
	// DefaultAuditArguments records a digest: who called what is known,
	// what the arguments were is not written.
	DefaultAuditArguments = "digest"
	// MinAuditMaxBytes is the smallest rotation size: below it every line
	// or two would start a new file.
	MinAuditMaxBytes = 1024
	// MaxAuditMaxFiles bounds the files a rotation renames.
	MaxAuditMaxFiles = 1000
)

// Audit argument modes (Audit.Arguments).
const (
	AuditArgumentsDigest = "digest"
	AuditArgumentsFull   = "full"
	AuditArgumentsNone   = "none"
)

var auditArgumentModes = []string{AuditArgumentsDigest, AuditArgumentsFull, AuditArgumentsNone}

func (c *Config) auditDefaults() {
	a := &c.Audit
	if a.MaxBytes == 0 && !c.isSet("audit.max_bytes") {
		a.MaxBytes = DefaultAuditMaxBytes
	}
	if a.MaxFiles == 0 && !c.isSet("audit.max_files") {
		a.MaxFiles = DefaultAuditMaxFiles
	}
	setString(&a.Arguments, DefaultAuditArguments)
}

func (c *Config) validateAudit(v *validator) {
	a := &c.Audit
	switch p := a.Path; {
	case p == "":
	case strings.HasPrefix(p, "~"):
		v.add("audit.path", `"~" is not expanded: write ${HOME} instead`)
	case !filepath.IsAbs(p):
		v.add("audit.path", "must be an absolute path, got "+quoteValue(p))
	case strings.HasSuffix(p, "/") || filepath.Base(p) == "." || filepath.Base(p) == "..":
		v.add("audit.path", "must name a file, got "+quoteValue(p))
	}
	if a.MaxBytes < MinAuditMaxBytes {
		v.add("audit.max_bytes", "must be at least "+strconv.Itoa(MinAuditMaxBytes))
	}
	if a.MaxFiles < 1 || a.MaxFiles > MaxAuditMaxFiles {
		v.add("audit.max_files", "must be between 1 and "+strconv.Itoa(MaxAuditMaxFiles))
	}
	v.oneOf("audit.arguments", a.Arguments, auditArgumentModes)
}
