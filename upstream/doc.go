// Package upstream owns one client connection per configured upstream MCP
// server: it starts the transport (a supervised stdio child process,
// Streamable HTTP or legacy SSE), runs the initialize handshake, discovers the
// server's tools, resources, resource templates and prompts as raw JSON, and
// publishes what it knows as immutable snapshots (Conn.Snapshot,
// Options.OnSnapshot).
//
// List and call traffic goes through mcp-go's raw transport
// (transport.Interface.SendRequest, ids "px-<n>"), never through the typed
// client, so tool schemas, unknown fields, big integers and _meta reach the
// proxy's clients byte for byte. The typed client is used only for Start,
// Initialize and Ping.
//
// Lifecycle: Start connects once in the background (connect); a session that
// dies (the child exits or closes its stdout, a keepalive ping fails, an SSE
// stream drops, an HTTP session expires) publishes StateFailed at once, fails
// its requests in flight with ErrConnectionLost, and is torn down. A failed
// snapshot carries no catalog. Reconnection is to wrap connect in Conn.run.
//
// Discovery: tools/list failures fail the connection when the server
// advertises tools; resources, templates and prompts are listed only when
// advertised, and a failure there only logs and leaves that list nil.
// list_changed notifications re-discover their kind, one run at a time, with
// bursts coalesced into one pending run.
//
// A Conn never blocks another Conn: every upstream has its own goroutines,
// its own request contexts and its own shutdown.
package upstream
