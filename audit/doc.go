// Package audit writes the proxy's audit log (docs/operations.md#audit-log): one JSON line per
// decision on a tool call, resource read or prompt get, saying who asked
// for what, whether policy and approval let it through, and how the
// upstream answered.
//
// A *Log comes from New (nil when audit.path is not set; a nil *Log
// records nothing). Record is what the call path uses: it never blocks and
// never fails. It copies what it needs from the Entry (the arguments'
// SHA-256 is computed on the caller's goroutine, the arguments themselves
// are copied only with arguments: full) and queues it; one writer
// goroutine encodes the queued entries in the order Record was called and
// appends them to the file. The caller records an entry before it returns
// the call's result, so the log never misses a call a client saw answered
// unless an entry was dropped, and every drop is counted.
//
// Backpressure: the queue holds QueueEntries entries and QueueBytes bytes
// of copied arguments. A Record that finds it full drops its entry: it is
// counted in mcp_proxy_audit_dropped_total and a warning is logged at most
// once per DropLogInterval with the number dropped since. Lines lost to a
// failed write (a full disk) are counted and logged the same way, and the
// writer reopens the file on its next write. A slow or stuck disk thus
// costs a call nothing but its entry.
//
// The file is created 0600 (an existing one is narrowed to 0600) in a
// directory created 0700 if missing. Rotation: before a line would take the
// file past max_bytes, the file is closed and renamed: <path> becomes
// <path>.1, <path>.1 becomes <path>.2, and so on; <path>.<max_files-1> is
// deleted, so at most max_files files exist, the live one included
// (max_files: 1 keeps only the live file, truncated at each rotation). A
// line longer than max_bytes is written to a file of its own.
//
// Durability: each batch of lines (whatever was queued when the writer
// woke, at most WriteBatchBytes; a writer woken by a lone entry first waits
// GatherDelay for others to join it, less once GatherEntries or
// WriteBatchBytes are queued or Close is called) reaches the kernel in one
// write; the file is fsynced at most once per SyncInterval while lines are
// being written, before each rotation and at Close. A crash of the proxy loses only the
// queue (at most GatherDelay of entries on a busy proxy); a crash of the machine loses at most the last SyncInterval.
//
// Secrets: every line passes through a sanitize.Scrubber built from the
// config's secret values, after the package's own secret shapes
// (sanitize.Text): a token, password or key that reaches an argument, an
// error text or a URI query is written as [REDACTED], so is the credential
// of any HTTP authentication scheme (Basic, Bearer, Digest, Negotiate,
// AWS4-HMAC-SHA256...) and the value of a credential-shaped key
// (authorization, cookie, x-api-key...) at any depth; URL queries are
// dropped. The writer scrubs only the values that came from a client, an
// upstream or the config, each alone, when no configured secret can occur
// in the rest of a line (member names, numbers, the time, digests, the
// values the package chooses), and the whole line otherwise: the bytes
// are those of scrubbing the whole line (FuzzNarrowScrub). Arguments are
// recorded as a digest by default (arguments:
// digest): the hex SHA-256 of the arguments' JSON as the client sent it
// with insignificant white space removed (key order, number spelling and
// string escapes count), so a known value can be matched against it
// without the log holding it; full adds the value (scrubbed; arguments
// over MaxFullArguments bytes are left out and say so), none records
// neither.
//
// Close stops Record (later entries are dropped silently), writes what is
// queued, fsyncs and closes the file, bounded by its ctx.
package audit
