package store

import "errors"

// ErrUnavailable is the error of an operation the store did not answer in
// time or could not be reached for. Its text names the store, so that a
// client told of it knows what failed.
var ErrUnavailable = errors.New("shared-state store (Redis) unavailable")

// ErrSealed is the error of a sealed value that does not open: written
// under a key this process does not have, or changed.
var ErrSealed = errors.New("store: sealed value does not open (wrong encryption_key, or tampered)")
