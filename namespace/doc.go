// Package namespace gives every upstream tool and prompt the name the
// downstream host sees, and every upstream resource URI its proxied form
// (docs/agents.md#names).
//
// A Table, built once per catalog change by Build, maps each exposed name to
// the (server, original name) it stands for and back. Routing uses the table
// and never parses an exposed name: names in the hermes style are ambiguous
// (mcp_a_b_c may be server "a_b" tool "c" or server "a" tool "b_c").
//
// # Naming rules
//
// For one server's item with original name n and prefix p:
//
//   - zeroclaw style: "<p>__<n>"; hermes style: "mcp_<p>_<n>" with '-' and
//     '.' replaced by '_'.
//   - p == "" exposes the bare name n. In the hermes style the bare name still
//     has '-' and '.' replaced by '_', so a catalog in that style never
//     contains '-' or '.' whatever the prefix.
//   - Every byte outside [A-Za-z0-9_-] becomes '_', one '_' per Unicode
//     character (one per byte for bytes that are not valid UTF-8).
//   - A name longer than 64 bytes after that is cut to 57 bytes followed by
//     '_' and the first 6 hex digits of the SHA-256 of the whole sanitized
//     name, 64 bytes in all.
//   - A bare name that equals any other exposed name, and an empty bare name,
//     falls back to the server's prefixed form built with the server NAME
//     (not the prefix). Every bare collider falls back; this repeats until no
//     bare name collides, so a fallback that lands on another bare name moves
//     that one too. Each fallback is reported in a warning.
//   - Items that still share one name then all get a suffix: the name is cut
//     to at most 57 bytes and gets '_' plus 6 hex digits of the SHA-256 of
//     "<server>\x00<original name>" (a counter is appended to the hashed text
//     until the result is unused). Each is reported in a warning.
//
// Items are sorted by (server, original name) before any of this, so the
// table and the warnings depend only on the set of inputs, not their order.
// The same (server, original name) given twice is one item.
//
// # Stable names
//
// Rebuild takes the previous table: an item that holds a name there keeps
// it, hash suffix included, for as long as it is in every build and its
// name before the suffix stays the same, and a newcomer that collides with
// a held name gets the suffix alone (names a host has seen are not changed
// by a tool that came later). The bare fallback is decided over the whole
// input as in Build: every bare collider falls back, the older one too.
// Each entry records its Base, the exposed name before any collision
// suffix; policy rules match it, so no suffix moves a tool out of a rule
// (docs/agents.md#names, docs/agents.md#agents-bundles-and-policy).
//
// # Renames
//
// An operator may rename a tool (servers.<s>.tools.overrides, docs/agents.md#overrides-and-rate-limits;
// Input.Renames). The rename is the exposed name as written (sanitized and
// cut like any name if it is not valid), never prefixed and never moved by
// the bare fallback. It is reserved: it goes before every other claim on
// the name, held names included, so a tool whose own name equals it gets
// the hash suffix (or, bare, falls back). The entry keeps its Default, the
// name it would have had without the rename, which policy rules still
// match.
//
// # Resource URIs
//
// Native resources/* use "<p>+<original uri>" where p is URIPrefix(server):
// the server name lowercased with '_' turned into '-', so the result is still
// a URI whose scheme is "<p>+<original scheme>". The seed's mcp_resources tool
// uses "<server>__<original uri>". ParseURI accepts both.
package namespace
