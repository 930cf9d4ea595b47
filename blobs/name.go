package blobs

import (
	"mime"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// defaultName is the display name of a blob whose URI has no last path segment.
	defaultName = "upload.bin"
	// maxNameBytes bounds a display name taken from an untrusted URI; it is shown to the model
	// and sent in resource_link, so a megabyte-long URI must not come through whole.
	maxNameBytes = 128
	// maxExtLen is the longest extension kept on a file name (docs/resources.md#blobs).
	maxExtLen = 16
	// maxMIMELen bounds a mimeType copied from an untrusted result.
	maxMIMELen = 255
	// replacementChar replaces every unsafe character of a display name.
	replacementChar = '_'
	// octetStream is the MIME type of bytes of unknown kind.
	octetStream = "application/octet-stream"
)

// displayName derives the name shown for a blob from its URI: the last segment of the URI's
// path, percent-decoded, then made safe by sanitizeName; defaultName if there is none.
func displayName(uri string) string {
	seg := lastSegment(uri)
	name := sanitizeName(seg)
	if name == "" {
		return defaultName
	}
	return name
}

// lastSegment returns the percent-decoded last segment of the URI's path. A URI that does not
// parse (control characters, bad escapes) is cut at its query or fragment and split on '/' as
// it is.
func lastSegment(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		p := u.EscapedPath()
		seg := p[strings.LastIndexByte(p, '/')+1:]
		if dec, err := url.PathUnescape(seg); err == nil {
			return dec
		}
		return seg
	}
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	return uri[strings.LastIndexByte(uri, '/')+1:]
}

// sanitizeName makes a name safe to show and to put in a resource_link:
//   - TAG characters (U+E0000–U+E007F) are dropped, as from all result text (docs/protocol.md#fidelity);
//   - '/', '\\', NUL and every other control character (C0, DEL, C1), other Unicode format
//     characters (bidi overrides, zero-width characters), line and paragraph separators and
//     bytes that are not UTF-8 become '_';
//   - every dot in a run of two or more dots becomes '_', so no ".." remains;
//   - surrounding spaces are trimmed; "." alone is dropped;
//   - the result is cut to maxNameBytes, keeping the extension.
//
// It returns "" when nothing is left.
func sanitizeName(s string) string {
	var sb strings.Builder
	sb.Grow(min(len(s), 4*maxNameBytes))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			sb.WriteByte(replacementChar)
		case isTag(r):
			// Dropped, as from all upstream result text (docs/protocol.md#fidelity): they hide instructions.
		case unsafeRune(r):
			sb.WriteByte(replacementChar)
		default:
			sb.WriteRune(r)
		}
		i += size
		// Names are cut below anyway; stop copying an absurdly long one early.
		if sb.Len() > 4*maxNameBytes {
			break
		}
	}
	name := strings.TrimSpace(breakDotRuns(sb.String()))
	if name == "." {
		return ""
	}
	return truncateName(name)
}

// breakDotRuns replaces every dot of a run of two or more dots with replacementChar. It runs
// after the other replacements, so that dots that became adjacent (a dropped TAG character
// between them) are caught too.
func breakDotRuns(s string) string {
	if !strings.Contains(s, "..") {
		return s
	}
	b := []byte(s)
	for i := range b {
		if b[i] == '.' && (i+1 < len(s) && s[i+1] == '.' || i > 0 && s[i-1] == '.') {
			b[i] = replacementChar
		}
	}
	return string(b)
}

// isTag reports whether r is in the Unicode TAG block.
func isTag(r rune) bool { return r >= 0xE0000 && r <= 0xE007F }

// unsafeRune reports whether r may not appear in a display name.
func unsafeRune(r rune) bool {
	switch r {
	case '/', '\\', '\u2028', '\u2029':
		return true
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// truncateName cuts name to maxNameBytes at a character boundary, keeping its extension.
func truncateName(name string) string {
	if len(name) <= maxNameBytes {
		return name
	}
	suffix := ""
	if ext := extOf(name); ext != "" {
		suffix = name[len(name)-len(ext)-1:]
	}
	stem := name[:maxNameBytes-len(suffix)]
	for len(stem) > 0 && !utf8.ValidString(stem) {
		stem = stem[:len(stem)-1]
	}
	// A stem cut right after a dot would put ".." before the extension.
	return strings.TrimRight(stem, ".") + suffix
}

// extOf returns the extension of name, lowercased: the 1 to 16 ASCII letters and digits after
// its last dot, or "" when what follows the last dot is anything else.
func extOf(name string) string {
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return ""
	}
	ext := name[dot+1:]
	if len(ext) == 0 || len(ext) > maxExtLen {
		return ""
	}
	for i := 0; i < len(ext); i++ {
		if !isAlnum(ext[i]) {
			return ""
		}
	}
	return strings.ToLower(ext)
}

// extMIME maps the extensions most tool results carry to their MIME type, so that the answer
// does not depend on the machine's mime.types; others go to mime.TypeByExtension.
var extMIME = map[string]string{
	"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
	"webp": "image/webp", "svg": "image/svg+xml", "bmp": "image/bmp", "ico": "image/x-icon",
	"tif": "image/tiff", "tiff": "image/tiff", "avif": "image/avif", "heic": "image/heic",
	"wav": "audio/wav", "mp3": "audio/mpeg", "ogg": "audio/ogg", "flac": "audio/flac",
	"m4a": "audio/mp4", "mp4": "video/mp4", "webm": "video/webm", "mov": "video/quicktime",
	"pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip",
	"tar": "application/x-tar", "json": "application/json", "xml": "application/xml",
	"txt": "text/plain", "md": "text/markdown", "csv": "text/csv", "html": "text/html",
	"htm": "text/html", "bin": octetStream,
	"docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	"xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	"pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}

// mimeFromExt returns the MIME type for an extension, octetStream when unknown.
func mimeFromExt(ext string) string {
	if ext == "" {
		return octetStream
	}
	if t, ok := extMIME[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension("." + ext); t != "" {
		return t
	}
	return octetStream
}

// cleanMIME returns the normalized form of an untrusted mimeType ("image/PNG" → "image/png",
// parameters kept), or "" when it is empty, too long or does not parse as a media type.
func cleanMIME(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxMIMELen {
		return ""
	}
	mt, params, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(mt, "/") {
		return ""
	}
	if f := mime.FormatMediaType(mt, params); f != "" {
		return f
	}
	return mt
}

// mediaExt maps the MIME type of an image or audio content item to the extension of its file
// (docs/resources.md#blobs); anything else is "bin".
func mediaExt(mimeType string) string {
	mt, _, _ := strings.Cut(mimeType, ";")
	switch strings.TrimSpace(mt) {
	case "image/png":
		return "png"
	case "image/jpeg", "image/jpg", "image/pjpeg":
		return "jpg"
	case "image/gif":
		return "gif"
	case "image/webp":
		return "webp"
	case "image/svg+xml":
		return "svg"
	case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave":
		return "wav"
	case "audio/mpeg", "audio/mp3":
		return "mp3"
	case "audio/ogg":
		return "ogg"
	case "audio/flac", "audio/x-flac":
		return "flac"
	}
	return "bin"
}

// isImage reports whether the MIME type is image/*.
func isImage(mimeType string) bool { return strings.HasPrefix(mimeType, "image/") }
