package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
)

// Layout of a sealed value: version, key id, nonce, then AES-256-GCM's
// ciphertext and tag.
const (
	sealVersion = 1
	keyIDBytes  = 4
	nonceBytes  = 12
	sealHeader  = 1 + keyIDBytes + nonceBytes
)

// Cipher encrypts secrets at rest with AES-256-GCM under a key derived from
// store.encryption_key. Each sealed value names the key that sealed it (a
// key id derived from the key itself), so that a new key can be added while
// values sealed under an older one are still read until they are written
// again. A Cipher is immutable and safe for concurrent use.
type Cipher struct {
	current keyID
	aeads   map[keyID]cipher.AEAD
}

type keyID [keyIDBytes]byte

// NewCipher builds a Cipher that seals under current and opens values
// sealed under current or any of older. Each key is a 32-byte master key
// (store.encryption_key decoded).
func NewCipher(current []byte, older ...[]byte) (*Cipher, error) {
	c := &Cipher{aeads: map[keyID]cipher.AEAD{}}
	for i, master := range append([][]byte{current}, older...) {
		id, aead, err := cipherKey(master)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			c.current = id
		}
		if _, dup := c.aeads[id]; !dup {
			c.aeads[id] = aead
		}
	}
	return c, nil
}

func cipherKey(master []byte) (keyID, cipher.AEAD, error) {
	var id keyID
	raw, err := derive(master, infoKeyID)
	if err != nil {
		return id, nil, err
	}
	copy(id[:], raw)
	key, err := derive(master, infoSecrets)
	if err != nil {
		return id, nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return id, nil, fmt.Errorf("store: cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return id, nil, fmt.Errorf("store: cipher: %w", err)
	}
	return id, aead, nil
}

// Seal encrypts plaintext under the current key. context is authenticated
// but not stored: pass the name the value is stored under, so that a
// sealed value copied under another name does not open.
func (c *Cipher) Seal(plaintext []byte, context string) []byte {
	out := make([]byte, sealHeader, sealHeader+len(plaintext)+c.aeads[c.current].Overhead())
	out[0] = sealVersion
	copy(out[1:], c.current[:])
	nonce := out[1+keyIDBytes : sealHeader]
	if _, err := rand.Read(nonce); err != nil {
		// crypto/rand does not fail on the systems Go supports.
		panic(fmt.Sprintf("store: random nonce: %v", err))
	}
	return c.aeads[c.current].Seal(out, nonce, plaintext, []byte(context))
}

// Open decrypts a value Seal returned for the same context, under whichever
// of the Cipher's keys sealed it. A value that is not one, sealed under a
// key the Cipher lacks, or changed, is ErrSealed.
func (c *Cipher) Open(sealed []byte, context string) ([]byte, error) {
	if len(sealed) < sealHeader || sealed[0] != sealVersion {
		return nil, ErrSealed
	}
	var id keyID
	copy(id[:], sealed[1:])
	aead, ok := c.aeads[id]
	if !ok {
		return nil, ErrSealed
	}
	plain, err := aead.Open(nil, sealed[1+keyIDBytes:sealHeader], sealed[sealHeader:], []byte(context))
	if err != nil {
		return nil, ErrSealed
	}
	return plain, nil
}
