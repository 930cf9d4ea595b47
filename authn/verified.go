package authn

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of the cache of verified JWTs.
const (
	// maxVerifiedTokens bounds the cache; when it is full the whole cache
	// is dropped (the next request of each client verifies again), which
	// keeps a flood of distinct valid tokens from growing it.
	maxVerifiedTokens = 4096
	// verifiedTTL is the longest a verified token is taken on trust: once
	// a minute each token is verified in full again, which also lets a key
	// set older than keysMaxAge be refreshed, as without the cache.
	verifiedTTL = time.Minute
)

// verifiedCache remembers the access tokens an endpoint accepted, so that
// a client sending the same token on every request (all of them do) pays
// for its signature, its claims' decoding and the agents' match rules once
// a minute instead of on every request
// (docs/security.md#oauth-on-the-http-listener).
//
// An entry is keyed by the SHA-256 of the endpoint's agent ("" for the
// default endpoint) and the token (the token itself is not kept) and holds
// the Principal the full check returned. It is used only while the token
// has not expired (with clockSkew, as the full check), for at most
// verifiedTTL, and while the issuer's key set is the one it was checked
// with: a refetch of the set forgets every entry. Only accepted tokens are
// cached; a refused one is checked in full every time.
//
// It is safe for concurrent use; a hit takes no lock.
type verifiedCache struct {
	entries sync.Map // [32]byte → *verifiedEntry
	count   atomic.Int64
}

// verifiedEntry is one accepted token. p is never modified once stored.
type verifiedEntry struct {
	p     Principal
	until time.Time // min(exp + clockSkew, checked at + verifiedTTL)
	keys  uint64    // the key set generation it was checked with
}

// verifiedKeyStack is how long a key's input (the endpoint's agent, a
// zero byte and the token) can be and still be hashed from a buffer on the
// stack; JWTs are rarely longer than 2 KiB. A longer one is hashed from the
// heap (tokens are at most maxTokenBytes).
const verifiedKeyStack = 2 << 10

// verifiedKey is the cache key of tok at pathAgent's endpoint: the SHA-256
// of pathAgent, a zero byte and tok.
func verifiedKey(tok, pathAgent string) [32]byte {
	var buf [verifiedKeyStack]byte
	in := buf[:0]
	if n := len(pathAgent) + 1 + len(tok); n > len(buf) {
		in = make([]byte, 0, n)
	}
	in = append(append(append(in, pathAgent...), 0), tok...)
	return sha256.Sum256(in)
}

// get returns the Principal of a token checked with key set generation
// keys and still good at now, or nil. It is the entry's own, shared by
// every hit: callers must not modify it.
func (c *verifiedCache) get(k [32]byte, now time.Time, keys uint64) *Principal {
	v, ok := c.entries.Load(k)
	if !ok {
		return nil
	}
	e := v.(*verifiedEntry)
	if e.keys != keys || !now.Before(e.until) {
		c.entries.CompareAndDelete(k, v)
		return nil
	}
	return &e.p
}

// put remembers p, the Principal of a token checked at now with key set
// generation keys.
func (c *verifiedCache) put(k [32]byte, p *Principal, now time.Time, keys uint64) {
	until := now.Add(verifiedTTL)
	if exp := p.Expiry.Add(clockSkew); !p.Expiry.IsZero() && exp.Before(until) {
		until = exp
	}
	if c.count.Add(1) > maxVerifiedTokens {
		c.entries.Clear()
		c.count.Store(1)
	}
	c.entries.Store(k, &verifiedEntry{p: *p, until: until, keys: keys})
}
