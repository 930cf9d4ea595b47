package store

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// Derivation labels: one HKDF "info" per use of store.encryption_key, so
// that no derived key can stand for another. Changing one changes every
// key derived with it (and orphans what was written under it).
const (
	infoSealing   = "mcp-proxy store v1: multi-round-trip request states"
	infoSessionID = "mcp-proxy store v1: session ids and request states"
	infoSecrets   = "mcp-proxy store v1: secrets at rest"
	infoKeyID     = "mcp-proxy store v1: key id"
)

// derivedKeyBytes is the size of each derived key: AES-256 and
// HMAC-SHA256 both take 32 bytes.
const derivedKeyBytes = 32

// Keys holds the keys derived from store.encryption_key (a Redis store) or
// drawn at random for this process (the memory store). None of them is
// ever written anywhere. A Keys is immutable and safe for concurrent use.
type Keys struct {
	sealing   []byte
	sessionID []byte
	secrets   *Cipher
}

// deriveKeys derives every key from the 32-byte master key.
func deriveKeys(master []byte) (*Keys, error) {
	k := &Keys{}
	var err error
	if k.sealing, err = derive(master, infoSealing); err != nil {
		return nil, err
	}
	if k.sessionID, err = derive(master, infoSessionID); err != nil {
		return nil, err
	}
	if k.secrets, err = NewCipher(master); err != nil {
		return nil, err
	}
	return k, nil
}

// randomKeys draws a master key at random: the keys of one process.
func randomKeys() (*Keys, error) {
	master := make([]byte, derivedKeyBytes)
	if _, err := rand.Read(master); err != nil {
		return nil, fmt.Errorf("store: random key: %w", err)
	}
	return deriveKeys(master)
}

func derive(master []byte, info string) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, master, nil, info, derivedKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("store: derive key: %w", err)
	}
	return k, nil
}

// Sealing is the key that seals the state of a call spanning round trips
// (docs/protocol.md), so that any replica sharing the store can open it
// and none can be forged. The caller must not modify it.
func (k *Keys) Sealing() []byte { return k.sealing }

// SessionID is the name under which a session id is stored: its HMAC, in
// base64url. A reader of the store learns no id a client could present.
func (k *Keys) SessionID(id string) string { return k.Digest("session", id) }

// Digest is the HMAC of a secret token of the given kind (a session id, an
// approval state), in base64url: the name it is stored under. The kind
// keeps equal tokens of two kinds apart.
func (k *Keys) Digest(kind, token string) string {
	m := hmac.New(sha256.New, k.sessionID)
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Secrets encrypts secrets at rest (tokens, client secrets).
func (k *Keys) Secrets() *Cipher { return k.secrets }
