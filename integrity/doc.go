// Package integrity protects clients from tools that change under them or
// hide instructions in their definitions (docs/security.md#tool-integrity).
//
// # Fingerprints and pins
//
// Every upstream tool is fingerprinted: the SHA-256 of the canonical JSON
// (Canonicalize: sorted keys, no insignificant whitespace, numbers as
// written) of its name, title, description, inputSchema, outputSchema and
// annotations, taken from the upstream's own tool object. Pins live in
// <state_dir>/pins/<server>.json (Store), one file per server, holding each
// pinned tool's fingerprint and canonical definition and each pending
// tool's current definition, so `mcp-proxy tools diff` and `tools approve`
// read the same facts as a running proxy. Files are written atomically
// (0600 in a 0700 directory); every read-modify-write holds a flock on
// <server>.lock, so the CLI may approve while proxies run. A pin file that
// cannot be read is ErrCorruptPins naming the file: Open refuses to start,
// and nothing ever writes over it.
//
// With a Redis store (NewSharedStore, Options.Shared) the same documents
// live in Redis, written by compare-and-set on a revision; each write is
// announced on a channel so that every replica's Watch re-reads at once.
//
// Trust on first use: the first time a server lists tools, all of them are
// pinned. Afterwards, per server policy (Policy):
//
//   - a tool whose fingerprint changed is "changed": its new definition is
//     recorded as pending; pinning: quarantine holds it, pinning: warn logs
//     and counts it and serves it (the pin stays, so the change remains
//     pending until approved: warn never re-pins by itself);
//   - a tool without a pin is "new": new_tools: allow pins it, new_tools:
//     quarantine records it as pending and holds it (under either pinning
//     mode other than off);
//   - a tool back at its pinned fingerprint drops its pending record and is
//     released;
//   - pinning: off reads and writes no pin file.
//
// # The description scan
//
// The scan reads what clients would see (Tool.Visible: after tool
// overrides), so an operator's re-description releases a tool the scan
// held, while the fingerprint stays that of the upstream's own definition.
// It reads the tool's description and title, annotations.title, every
// description and title inside inputSchema and outputSchema, and every
// string under their enum, const, default and examples keywords at any
// depth (values a model reads as well; strip never changes them). Before
// the phrase detectors run, a text is normalized: invisible characters
// dropped, white space collapsed, and each other character compared on
// its ASCII look-alike (compatibility decomposition, nonspacing marks
// dropped, then Unicode's confusables data: package confusables), so
// homoglyph and fullwidth spellings read as what they look like. Runs of
// base64 that decode to text are scanned again as text. Detectors are
// data (invisibleClasses, phraseRules, plus the base64, cross-server and
// length checks), each finding has a Kind (the metric label) and a Level: warn
// findings are only logged and counted; under scan: quarantine a
// quarantine-level finding holds the tool; scan: strip removes invisible
// characters and hidden markup from what clients see (Verdict.Visible) and
// serves the tool.
//
// # Wiring
//
// A catalog build calls Guard.Review once per connected server with the
// server's tools (upstream bytes and client-visible bytes) and a Peers
// index of every server's tool names, and uses each Verdict: a held tool is
// not listed and not searchable, keeps its exposed name, and a call to it
// gets an isError result with Verdict.Refusal (rule filter.RuleQuarantined);
// a listed tool is shown as Verdict.Visible. Review caches its work by the
// bytes it was given, so calling it on every build is cheap, and nothing
// of this package runs on the call path. Guard.Watch notices approvals
// (and hand edits) in the pin files and names the servers whose verdicts
// changed, so the catalog rebuilds them and sends list_changed.
package integrity
