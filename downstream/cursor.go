package downstream

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/fnv"
)

// listPageSize is how many resources, templates or prompts one page of a
// merged list holds: large enough that most hosts never page, small enough
// that a host is not handed tens of thousands of items at once.
const listPageSize = 500

// errInvalidCursor is the answer to a cursor the proxy did not issue, or
// one from a list that has changed since.
var errInvalidCursor = errors.New("invalid or expired cursor")

// cursorLen is the decoded size of a cursor: an 8-byte fingerprint of the
// list it pages and a 4-byte offset.
const cursorLen = 12

// encodeCursor returns the opaque cursor of the page starting at offset of
// the list whose JSON is list.
func encodeCursor(list []byte, offset int) string {
	var b [cursorLen]byte
	binary.BigEndian.PutUint64(b[:8], fingerprint(list))
	binary.BigEndian.PutUint32(b[8:], uint32(offset))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// decodeCursor returns the offset a cursor points at in list. A cursor from
// another list (or from this list before it changed) is refused, so a host
// never gets a page of a list it did not start.
func decodeCursor(cursor string, list []byte, n int) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) != cursorLen {
		return 0, errInvalidCursor
	}
	if binary.BigEndian.Uint64(b[:8]) != fingerprint(list) {
		return 0, errInvalidCursor
	}
	off := int(binary.BigEndian.Uint32(b[8:]))
	if off <= 0 || off >= n {
		return 0, errInvalidCursor
	}
	return off, nil
}

func fingerprint(list []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(list)
	return h.Sum64()
}
