package oauthclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/store"
)

// Lease of the lock an update of a server's tokens holds in the shared
// store. A refresh runs under it and sends one request to the token
// endpoint, bounded by requestTimeout: the lease outlasts that, so it does
// not run out under a live refresh, and a replica that died holding it
// holds up the others for at most that long.
const (
	sharedLockLease = requestTimeout + 5*time.Second
	// sharedLockWait bounds how long an update waits for another
	// replica's lock: a little more than its lease.
	sharedLockWait = sharedLockLease + time.Second
	// sharedLockPoll is the first wait between two attempts at the lock,
	// doubled up to sharedLockPollMax: a refresh takes a round trip to the
	// authorization server, tens of milliseconds.
	sharedLockPoll    = 20 * time.Millisecond
	sharedLockPollMax = 250 * time.Millisecond
)

// Fields of a server's hash in the shared store: the entries document
// sealed, and a revision raised by every write (the stamp).
const (
	fieldEntries = "entries"
	fieldRev     = "rev"
)

// Key kinds in the shared store.
const (
	kindTokens    = "oauth"
	kindTokenLock = "oauth-lock"
)

// sharedTokens keeps the token store in a Redis store: one hash per server
// name ("<prefix>oauth:<server>") holding the entries document sealed with
// the store's secrets cipher (tokens and client secrets are never in
// Redis in the clear) and a revision, and a lock key per server
// ("<prefix>oauth-lock:<server>") with a lease.
type sharedTokens struct {
	r      *store.Redis
	cipher *store.Cipher
	// lockWait is sharedLockWait; tests shorten it.
	lockWait time.Duration
}

// OpenShared returns the token store kept in st, a Redis store
// (st.Shared()); every replica and CLI with the same store config sees the
// same tokens.
func OpenShared(st *store.Store) (*Store, error) {
	if !st.Shared() {
		return nil, errors.New("token store: the shared-state store is not shared (type memory)")
	}
	return &Store{shared: &sharedTokens{r: st.Redis(), cipher: st.Keys().Secrets(), lockWait: sharedLockWait}}, nil
}

func (t *sharedTokens) key(server string) (string, error) {
	if !storeNameOK.MatchString(server) {
		return "", fmt.Errorf("token store: invalid server name %q", server)
	}
	return t.r.Key(kindTokens, server), nil
}

// stamp is the server's revision, "" when it has none.
func (t *sharedTokens) stamp(server string) (string, error) {
	key, err := t.key(server)
	if err != nil {
		return "", err
	}
	var rev string
	err = t.r.Run(context.Background(), "oauth_stamp", func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		rev, err = c.HGet(ctx, key, fieldRev).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("token store: %w", err)
	}
	return rev, nil
}

func (t *sharedTokens) load(server string) ([]Entry, error) {
	key, err := t.key(server)
	if err != nil {
		return nil, err
	}
	entries, _, err := t.read(key)
	return entries, err
}

// read returns the entries stored under key and its revision ("" none).
func (t *sharedTokens) read(key string) ([]Entry, string, error) {
	var vals []any
	err := t.r.Run(context.Background(), "oauth_load", func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		vals, err = c.HMGet(ctx, key, fieldEntries, fieldRev).Result()
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("token store: %w", err)
	}
	rev, _ := vals[1].(string)
	sealed, _ := vals[0].(string)
	if sealed == "" {
		return nil, rev, nil
	}
	plain, err := t.cipher.Open([]byte(sealed), key)
	if err != nil {
		return nil, "", fmt.Errorf("token store: %s: %w", key, err)
	}
	entries, err := decodeEntries(plain, key)
	return entries, rev, err
}

// writeScript writes a server's entries (ARGV[2], "" to remove them) and
// raises its revision, only while the caller holds the lock (its token
// ARGV[1]); it returns the new revision, or false when the lease ran out
// (another replica may hold the lock now, and its write wins).
var writeScript = redis.NewScript(`
if redis.call("GET", KEYS[2]) ~= ARGV[1] then return false end
if ARGV[2] == "" then
  redis.call("HDEL", KEYS[1], "entries")
else
  redis.call("HSET", KEYS[1], "entries", ARGV[2])
end
return redis.call("HINCRBY", KEYS[1], "rev", 1)
`)

// unlockScript deletes the lock KEYS[1] if it is still the caller's.
var unlockScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0
`)

// update runs fn on server's entries while holding its lock in the store,
// and writes what fn returns.
func (t *sharedTokens) update(server string, fn func([]Entry) ([]Entry, error)) (string, error) {
	key, err := t.key(server)
	if err != nil {
		return "", err
	}
	lock := t.r.Key(kindTokenLock, server)
	token, err := t.lock(lock)
	if err != nil {
		return "", err
	}
	defer t.unlock(lock, token)
	old, rev, err := t.read(key)
	if err != nil {
		return "", err
	}
	next, err := fn(old)
	if err != nil {
		return "", err
	}
	if len(next) == 0 && len(old) == 0 {
		return rev, nil
	}
	var sealed string
	if len(next) > 0 {
		doc, err := encodeEntries(next)
		if err != nil {
			return "", err
		}
		sealed = string(t.cipher.Seal(doc, key))
	}
	var n int64
	err = t.r.Run(context.Background(), "oauth_write", func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		n, err = writeScript.Run(ctx, c, []string{key, lock}, token, sealed).Int64()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("token store: the lock on server %q ran out (held longer than %s); nothing written", server, sharedLockLease)
	}
	if err != nil {
		return "", fmt.Errorf("token store: %w", err)
	}
	return strconv.FormatInt(n, 10), nil
}

// lock takes the lock key, waiting for another holder at most lockWait,
// and returns the token that proves it is ours.
func (t *sharedTokens) lock(lock string) (string, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	deadline := time.Now().Add(t.lockWait)
	wait := sharedLockPoll
	for {
		var ok bool
		err := t.r.Run(context.Background(), "oauth_lock", func(ctx context.Context, c redis.UniversalClient) error {
			var err error
			ok, err = c.SetNX(ctx, lock, token, sharedLockLease).Result()
			return err
		})
		if err != nil {
			return "", fmt.Errorf("token store: %w", err)
		}
		if ok {
			return token, nil
		}
		if time.Now().Add(wait).After(deadline) {
			return "", fmt.Errorf("token store: %s is held by another replica (waited %s)", lock, t.lockWait)
		}
		time.Sleep(wait)
		wait = min(2*wait, sharedLockPollMax)
	}
}

// unlock gives the lock back if it is still ours. A store that does not
// answer leaves it to expire with its lease.
func (t *sharedTokens) unlock(lock, token string) {
	_ = t.r.Run(context.Background(), "oauth_unlock", func(ctx context.Context, c redis.UniversalClient) error {
		return unlockScript.Run(ctx, c, []string{lock}, token).Err()
	})
}
