package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// KeySize is the length of a Sealer's key in bytes (AES-256).
const KeySize = 32

// version is the first byte of every token: a later format gets another
// value, so an old token is refused, never misread.
const version byte = 1

// MaxTokenLen bounds the tokens Open reads: a token longer than this came
// from elsewhere (a sealed request state is well under a kilobyte plus the
// upstream's own state, which the proxy bounds by the response size).
const MaxTokenLen = 1 << 20

// hkdfInfo names what a key derived from a shared secret is for, so that
// the same secret used for something else gives an unrelated key.
const hkdfInfo = "mcp-proxy request state sealing key v1"

var (
	// ErrInvalid is the error of a token that was not sealed with this key
	// for this purpose, or was changed since: malformed, truncated,
	// tampered with.
	ErrInvalid = errors.New("seal: invalid token")
	// ErrExpired is the error of an authentic token past its expiry.
	ErrExpired = errors.New("seal: token expired")
)

// Sealer seals and opens tokens with one key. It is safe for concurrent
// use. The zero value is not usable: make one with New, Random or
// FromSecret.
type Sealer struct {
	aead cipher.AEAD
}

// New returns a Sealer with key, which must be KeySize bytes.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("seal: key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Random returns a Sealer with a fresh random key: its tokens open in this
// process only, and not after it restarts.
func Random() *Sealer {
	key := make([]byte, KeySize)
	_, _ = rand.Read(key) // never fails (Go 1.24)
	s, err := New(key)
	if err != nil {
		panic(err) // unreachable: the key has the right size
	}
	return s
}

// FromSecret returns a Sealer whose key is derived from secret with HKDF
// (SHA-256): every process given the same secret opens the others' tokens.
// secret should have at least 32 bytes of entropy; an empty one is refused.
func FromSecret(secret []byte) (*Sealer, error) {
	if len(secret) == 0 {
		return nil, errors.New("seal: empty secret")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, hkdfInfo, KeySize)
	if err != nil {
		return nil, fmt.Errorf("seal: derive key: %w", err)
	}
	return New(key)
}

// Seal returns a token carrying msg until expires, for purpose (which Open
// must name again: a token sealed for one purpose does not open for
// another). Each call draws a fresh nonce, so sealing the same message
// twice gives two different tokens. The token is unpadded base64url.
func (s *Sealer) Seal(purpose string, msg []byte, expires time.Time) string {
	ns := s.aead.NonceSize()
	plain := make([]byte, 8, 8+len(msg))
	binary.BigEndian.PutUint64(plain, uint64(expires.UnixMilli()))
	plain = append(plain, msg...)
	out := make([]byte, 1+ns, 1+ns+len(plain)+s.aead.Overhead())
	out[0] = version
	_, _ = rand.Read(out[1 : 1+ns]) // never fails (Go 1.24)
	out = s.aead.Seal(out, out[1:1+ns], plain, additional(purpose))
	return base64.RawURLEncoding.EncodeToString(out)
}

// Open returns the message of token when it was sealed with this key for
// purpose and has not expired at now. Errors: ErrInvalid, ErrExpired.
func (s *Sealer) Open(purpose, token string, now time.Time) ([]byte, error) {
	if len(token) > MaxTokenLen {
		return nil, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	ns := s.aead.NonceSize()
	if err != nil || len(raw) < 1+ns+s.aead.Overhead()+8 || raw[0] != version {
		return nil, ErrInvalid
	}
	plain, err := s.aead.Open(nil, raw[1:1+ns], raw[1+ns:], additional(purpose))
	if err != nil {
		return nil, ErrInvalid
	}
	expires := time.UnixMilli(int64(binary.BigEndian.Uint64(plain[:8])))
	if !now.Before(expires) {
		return nil, ErrExpired
	}
	return plain[8:], nil
}

// additional is the data authenticated with a token besides its message:
// the format version and the purpose.
func additional(purpose string) []byte {
	return append([]byte{version}, purpose...)
}
