// Package rawjson edits JSON objects without decoding and re-encoding them:
// it finds the byte ranges of an object's top-level members and splices new
// values in, so every byte it does not change reaches the other side exactly
// as it came (key order, number spelling, escapes, unknown fields).
//
// mcp-proxy uses it wherever an upstream's JSON passes through with a small
// change: a tool's exposed name, a result spliced into a JSON-RPC response,
// a pinned parameter cut out of a tool's schema (Elements and Cut).
package rawjson
