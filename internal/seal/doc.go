// Package seal makes opaque, tamper-evident tokens that expire: a small
// message encrypted and authenticated with AES-256-GCM under a key the
// caller supplies, together with its expiry time.
//
// The proxy seals the request states of multi-round-trip requests
// (docs/protocol.md#requests-from-servers) so that a client can carry them
// between rounds without reading or changing them, and so that any process
// holding the same key can take the next round. The key is an input: a
// random one per process (Random) when nothing is shared, or one derived
// from a shared secret (FromSecret) when replicas must open each other's
// tokens. The key is never written anywhere by this package.
package seal
