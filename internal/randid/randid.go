package randid

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
)

// read returns n random bytes.
func read(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (Go 1.24): see the package doc
	return b
}

// Hex returns n random bytes in lower-case hexadecimal: 2n characters of
// [0-9a-f].
func Hex(n int) string {
	return hex.EncodeToString(read(n))
}

// Base64URL returns n random bytes in unpadded base64url (RFC 4648 §5):
// ceil(4n/3) characters of [A-Za-z0-9_-].
func Base64URL(n int) string {
	return base64.RawURLEncoding.EncodeToString(read(n))
}

// Base64 returns n random bytes in unpadded standard base64 (RFC 4648
// §4): ceil(4n/3) characters of [A-Za-z0-9+/].
func Base64(n int) string {
	return base64.RawStdEncoding.EncodeToString(read(n))
}
