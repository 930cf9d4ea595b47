package config

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors. Compare with errors.Is; the texts are for people.
var (
	// ErrInvalid matches every problem found in a configuration document:
	// syntax, unknown keys, wrong kinds, missing variables, failed rules.
	// A CLI maps it to its "config error" exit code.
	ErrInvalid = errors.New("invalid config")
	// ErrUnknownKey is a key that is not part of the schema.
	ErrUnknownKey = errors.New("unknown key")
	// ErrMissingEnv is a ${VAR} reference to a variable that is not set.
	ErrMissingEnv = errors.New("environment variable is not set")
	// ErrBadReference is a malformed ${...} reference.
	ErrBadReference = errors.New("malformed ${...} reference")
	// ErrNoConfig is returned by Locate when no configuration file exists.
	ErrNoConfig = errors.New("no config file found")
	// ErrImport is returned by ImportJSON for input it cannot read.
	ErrImport = errors.New("cannot import")
)

// FieldError is one problem of a configuration, located by its key path
// (for example "servers.github.url"; sequence items are written "[i]").
// Path is empty for problems of the document as a whole. FieldError matches
// ErrInvalid, and unwraps to Err.
type FieldError struct {
	Path string
	Err  error
}

// Error is "<path>: <problem>", or just the problem when Path is empty.
func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying problem.
func (e *FieldError) Unwrap() error { return e.Err }

// Is reports that every FieldError is an ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// problem builds a *FieldError from a plain message.
func problem(path, msg string) error {
	return &FieldError{Path: path, Err: errors.New(msg)}
}

// missingEnvError names a variable that is not set. It never holds a value.
type missingEnvError struct{ name string }

func (e *missingEnvError) Error() string {
	return "environment variable " + e.name + " is not set"
}

func (e *missingEnvError) Is(target error) bool { return target == ErrMissingEnv }

// scrubbedError stands in for an error whose text contained a secret: it
// carries the scrubbed text and still matches the sentinels of the original,
// but does not unwrap to it (that would hand the secret back).
type scrubbedError struct {
	msg   string
	inner error
}

func (e *scrubbedError) Error() string        { return e.msg }
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.inner, target) }

// maxProblems bounds how many problems one load reports: enough for any
// hand-written file, and a hostile one cannot make the error text huge.
const maxProblems = 100

// redactedText replaces secret values.
const redactedText = "[REDACTED]"

// minScrubLen is the shortest secret that is scrubbed out of free text.
// Shorter values would garble unrelated words and protect nothing.
const minScrubLen = 4

// scrubText replaces every occurrence of a secret in s. secrets must be
// sorted longest first (Secrets does that), so that a secret containing
// another is replaced whole.
func scrubText(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= minScrubLen && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, redactedText)
		}
	}
	if strings.Contains(s, cutMark) {
		s = scrubCut(s, secrets)
	}
	return s
}

// cutMark ends a value quoteValue cut short.
const cutMark = `..."`

// scrubCut replaces the start of a secret that a cut value ends with: a
// secret longer than what quoteValue shows is not whole in the text, yet
// most of it would be.
func scrubCut(s string, secrets []string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, cutMark)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		head := s[:i]
		for _, sec := range secrets {
			for n := min(len(sec), len(head)); n >= minScrubLen; n-- {
				if strings.HasSuffix(head, sec[:n]) {
					head = head[:len(head)-n] + redactedText
					break
				}
			}
		}
		b.WriteString(head)
		b.WriteString(cutMark)
		s = s[i+len(cutMark):]
	}
}

// joinProblems caps, scrubs and joins problems; nil when there are none.
func joinProblems(problems []error, secrets []string) error {
	if len(problems) == 0 {
		return nil
	}
	extra := 0
	if len(problems) > maxProblems {
		extra = len(problems) - maxProblems
		problems = problems[:maxProblems]
	}
	out := make([]error, 0, len(problems)+1)
	for _, p := range problems {
		msg := p.Error()
		if clean := scrubText(msg, secrets); clean != msg {
			p = &scrubbedError{msg: clean, inner: p}
		}
		out = append(out, p)
	}
	if extra > 0 {
		out = append(out, problem("", strconv.Itoa(extra)+" more problems not shown"))
	}
	return errors.Join(out...)
}
