// Package blobs writes the binary blobs embedded in tools/call results to files, so that the
// model sees a file path instead of megabytes of base64 (docs/resources.md#blobs).
//
// A Materializer rewrites the raw JSON of one result. A content item
// {type:"resource", resource:{blob, uri, mimeType}} — and, with MaterializeMedia, an image or
// audio item {type, data, mimeType} — is decoded into <Dir>/<agent>/<sha256 hex>[.<ext>] and
// replaced by a text item, "[IMAGE:<abs path>]" for image/* and
// "[Document: <name>] <abs path>" otherwise, followed by a resource_link to file://<abs path>
// when the client's protocol has that item type (2025-06-18 and later). In structuredContent,
// every string value equal to the data of a blob that was written becomes that blob's reference
// text (still a string; structured.go). Every other byte of the result is copied from the input:
// other items, the rest of structuredContent, isError, _meta and unknown fields come out byte
// for byte.
//
// Limits, checked before anything is decoded, because the result comes from an untrusted
// server: more than MaxBlobsPerResult blob items, or more than MaxBytesPerResult estimated
// decoded bytes in total (len/4*3 minus padding), turn every blob item of the result into
// "[attachment unavailable: <reason>]" and nothing is written. Then each blob on its own: over
// MaxBytesPerBlob, or not standard padded base64 (line breaks are tolerated, as
// encoding/base64 does; padding may only end the text), makes that item unavailable and the
// others proceed.
//
// Memory: the blob is never copied whole. A reader un-escapes the JSON string in place, feeds
// base64.NewDecoder, and the decoded bytes go through SHA-256 and into a temporary file at
// once; a 10 MiB blob costs well under 1 MiB of allocations (see TestRewriteAllocations).
//
// Files: written to a temporary file in the agent directory, synced, then renamed to the
// content's name, so a reader never sees a partial file and the same content always lands on
// the same file; when a regular file of that name and size exists it is reused and nothing is
// written. Directories are created 0700 and files 0600. Dir, the agent directory and the target
// file may not be symbolic links: all access goes through os.Root, each directory is Lstat'ed
// and compared with what was opened, temporary files are created with O_EXCL, and rename never
// follows a link, so nothing is written outside Dir. Agent names must match [A-Za-z0-9_-]{1,32}.
//
// Bounds: each agent folder holds at most Options.MaxStoreBytes of blob files; files not
// written or reused for Options.MaxAge go first, then the oldest, when a new file is added
// (under a per-folder lock, so concurrent writers never overshoot) and at Sweep. A blob that
// cannot fit becomes "[attachment unavailable: blob store full]". Only regular files named
// <sha256 hex>[.<ext>] are counted or removed; links and other files are never touched.
//
// Names: the display name is the last segment of the URI's path, percent-decoded
// ("upload.bin" when there is none). Unicode TAG characters are dropped (docs/protocol.md#fidelity). Path
// separators ('/' and '\'), NUL and other control characters, other Unicode format characters
// (bidi controls, zero-width characters), line and paragraph separators and invalid UTF-8
// become '_'; every dot of a run of two or more
// dots becomes '_'; the name is trimmed of spaces and cut to 128 bytes, keeping its extension.
// The extension is the 1 to 16 ASCII letters and digits after the last dot, lowercased. The
// MIME type is the item's mimeType when it parses as a media type, else the extension's type
// (a built-in table first, then mime.TypeByExtension), else application/octet-stream. Image and
// audio items have no URI: their name is image.<ext> or audio.<ext>, with ext from the MIME type
// (png, jpg, gif, webp, svg, wav, mp3, ogg, flac, else bin).
//
// Rewrite reports one Outcome per blob item for metrics and logs; it returns an error only for
// an invalid agent name or a result with blob items that is not valid JSON. A result without
// blob items is returned as it came, after one allocation-free scan.
package blobs
