// Package rawjson edits JSON objects without decoding and re-encoding them:
// it finds the byte ranges of an object's top-level members and splices new
// values in, so every byte it does not change reaches the other side exactly
// as it came (key order, number spelling, escapes, unknown fields).
//
// mcp-proxy uses it wherever an upstream's JSON passes through with a small
// change: a tool's exposed name, a result spliced into a JSON-RPC response,
// a pinned parameter cut out of a tool's schema (Elements and Cut).
//
// It is also the proxy's one JSON scanner. ParseMessage reads a JSON-RPC
// envelope; a Reader reads a whole document in one pass for a decoder that
// descends into what it wants (Object or Fields, Array, Skip), validating
// every byte once, or, made with NewLaxReader for a document a validating
// read already accepted, delimiting strings without checking them. Equal,
// Unquote, AppendUnquoted and NewStringReader decode the string literals a
// Reader delimits; AppendString writes one.
package rawjson
