// Package randid makes unguessable identifiers: n bytes from crypto/rand,
// written in one of the encodings the proxy puts on the wire (session ids,
// elicitation ids, progress tokens, approval states, input-request tokens,
// the status page's token, CSRF seeds and CSP nonces).
//
// The functions never fail: crypto/rand.Read does not return an error on
// the platforms Go supports (it crashes the program instead, Go 1.24).
package randid
