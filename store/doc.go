// Package store is where the proxy keeps the state a request may need from
// another replica (docs/shared-state.md): HTTP sessions, "always"
// approvals, rate-limit buckets and slots, single-use approval states, and
// the keys derived from store.encryption_key.
//
// A Store is either the memory store (the default: one process; each kind
// of state stays in the package that uses it, exactly as without a store)
// or a Redis store, which every replica configured alike shares. The kinds
// of state that live in Redis each have a type of their own built on the
// instrumented client (Redis): its Run bounds every operation by
// OpTimeout, counts it in the store's metrics and turns a dead connection
// into ErrUnavailable, so a request that needs the store fails fast with an
// error naming it, never falls back to per-replica state.
//
// Keys: every Redis key starts with store.key_prefix, then the kind of
// state (Redis.Key). Secrets are encrypted before they are written
// (Cipher); session ids are stored under an HMAC (Keys.SessionID), so a
// reader of Redis can neither read a token nor take over a session.
package store
