// Package upstream owns one client connection per configured upstream MCP
// server: it starts the transport (a supervised stdio child process,
// Streamable HTTP or legacy SSE), runs the initialize handshake, discovers the
// server's tools, resources, resource templates and prompts as raw JSON, and
// publishes what it knows as immutable snapshots (Conn.Snapshot,
// Options.OnSnapshot).
//
// Every message goes through the package's own wires (wire.go; ids
// "px-<n>"), the handshake included (handshake.go), so tool schemas,
// unknown fields, big integers and _meta reach the proxy's clients byte for
// byte, both ways. A wire writes each request as it builds it and hands
// back the result as the server wrote it, routed by its id's bytes: the
// stdio wire (stdiotransport.go) reads each stdout line once and validates
// it once; the Streamable HTTP wire (httpwire.go) POSTs each message and
// reads the answer from a JSON body or the POST's event stream (resumed
// with Last-Event-ID when cut off), keeps the session id and protocol
// version headers, listens on the GET stream and ends the session with a
// DELETE; the legacy SSE wire (ssewire.go) reads its one event stream and
// POSTs to the endpoint it names. Every message is read by readMessage
// (wire.go), which replaces ill-formed UTF-8 with U+FFFD first (a valid
// message passes untouched), and a result that is not a JSON object fails
// its request with an *InvalidResultError (request.go). mcp-go's client is not used: only its
// mcp types, for the handshake's and discovery's decoding.
//
// Lifecycle: Start connects in the background (connect, bounded by
// connect_timeout). A session that dies (the child exits or closes its
// stdout, a keepalive ping fails, an SSE stream drops, an HTTP session
// cannot be re-established) publishes StateFailed at once, fails its
// requests in flight with ErrConnectionLost (never re-sent), and is torn
// down. For reconnect_wait after the drop the snapshots keep its catalog
// (Snapshot.ReconnectUntil, Listed) and new requests wait for the
// reconnection, as they wait for the first connection (wait.go); otherwise
// they get a *DownError (ErrNotConnected) at once, saying why and when the
// next attempt starts. The supervisor (Conn.run, supervise.go) then
// reconnects on the schedule of docs/operations.md#reconnection:
// waits of 1, 2, 4, 8, 16 s (±20 % jitter, capped at 60 s) before 5
// attempts, publishing StateConnecting during each and StateFailed (with
// Attempt and NextRetry) between them; then StateParked, with a full connect
// attempt every 300 s until one succeeds. A failed first connection is
// retried the same way. Every new session publishes StateConnected with its
// catalog under a new Generation. A failed snapshot carries no catalog,
// except within the reconnect window.
//
// HTTP session expiry: a 404 or 410 for the session id (errSessionGone)
// means the server refused the request unexecuted.
// The supervisor renews the session with a fresh transport and client
// (initialize and full discovery), publishing the catalog only if it
// changed, and every request that met the expiry is re-sent once on the new
// session; the old one is closed when its requests in flight end. A failed
// renewal, or a 404 again on the re-sent request, drops the connection.
//
// Discovery: tools/list failures fail the connection when the server
// advertises tools; resources, templates and prompts are listed only when
// advertised, and a failure there only logs and leaves that list nil.
// list_changed notifications re-discover their kind, one run at a time, with
// bursts coalesced into one pending run; a re-discovery that finds nothing
// new publishes nothing. A new session's first discovery runs before it is
// published, and notifications that arrive meanwhile become one run after.
//
// Authorization (auth.go, docs/security.md#oauth-upstreams): a server with auth type bearer gets
// its static token as a header; oauth and client_credentials servers send
// every HTTP request through an oauthclient.Transport. When a request finds
// that a login is needed (no token, a refused refresh), the session dies
// with an error matching ErrNeedsAuth and the Conn publishes
// StateNeedsAuth instead of entering the reconnect schedule: with
// AuthOptions.Interactive it starts the login itself (auth.open, the log,
// the OnAuthorizationURL hook), and in any case it connects again as soon
// as a token is at hand, its own or one `mcp-proxy auth login` stored.
//
// Requests of the server to the client (relay.go) are read from the bytes
// they came in: a stdio line, or the data of an event of an http or sse
// server's event streams (inbox.go). Their params reach
// Options.OnRequest as sent and the client's result goes back as its bytes;
// a request naming a member twice is refused. They are answered at most
// maxServerRequests at a time per session (pings at once, on the stdio read
// loop); the excess is refused at once. A line goes to a stdio child's
// stdin first in one write that does not wait; what the pipe does not take
// then has a deadline that moves with progress: a child that takes no byte
// for the stall timeout is hung, and its session drops (stdiotransport.go).
//
// SetLogLevel keeps the log level the clients want from the server and
// applies it on every connection (loglevel.go).
//
// Stdio children (process.go, children*.go, reaper*.go): each runs in its
// own process group; on Linux it gets SIGKILL when the proxy dies (a
// parent-death signal, from a thread kept for the life of the process), and
// a Reaper makes the proxy the subreaper of their descendants, collecting
// and, at shutdown, ending those whose parent died.
//
// A Conn never blocks another Conn: every upstream has its own goroutines,
// its own request contexts and its own shutdown.
package upstream
