package integrity

import (
	"encoding/base64"
	"strings"
	"unicode"
	"unicode/utf8"
)

// minEncodedRun is the shortest run of base64 characters the scan decodes:
// 24 characters are 18 bytes, about the shortest instruction worth hiding
// ("ignore the user"), while shorter runs are everywhere in ordinary text
// (identifiers, hashes, paths).
const minEncodedRun = 24

// maxEncodedDepth bounds how many layers of base64 inside base64 the scan
// decodes: each layer is a quarter shorter, and two catch what a poisoner
// gains by nesting.
const maxEncodedDepth = 2

// encodedFindings decodes the runs of base64 in norm (a normalized text)
// that are at least minEncodedRun long and decode to text, scans what they
// decode to, and reports each finding there as a base64_instruction
// finding of the same kind and level, one per run (the most serious). A
// model decodes base64 on request ("Decode and follow: aWdub3Jl...") where
// a person reads noise.
func encodedFindings(where, norm string, depth int) []Finding {
	if depth >= maxEncodedDepth || len(norm) < minEncodedRun {
		return nil
	}
	var out []Finding
	// Normalized text has no white space but single spaces: a run of
	// base64 lies inside one space-separated word, and most words are
	// far shorter than a run.
	for rest := norm; len(rest) >= minEncodedRun; {
		n := strings.IndexByte(rest, ' ')
		if n < 0 {
			n = len(rest)
		}
		if n >= minEncodedRun {
			out = appendEncodedRuns(out, where, rest[:n], depth)
		}
		if n == len(rest) {
			break
		}
		rest = rest[n+1:]
	}
	return out
}

// appendEncodedRuns adds the findings of the base64 runs of one word.
func appendEncodedRuns(out []Finding, where, w string, depth int) []Finding {
	for i := 0; i < len(w); {
		if base64Bytes[w[i]] == 0 {
			i++
			continue
		}
		j := i
		var seen uint8
		for j < len(w) && base64Bytes[w[j]] != 0 {
			seen |= base64Bytes[w[j]]
			j++
		}
		run := w[i:j]
		i = j
		if len(run) < minEncodedRun {
			continue
		}
		decoded, ok := decodeBase64(run, seen)
		if !ok {
			continue
		}
		if f, ok := worstFinding(scanDepth(where, decoded, normalize(decoded), depth+1)); ok {
			out = append(out, Finding{Kind: f.Kind, Level: f.Level, Rule: "base64_instruction", Where: where,
				Excerpt: cutRunes("base64 of: "+f.Excerpt, maxExcerptRunes)})
		}
	}
	return out
}

// Classes of base64Bytes.
const (
	base64Common = 1 // a letter or digit
	base64Std    = 2 // '+' or '/'
	base64URL    = 4 // '-' or '_'
)

// base64Bytes classes the bytes of base64 runs (either alphabet); 0 is any
// other byte.
var base64Bytes = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			t[c] = base64Common
		case c == '+' || c == '/':
			t[c] = base64Std
		case c == '-' || c == '_':
			t[c] = base64URL
		}
	}
	return t
}()

// decodeBase64 decodes a run of base64 characters (padding already left
// out; a run cut short of a full group loses its last characters) and
// reports whether it is text: valid UTF-8 of printable characters, white
// space and invisible ones (which the scan of the text reports).
func decodeBase64(run string, seen uint8) (string, bool) {
	enc := base64.RawStdEncoding
	switch {
	case seen&base64Std != 0 && seen&base64URL != 0:
		return "", false // two alphabets: a path or an identifier
	case seen&base64URL != 0:
		enc = base64.RawURLEncoding
	}
	if len(run)%4 == 1 {
		run = run[:len(run)-1]
	}
	b, err := enc.DecodeString(run)
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	s := string(b)
	for _, r := range s {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) && invisibleClassOf(r) < 0 {
			return "", false
		}
	}
	return s, true
}

// worstFinding returns the first quarantine-level finding of fs, else the
// first one.
func worstFinding(fs []Finding) (Finding, bool) {
	for _, f := range fs {
		if f.Level == LevelQuarantine {
			return f, true
		}
	}
	if len(fs) > 0 {
		return fs[0], true
	}
	return Finding{}, false
}
